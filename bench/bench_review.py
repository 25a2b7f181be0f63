"""Time the review queue page and the review item page on full-scale data; write bench/README.md.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/snaglist_h6_bench \
        .venv/bin/python bench/bench_review.py [--no-write] [--runs 30]

The database (default snaglist_h6_bench) is created if missing and migrated. The seeded
full-scale bundle of tests/bundle_factory.py (1,001 questions, 18 models, 2 judges) is
imported once, triage is run, and the queue is topped up with manual items to 300 open
items. Each page is then requested `runs` times through Django's test client (the whole
middleware, template and database path; no network), as a signed-in reviewer.
Reported: median and 95th-percentile latency, and the query count of one request.
Target: median < 100 ms.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SECTION = "## Review pages"
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/snaglist_h6_bench"
NAME = "review-bench"
TARGET_MS = 100.0
OPEN_ITEMS = 300


def ensure_database(url: str) -> None:
    parsed = urlparse(url)
    host = ["-h", parsed.hostname or "127.0.0.1", "-p", str(parsed.port or 5432)]
    host += ["-U", parsed.username or "postgres"]
    name = parsed.path.lstrip("/")
    listed = subprocess.run(["psql", *host, "-lqt"], capture_output=True, text=True, check=True)
    if name not in {line.split("|")[0].strip() for line in listed.stdout.splitlines()}:
        subprocess.run(["createdb", *host, name], check=True)


def setup_data() -> None:
    from django.core.management import call_command

    from questions.models import Benchmark, Question
    from review.models import ReviewItem

    call_command("migrate", verbosity=0)
    if not Benchmark.objects.filter(name=NAME).exists():
        from tests.bundle_factory import write_bundle

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "bundle"
            write_bundle(path, n_questions=1001, n_models=18, seed=0, name=NAME)
            call_command("import_bundle", str(path), verbosity=0)
    benchmark = Benchmark.objects.get(name=NAME)
    from review.triage import triage_run

    triage_run(benchmark=benchmark)
    open_items = ReviewItem.objects.filter(benchmark=benchmark).exclude(
        status__in=ReviewItem.CLOSED
    )
    extra = open_items.count() - OPEN_ITEMS
    if extra > 0:
        # The synthetic bundle flags more questions than the write-up's shortlist: close the
        # lowest-priority surplus (bench data only) so the queue holds exactly 300 open items.
        surplus = list(open_items.order_by("priority", "-id").values_list("pk", flat=True)[:extra])
        ReviewItem.objects.filter(pk__in=surplus).update(status="confirmed")
    missing = OPEN_ITEMS - open_items.count()
    if missing > 0:
        taken = set(
            ReviewItem.objects.filter(benchmark=benchmark).values_list("question_id", flat=True)
        )
        free = (
            Question.objects.filter(benchmark=benchmark)
            .exclude(key_entries__exclusion__isnull=False)
            .exclude(pk__in=taken)
        )
        ReviewItem.objects.bulk_create(
            [
                ReviewItem(
                    benchmark=benchmark, question=q, source="manual", sources=["manual"], priority=1
                )
                for q in free.order_by("question_id")[:missing]
            ]
        )


def measure(client, url: str, runs: int) -> dict:
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    client.get(url)  # warm caches (templates, connection)
    reset_queries()  # request_started resets the log too: start from an empty one
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    n_queries = len(ctx.captured_queries)  # read now: the next request resets the log
    assert response.status_code == 200, (url, response.status_code)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        client.get(url)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {
        "median": statistics.median(times),
        "p95": times[max(0, int(len(times) * 0.95) - 1)],
        "queries": n_queries,
        "bytes": len(response.content),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    url = os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    ensure_database(url)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections
    from django.test import Client

    from questions.models import Benchmark
    from review.models import ReviewItem

    # Keep one database connection across requests, as a web worker with CONN_MAX_AGE does.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    setup_data()
    benchmark = Benchmark.objects.get(name=NAME)
    user, _ = User.objects.get_or_create(username="bench-reviewer")
    user.groups.add(Group.objects.get(name="reviewer"))
    client = Client()
    client.force_login(user)
    n_open = (
        ReviewItem.objects.filter(benchmark=benchmark).exclude(status__in=ReviewItem.CLOSED).count()
    )
    item = ReviewItem.objects.filter(benchmark=benchmark).order_by("-priority", "id").first()
    n_responses = item.question.responses.count()
    results = {
        "queue": measure(client, f"/review/?benchmark={NAME}", args.runs),
        "queue_filtered": measure(
            client, f"/review/?benchmark={NAME}&source=judge_flag", args.runs
        ),
        "item": measure(client, f"/review/items/{item.pk}/", args.runs),
        "queue_api": measure(client, f"/api/review/items/?benchmark={NAME}&open=true", args.runs),
    }
    rows = [
        ("Queue `/review/` (page 1 of 50 rows)", results["queue"]),
        ("Queue filtered by source", results["queue_filtered"]),
        (f"Review item ({n_responses} responses x 2 grades)", results["item"]),
        ("API `/api/review/items/`", results["queue_api"]),
    ]
    lines = [
        SECTION,
        "",
        "`bench/bench_review.py`: the seeded full-scale bundle of `tests/bundle_factory.py`",
        "(1,001 questions, 18 models, 2 judges) imported into PostgreSQL, triage run, the queue",
        f"set to exactly {OPEN_ITEMS} open items ({n_open} measured). Each page is requested {args.runs} times",
        "through Django's test client as a signed-in reviewer (middleware, templates and",
        "database included; no network), after one warm-up request.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"PostgreSQL on 127.0.0.1; load average {os.getloadavg()[0]:.1f} while measuring "
        "(other engineers' test suites share the machine). One database connection is kept",
        "across requests (as with CONN_MAX_AGE > 0).",
        "",
        "| page | median | p95 | queries | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for label, r in rows:
        met = "yes" if r["median"] < TARGET_MS else "no"
        lines.append(
            f"| {label} | **{r['median']:.1f} ms** | {r['p95']:.1f} ms | {r['queries']} | < 100 ms | {met} |"
        )
    lines += [
        "",
        "Query counts do not grow with the number of items (asserted at two sizes in",
        "tests/test_review_pages.py and tests/test_review_api.py): the queue joins question,",
        "category and claimer, counts statuses in one GROUP BY, and fetches the page's key",
        "entries in one query over the edition chain; the review page reads responses and",
        "grades in two queries whatever the number of models.",
        "",
        "Re-run: `DATABASE_URL=postgres://postgres@127.0.0.1:5432/snaglist_h6_bench "
        ".venv/bin/python bench/bench_review.py` (rewrites this section only).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        readme = ROOT / "bench" / "README.md"
        current = readme.read_text() if readme.exists() else "# Benchmarks\n"
        pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
        if pattern.search(current):
            current = pattern.sub(lambda _: text + "\n", current)
        else:
            current = current.rstrip("\n") + "\n\n" + text
        readme.write_text(current)


if __name__ == "__main__":
    main()
