"""CPU figures for the judge-throughput bench on a shared machine (issue 28 item 1).

- DatabaseBackendCpu: the CPU time of the PostgreSQL backends serving ONE database (found
  by their process title, "postgres: ... USER DBNAME HOST(PORT) state", in /proc), so other
  databases' work on the same server does not count, as it does in the whole server's sum.
- PySpy: a sampling profile of a process and its children by py-spy (not part of the
  project's environment: give the path of a py-spy binary), in py-spy's "raw" format
  (collapsed stacks, one "frame;frame;... count" line each).
- profile_summary: the top frames of such a profile, by own samples and by samples below.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections import Counter
from pathlib import Path


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def database_backends(db_name: str) -> list[int]:
    """Return the pids of the PostgreSQL backends connected to database `db_name` (their
    process title names the database as its fourth word: "postgres: 15/main: USER DB ...")."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "postgres":
                continue
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        words = title.split()
        if db_name in words[3:5]:
            pids.append(int(entry.name))
    return pids


class DatabaseBackendCpu:
    """CPU seconds used by one database's PostgreSQL backends between start and stop().

    Backends are looked up and read every `every` seconds on a thread: one alive at the
    start counts from its reading then, one that appears later counts from 0 (it started
    inside the window). A backend that ends between two readings loses what it used after
    the last one, so the figure is a lower bound; `ended` says how many did (a worker keeps
    its connections, CONN_MAX_AGE, so normally none)."""

    def __init__(self, db_name: str, every: float = 0.25) -> None:
        self.db_name, self.every = db_name, every
        self.start: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.ended = 0
        self._read(initial=True)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _read(self, initial: bool = False) -> None:
        alive = set()
        for pid in database_backends(self.db_name):
            try:
                used = _cpu_seconds(pid)
            except (FileNotFoundError, ProcessLookupError):
                continue
            alive.add(pid)
            if initial:
                self.start[pid] = used
            self.start.setdefault(pid, 0.0)
            self.last[pid] = used
        self.ended = len(set(self.last) - alive)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._read()

    def stop(self) -> float:
        """Stop sampling; return the CPU seconds used in the window."""
        self._stop.set()
        self._thread.join()
        self._read()
        return sum(self.last[p] - self.start[p] for p in self.last)


class PySpy:
    """`py-spy record` of a process and its subprocesses, from construction to stop().

    --nonblocking: the profiled processes are not paused to be read (py-spy's own CPU goes
    on the same machine, not into theirs). --gil: only the thread holding the GIL is
    sampled, so a sample is Python (or C code called from it) at work; a thread blocked in
    a socket read or waiting for PostgreSQL's answer has let the GIL go and is not counted,
    as it may be by py-spy's idle heuristics on a machine whose CPUs are all taken."""

    def __init__(self, binary: str, pid: int, out: Path, rate: int = 200) -> None:
        self.out = out
        self.process = subprocess.Popen(
            [
                binary,
                "record",
                "--pid",
                str(pid),
                "--subprocesses",
                "--nonblocking",
                "--gil",
                "--rate",
                str(rate),
                "--format",
                "raw",
                "--output",
                str(out),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> Path:
        """Stop recording (SIGINT: py-spy then writes its file); return the file's path."""
        self.process.send_signal(signal.SIGINT)
        said, _ = self.process.communicate(timeout=60)
        if not self.out.exists():
            raise RuntimeError(
                f"py-spy (exit {self.process.returncode}) wrote no profile: "
                + said.decode(errors="replace")[-2000:]
            )
        return self.out


_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def _frame_name(frame: str) -> str:
    """Return "module-ish/file.py:function" for one py-spy frame "function (path:line)",
    the path cut to what follows site-packages/ or the project root."""
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    path = m.group("file")
    for marker in ("site-packages/", "/lib/python3.11/", "/wt-", "/work/main/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            if marker == "/wt-":
                path = path.split("/", 1)[-1]
            break
    return f"{path}:{m.group('func')}"


def profile_summary(raw: Path, top: int = 25) -> str:
    """Return a Markdown table of a py-spy raw profile's top frames: per function
    ("file:function", lines merged), its own samples (the CPU spent in it) and its samples
    below (itself and what it called), as shares of all samples. Process and thread
    frames are dropped."""
    own: Counter[str] = Counter()
    below: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [
            _frame_name(f) for f in stack.split(";") if not f.startswith(("process ", "thread "))
        ]
        if not frames:
            continue
        total += n
        own[frames[-1]] += n
        for name in set(frames):
            below[name] += n
    lines = [
        f"{total:,} samples. Own = the function itself; below = it and what it called.",
        "",
        "| function | own | below |",
        "|---|---:|---:|",
    ]
    names = [name for name, _ in own.most_common(top)]
    for name in names:
        lines.append(
            f"| `{name}` | {100 * own[name] / total:.1f}% | {100 * below[name] / total:.1f}% |"
        )
    return "\n".join(lines)
