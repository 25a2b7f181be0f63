"""Start-up: CPU time of `manage.py check` for Snaglist against a bare Django project.

    .venv/bin/python bench/bench_startup.py [--runs 7] [--no-write]

Every command, web and worker process and pytest process pays Django's start-up, so this
is the figure issue 28 item 2 sets a goal on: our `manage.py check` within 3x the check of a
bare `django-admin startproject` project, both run with the same interpreter and the same
virtualenv in this one run (the reference moves with the machine and the venv's bytecode).

Each measurement is a fresh child process (`python manage.py check`, SQLite, no
DATABASE_URL or REDIS_URL); the figure is the child's user+system CPU from os.wait4, the
median of --runs, after one untimed warm-up of each (the page cache). It also reports
whether the venv holds compiled bytecode (the Makefile compiles it at install; with
PYTHONDONTWRITEBYTECODE=1, as on these machines, nothing else would) and which heavy
libraries the check imports (they should be none: pandas, scipy, sklearn load only where a
board is computed).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Start-up"
GOAL_RATIO = 3.0
HEAVY = ("pandas", "scipy", "sklearn", "krippendorff", "openai", "anthropic")

from readme_section import write_section  # noqa: E402 (bench/ is sys.path[0])


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


def cpu_of(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """Run `cmd` in `cwd`; return (CPU seconds of the child, wall seconds). Raises on failure."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed in {cwd}: {proc.stderr.read().decode()}")
    proc.stderr.close()
    return usage.ru_utime + usage.ru_stime, wall


def measure(cmd: list[str], cwd: Path, runs: int) -> tuple[float, float]:
    """Median (CPU s, wall s) of `runs` runs after one warm-up."""
    cpu_of(cmd, cwd)
    samples = [cpu_of(cmd, cwd) for _ in range(runs)]
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def heavy_imports(python: str) -> list[str]:
    """Heavy libraries in sys.modules after our `manage.py check` (should be none)."""
    code = (
        "import os, sys, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', "
        "'config.settings'); django.setup(); import io; "
        "from django.core.management import call_command; "
        "call_command('check', verbosity=0, stdout=io.StringIO()); "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [python, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True, check=True
    )
    return [m for m in out.stdout.strip().split(",") if m]


def bytecode_compiled() -> bool:
    """Whether the venv's Django has a compiled .pyc for this interpreter (a sample)."""
    import django

    cache = Path(django.__file__).parent / "__pycache__"
    tag = sys.implementation.cache_tag
    return (cache / f"__init__.{tag}.pyc").exists()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-write", action="store_true", help="do not touch bench/README.md")
    args = parser.parse_args()
    python = sys.executable
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "bare"
        bare.mkdir()
        admin = Path(sysconfig.get_path("scripts")) / "django-admin"
        subprocess.run([str(admin), "startproject", "bare", str(bare)], check=True)
        subprocess.run(
            [python, "-m", "compileall", "-q", str(bare)], check=True, stdout=subprocess.DEVNULL
        )
        ref_cpu, ref_wall = measure([python, "manage.py", "check"], bare, args.runs)
    our_cpu, our_wall = measure([python, "manage.py", "check"], ROOT, args.runs)
    ratio = our_cpu / ref_cpu
    heavy = heavy_imports(python)
    compiled = bytecode_compiled()
    met = "yes" if ratio <= GOAL_RATIO else "no"
    text = f"""{SECTION}

`bench/bench_startup.py`: CPU time (user + system, from `os.wait4`) of `manage.py check`,
which every command, web and worker process and pytest process pays, for Snaglist and for a
bare `django-admin startproject` project, with the same interpreter and venv in one run;
median of {args.runs} fresh processes after one warm-up each. Goal (issue 28 item 2): at most
{GOAL_RATIO:g}x the bare project's.

Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()};
load average {load:.2f} at the start; venv bytecode compiled: {"yes" if compiled else "no"};
PYTHONDONTWRITEBYTECODE={os.environ.get("PYTHONDONTWRITEBYTECODE", "")!s}.

| project | CPU (median) | wall (median) | ratio | goal | met |
|---|---|---|---|---|---|
| bare `startproject` (reference) | {ref_cpu:.2f} s | {ref_wall:.2f} s | 1.00x | | |
| Snaglist | **{our_cpu:.2f} s** | {our_wall:.2f} s | **{ratio:.2f}x** | <= {GOAL_RATIO:g}x | {met} |

Heavy libraries imported by the check: {", ".join(heavy) if heavy else "none"} (pandas,
scipy and scikit-learn are imported inside the functions that build frames or compute a
board, not by settings, middleware or URL loading).

How: the Makefile compiles the venv's bytecode once after installing (`compileall -j0`,
~15 s on 2 cores; these machines set PYTHONDONTWRITEBYTECODE=1, so without it every
process compiled Django, DRF and the rest from source); pandas is imported lazily in
`scoring/selectors.py` and `engine/table.py` / `robustness.py`. Before (cfd5b7b, same
venv without bytecode): 3.2 s CPU for our check, pandas imported by `config.middleware`.

Re-run: `.venv/bin/python bench/bench_startup.py` (rewrites this section only).
"""
    print(text)
    if not args.no_write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
