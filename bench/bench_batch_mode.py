"""Benchmark batch mode's own overhead per batched judge call: building and submitting the
batches, then polling, fetching and settling their results (issue 20 item 6).

Usage (from the project root; needs PostgreSQL; adds a benchmark named batch-bench-<id>)::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/snaglist_batch \\
        .venv/bin/python bench/bench_batch_mode.py [--questions 1000] [--models 3]

Set-up (not timed): migrate the database, start tests/judge_server.py in a
process of its own (forked: its CPU is not counted here), build a benchmark of
questions x models responses and two judges (one openai, one anthropic, pointed at the
server), create a batch-mode grading run of every (response, judge) pair.

Timed, with eager tasks in this process (wall time and this process's CPU time; the
PostgreSQL server's CPU is not included):
- submit: `scoring.run_start`: chunks of SNAGLIST_RESCORE_CHUNK pairs, each claimed,
  recorded (JudgeBatch + "started" ledger rows), rendered, built by the live request
  builders and uploaded to the vendor (one batch per judge per chunk);
- settle: `scoring.runs.services.poll_batches` once (the body of the `scoring.poll_batches`
  task): every batch retrieved (ended at once on the loopback server), its results
  downloaded, parsed and settled through the ledger.
Not timed: the SDKs' first import and client (a worker does that once), closing the run
and warming its leaderboard (the run's follow-up, the same in live mode).
The vendor's turnaround (minutes to 24 h) is not the product's and is not measured.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
KEY_ENV = "SNAGLIST_JUDGE_KEY_BENCH"


def serve(conn) -> None:
    """Run the loopback judge API in this (forked) process; send its URL, wait for 'stop'."""
    from tests.judge_server import JudgeServer

    with JudgeServer() as server:
        conn.send(server.url)
        conn.recv()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--models", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"
    os.environ.pop("REDIS_URL", None)
    os.environ[KEY_ENV] = "sk-bench-not-a-secret"
    from tests.judge_server import LOOPBACK_JUDGES  # the loopback judge over http

    os.environ.update(LOOPBACK_JUDGES)
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.get_context("fork").Process(target=serve, args=(child,), daemon=True)
    server.start()
    url = parent.recv()

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    from scoring.models import Grade, JudgeBatch, JudgeCall
    from scoring.runs import services
    from scoring.runs.tasks import run_start
    from tests.worker_fixtures import build_benchmark

    data = build_benchmark(
        n_questions=args.questions,
        n_models=args.models,
        grade_original=False,
        with_auditors=False,
        name=f"batch-bench-{uuid.uuid4().hex[:8]}",
    )
    for judge, sdk in zip(data.judges, ("openai", "anthropic"), strict=True):
        judge.backend, judge.model, judge.api_key_env = sdk, f"bench-{sdk}", KEY_ENV
        judge.base_url = url + "/v1" if sdk == "openai" else url
        judge.backend_settings = {"max_retries": 0, "timeout": 120}
        judge.save()
    run = services.scoring_run_create(
        edition=data.original, judges=data.judges, enqueue=False, mode="batch"
    )
    pairs = run.needed
    # Not timed: a worker process imports the SDKs once (config.celery.warm_imports), not
    # per call; the run's follow-up (closing it, warming its leaderboard) is not batch work.
    from scoring.runs.services.backends import judge_backend

    for judge in data.judges:
        backend = judge_backend(judge)
        backend._client(backend._api_key())

    wall, cpu = time.perf_counter(), time.process_time()
    run_start.delay(run.pk)
    submit = (time.perf_counter() - wall, time.process_time() - cpu)
    batches = JudgeBatch.objects.filter(run=run).count()

    wall, cpu = time.perf_counter(), time.process_time()
    report = services.poll_batches()
    settle = (time.perf_counter() - wall, time.process_time() - cpu)
    assert len(report.settled) == batches, report
    services.scoring_run_finish(run=run)

    run.refresh_from_db()
    graded = Grade.objects.filter(run=run).count()
    calls = JudgeCall.objects.filter(run=run, outcome="ok", mode="batch").count()
    parent.send("stop")
    server.join(10)
    assert (run.status, graded, calls) == ("complete", pairs, pairs), (run.status, graded, calls)
    print(f"{pairs} pairs in {batches} batches ({run.status}; {graded} grades, {calls} calls)")
    for name, (w, c) in (("submit", submit), ("settle", settle)):
        print(
            f"{name}: wall {w:.2f} s ({1000 * w / pairs:.2f} ms/call), "
            f"CPU {c:.2f} s ({1000 * c / pairs:.2f} ms/call)"
        )
    total_w, total_c = submit[0] + settle[0], submit[1] + settle[1]
    print(
        f"total: wall {1000 * total_w / pairs:.2f} ms/call, CPU {1000 * total_c / pairs:.2f} ms/call"
    )


if __name__ == "__main__":
    main()
