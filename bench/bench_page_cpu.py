"""Server CPU of the review item page and the queue: this tree against a reference commit.

    .venv/bin/python bench/bench_page_cpu.py [--ref main] [--rounds 4] [--setup] [--no-write]

Issue 28 item 3. Both trees' code serves the same database and the same requests, in
alternating rounds (reference, this tree, reference, ...) so that the load of a shared
machine falls on both alike. Each round is one process: Django's WSGI handler (every
middleware, no network, no test-client instrumentation) serving a signed-in reviewer

- `item`: the review item pages of the first 40 open items of the queue,
- `queue`: queue pages 1-20 (`/review/?page=N`),
- `healthz`: `/healthz` 40 times, the reference request (middleware and a JSON body),

after one request of each (templates compiled) and an emptied cache: each page's first
visit (`item first`, `queue first`: nothing cached, as for a page nobody opened since the
last change) then its second (`item`, `queue`: what the first left in the cache): the
thread's CPU time (time.thread_time) and SQL queries of every request.
Figures are the median per request over all rounds, with the ratio to `healthz` measured
in the same process.

Environment: BENCH_LOAD_DB (default snaglist_load), BENCH_LOAD_REDIS_URL (default
redis://127.0.0.1:6379/11): the database of bench/bench_load.py, which `--setup` makes
(drops and re-creates it: seeded full-scale bundle, triage, 56 reviewers). The reference
tree is `git archive REF` in a temporary folder; both run this venv's Python.
Writes the "## Page CPU" section of bench/README.md unless --no-write.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from readme_section import write_section  # bench/ is sys.path[0] when run as a script

ROOT = Path(__file__).resolve().parents[1]
PY = str(ROOT / ".venv" / "bin" / "python")
DB_NAME = os.environ.get("BENCH_LOAD_DB", "snaglist_load")
REDIS_URL = os.environ.get("BENCH_LOAD_REDIS_URL", "redis://127.0.0.1:6379/11")
SECTION = "## Page CPU"
GOALS = {"item": 25.0, "queue": 15.0}  # ms of server CPU, issue 28

PROBE = r"""
import io, json, os, sys, time
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.contrib.auth.models import User
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from review.models import ReviewItem

client = Client()
client.force_login(User.objects.get(username=sys.argv[1]))
cookie = "; ".join(f"{k}={v.value}" for k, v in client.cookies.items())
handler = WSGIHandler()


def get(path):
    p, _, q = path.partition("?")
    env = {"REQUEST_METHOD": "GET", "PATH_INFO": p, "QUERY_STRING": q, "SCRIPT_NAME": "",
           "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80", "HTTP_HOST": "127.0.0.1",
           "HTTP_COOKIE": cookie, "wsgi.input": io.BytesIO(b""), "wsgi.url_scheme": "http",
           "wsgi.errors": sys.stderr}
    status = []
    body = b"".join(handler(env, lambda s, h: status.append(s)))
    if not status[0].startswith("200"):
        raise SystemExit(f"{path}: {status[0]}")
    return body


ids = list(ReviewItem.objects.exclude(status__in=ReviewItem.CLOSED)
           .order_by("-priority", "id").values_list("id", flat=True)[:40])
routes = {
    "item": [f"/review/items/{i}/" for i in ids],
    "queue": [f"/review/?page={p}" for p in range(1, 21)],
    "healthz": ["/healthz"] * 40,
}
for urls in routes.values():
    get(urls[-1])  # templates compiled, the process's connections made
from django.core.cache import cache
cache.clear()  # every page's first visit below finds nothing cached


def measure(urls):
    cpu, queries = [], []
    for url in urls:
        with CaptureQueriesContext(connection) as ctx:
            t0 = time.thread_time()
            get(url)
            cpu.append((time.thread_time() - t0) * 1000)
        queries.append(len(ctx.captured_queries))
    return {"cpu": cpu, "queries": queries}


out = {}
for kind, urls in routes.items():
    out[kind + " first"] = measure(urls)
    out[kind] = measure(urls)
print("JSON" + json.dumps(out))
"""


def _env() -> dict:
    return {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB_NAME}",
        "REDIS_URL": REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }


def _probe(tree: Path, user: str) -> dict:
    out = subprocess.run(
        [PY, "-c", PROBE, user],
        cwd=tree,
        env=_env(),
        check=True,
        text=True,
        capture_output=True,
        timeout=600,
    ).stdout
    return json.loads(out.split("JSON", 1)[1])


def _export(ref: str, into: Path) -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=ROOT, check=True, text=True, capture_output=True
    ).stdout.strip()
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return commit


def _summary(runs: list[dict]) -> dict:
    out = {}
    for kind in ("item", "queue", "healthz", "item first", "queue first"):
        cpu = [x for r in runs for x in r[kind]["cpu"]]
        qs = [x for r in runs for x in r[kind]["queries"]]
        out[kind] = {"p50": statistics.median(cpu), "qmin": min(qs), "qmax": max(qs)}
    return out


def report(args, ref_commit: str, here: str, before: dict, after: dict, loads: list) -> str:
    def row(label, s, kind, ref=None):
        ratio = s[kind]["p50"] / s["healthz"]["p50"]
        change = f" ({s[kind]['p50'] / ref[kind]['p50']:.2f}x the reference)" if ref else ""
        return (
            f"| {kind} | {label} | **{s[kind]['p50']:.1f} ms**{change} | {ratio:.1f}x |"
            f" {s[kind]['qmin']}-{s[kind]['qmax']} |"
        )

    lines = [
        SECTION,
        "",
        "`bench/bench_page_cpu.py` (issue 28 item 3): server CPU per request of the review item",
        f"page (40 items) and the queue (pages 1-20) of `{DB_NAME}` (bench/bench_load.py's",
        "full-scale database after its load run), served by Django's WSGI handler in one process",
        "per round (all middleware; Redis as cache, emptied at the start of each round; no",
        f"network), first and second visit of each page; {args.rounds} rounds of each tree,",
        f"alternating. *Reference* is commit {ref_commit} (`{args.ref}`), *this tree* is {here}; `healthz`",
        "is the reference request measured in the same process (ratio column = page CPU / healthz CPU).",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs shared with other sessions; Python",
        f"{platform.python_version()}; load average {loads[0]:.1f} at the start, {loads[-1]:.1f}"
        " at the end.",
        "",
        "| route (visit) | code | CPU p50 | / healthz | SQL queries |",
        "|---|---|---|---|---|",
    ]
    for kind in ("item first", "item", "queue first", "queue"):
        lines.append(row("reference", before, kind))
        lines.append(row("this tree", after, kind, before))
    lines.append(row("reference", before, "healthz"))
    lines.append(row("this tree", after, "healthz"))
    lines += [
        "",
        "Goals (issue 28, on a quiet machine): item ≤ 25 ms, queue ≤ 15 ms: "
        + "; ".join(
            f"{k} {'met' if after[k]['p50'] <= g else '**not met**'} ({after[k]['p50']:.1f} ms)"
            for k, g in GOALS.items()
        )
        + " here.",
        "",
        "Re-run: `.venv/bin/python bench/bench_page_cpu.py` after `bench/bench_load.py`",
        "(`--setup` makes the database itself; `BENCH_LOAD_DB`, `BENCH_LOAD_REDIS_URL`).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="main", help="the reference commit (default main)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--user", default="load55", help="the signed-in reviewer")
    parser.add_argument("--setup", action="store_true", help="make the database first")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.setup:
        import bench_load

        bench_load.setup_data()
        bench_load.create_users(56)
    here = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        check=True,
        text=True,
        capture_output=True,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain"], cwd=ROOT, text=True, capture_output=True
    )
    here += " plus uncommitted changes" if dirty.stdout.strip() else ""
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        ref_commit = _export(args.ref, Path(tmp))
        before, after = [], []
        for n in range(args.rounds):
            t0 = time.perf_counter()
            before.append(_probe(Path(tmp), args.user))
            after.append(_probe(ROOT, args.user))
            print(f"round {n + 1}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    loads.append(os.getloadavg()[0])
    text = report(args, ref_commit, here, _summary(before), _summary(after), loads)
    print(text)
    if not args.no_write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
