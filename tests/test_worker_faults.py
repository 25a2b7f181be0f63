"""Faults in the re-scoring pipeline with a real worker, a private Redis and PostgreSQL.

Issue 7 item 5, the faults not covered by tests/test_worker_rescore.py (SIGKILL twice,
a judge answering 429):

- Redis restarted mid-run: a private `redis-server` (no persistence) is killed while a
  slow judge keeps the run half-way, then started again on the same port 2 s later.
  Every queued and unacknowledged message is lost; the worker reconnects by itself and
  the product's documented recovery, `rescore --resume`, finishes the run.
- The database connection dropped mid-task: every other backend of the test database
  (the worker's connections) is terminated with pg_terminate_backend, twice, while judge
  calls are in flight. Tasks fail with OperationalError, Celery retries them, Django
  reconnects, and the run completes (resumed only if it stalls).

After recovery: exactly one Grade per (response, judge, key entry, prompt version) and the
JudgeCall ledger shows no pair answered twice; pairs called again are only those whose call
was in flight at a fault (outcome "lost"), and they are counted.
"""

from __future__ import annotations

import io
import json
import time

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import Count

from scoring.models import Grade, JudgeCall, RunItem, ScoringRun
from scoring.runs import selectors as runs_selectors
from scoring.runs import services
from tests import redis_fixtures, worker_fixtures
from tests.worker_fixtures import build_benchmark, use_openai_judges

private_redis = redis_fixtures.private_redis
private_worker_factory = redis_fixtures.private_worker_factory
fake_openai_judge = worker_fixtures.fake_openai_judge

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

PAIRS = 6 * 3 * 2  # questions x models x judges
ENV = {
    "SNAGLIST_RESCORE_CHUNK": "3",
    "SNAGLIST_PAIR_LEASE_SECONDS": "2",
    "SNAGLIST_JUDGE_KEY_H8_FAKE": "sk-test-not-a-secret",
}


def _slow_run(fake_judge, name: str, delay: float) -> ScoringRun:
    """A 36-pair run whose judge (loopback OpenAI-compatible server) takes `delay` s a call."""
    fake_judge.delay = delay
    data = build_benchmark(n_questions=6, n_models=3, grade_original=False, name=name)
    use_openai_judges(data.judges, fake_judge)
    run = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)
    assert run.needed == PAIRS
    return run


def _resume_with_the_cli(run: ScoringRun) -> dict:
    """`rescore --resume --run N --wait --format json`: what the product documents."""
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "rescore",
        "--benchmark",
        run.benchmark.name,
        "--edition",
        run.edition.name,
        "--resume",
        "--run",
        str(run.pk),
        "--wait",
        "--timeout",
        "60",
        "--format",
        "json",
        stdout=out,
        stderr=err,
    )
    return json.loads(out.getvalue())


def _assert_exactly_once(run: ScoringRun, fake_judge) -> dict:
    """One grade per pair, no pair answered twice; return the ledger."""
    run.refresh_from_db()
    assert (run.status, run.done, run.graded, run.failed) == ("complete", PAIRS, PAIRS, 0)
    assert RunItem.objects.filter(run=run).exclude(state=RunItem.State.GRADED).count() == 0
    keys = ("response_id", "judge_id", "key_entry_id", "prompt_version")
    grades = Grade.objects.filter(run=run)
    assert grades.count() == PAIRS
    assert grades.values(*keys).distinct().count() == PAIRS
    assert not Grade.objects.values(*keys).annotate(n=Count("id")).filter(n__gt=1).exists()
    ledger = runs_selectors.ledger_summary(run)
    assert ledger["ok"] == PAIRS and ledger["paid_twice"] == 0 and ledger["in_flight"] == 0
    assert ledger["calls"] == (
        ledger["ok"] + ledger["in_flight_at_kill"] + ledger["retries"] + ledger["failed"]
    )
    # a pair was called more than once only when its call was in flight at a fault
    repeated = (
        JudgeCall.objects.filter(run=run).values(*keys).annotate(n=Count("id")).filter(n__gt=1)
    )
    lost = JudgeCall.objects.filter(run=run, outcome=JudgeCall.Outcome.LOST)
    for pair in repeated:
        assert lost.filter(**{k: pair[k] for k in keys}).count() == pair["n"] - 1, pair
    assert fake_judge.calls <= PAIRS + ledger["in_flight_at_kill"]
    return ledger


def test_redis_restarted_mid_run_then_resumed_grades_each_pair_once(
    private_redis, private_worker_factory, fake_openai_judge
):
    run = _slow_run(fake_openai_judge, "faults-redis", delay=0.4)
    worker = private_worker_factory(**ENV)
    worker.send("scoring.run_start", run.pk)
    worker.wait_for_run(run.pk, until=lambda r: r.done >= 8, timeout=30)

    queued = private_redis.keys()
    private_redis.stop()
    at_stop = ScoringRun.objects.get(pk=run.pk).done
    time.sleep(2)
    private_redis.start()
    # No persistence: the queued and unacknowledged task messages are gone. (The worker may
    # already have reconnected and declared its bindings, so count messages, not keys.)
    import redis

    fresh = redis.Redis(port=private_redis.port)
    assert fresh.llen(worker.queue) == 0
    assert fresh.hlen("unacked") == 0 and fresh.zcard("unacked_index") == 0

    restarted = _reconnect_or_restart(worker)
    time.sleep(3)  # chunks that were executing during the outage finish; nothing else comes
    stalled = ScoringRun.objects.get(pk=run.pk)
    assert worker.process.poll() is None, worker.log()
    assert stalled.status == "running" and stalled.done < PAIRS, (stalled.done, worker.log())

    summary = _resume_with_the_cli(run)
    assert (summary["status"], summary["graded"], summary["failed"]) == ("complete", PAIRS, 0)
    ledger = _assert_exactly_once(run, fake_openai_judge)
    print(
        f"\nfaults injected: Redis (no persistence) killed at {at_stop}/{PAIRS} pairs with "
        f"{queued} keys queued, down 2 s, restarted on the same port; run stalled at "
        f"{stalled.done}/{PAIRS} (messages lost), `rescore --resume` completed it; "
        f"worker {'restarted after the kombu race' if restarted else 'reconnected by itself'}; "
        f"{PAIRS} grades, one per pair; ledger {ledger}; judge answered "
        f"{fake_openai_judge.calls} calls"
    )


# kombu's Redis transport can crash the worker as it reconnects: a pub/sub read (the
# remote-control channel) that failed with the server gone reconnects through a connection
# the consumer has just torn down ("Unrecoverable error: AttributeError(\"'NoneType' object
# has no attribute 'hostname'\")"; celery/kombu#659 is the same race on another line). Seen
# once in ~10 runs of this test. Then the worker is started again, as its supervisor would.
KOMBU_RECONNECT_RACE = "'NoneType' object has no attribute 'hostname'"


def _reconnect_or_restart(worker) -> bool:
    """Wait for the worker to answer again after the Redis restart; if kombu's reconnect
    race killed it (and only then), start it again. Return whether it was restarted."""
    try:
        worker._wait_ready(30)  # the same worker process reconnects to the new server
        return False
    except RuntimeError:
        if worker.process.poll() is None or KOMBU_RECONNECT_RACE not in worker.log():
            raise
    worker.start()
    return True


def _terminate_other_backends() -> int:
    """Terminate every other client backend of the test database (the worker's connections)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend'"
        )
        return cursor.fetchone()[0]


def test_database_connections_dropped_mid_task_run_completes_exactly_once(
    private_redis, private_worker_factory, fake_openai_judge
):
    run = _slow_run(fake_openai_judge, "faults-db", delay=0.4)
    worker = private_worker_factory(**ENV)
    worker.send("scoring.run_start", run.pk)

    terminated = []
    for threshold in (6, 18):
        # wait until the worker holds connections mid-chunk (a judge call takes 0.4 s)
        worker.wait_for_run(run.pk, until=lambda r, t=threshold: r.done >= t, timeout=45)
        deadline = time.monotonic() + 5
        killed = 0
        while not killed and time.monotonic() < deadline:
            killed = _terminate_other_backends()
            if not killed:
                time.sleep(0.05)
        terminated.append((ScoringRun.objects.get(pk=run.pk).done, killed))
    assert all(killed >= 1 for _, killed in terminated), terminated

    resumed = False
    try:
        worker.wait_for_run(run.pk, timeout=40)
    except AssertionError:
        resumed = True  # retries did not finish it: the documented recovery
        _resume_with_the_cli(run)
    assert worker.process.poll() is None, worker.log()
    ledger = _assert_exactly_once(run, fake_openai_judge)
    print(
        f"\nfaults injected: PostgreSQL connections of the worker terminated twice "
        f"(at [done, connections killed] {terminated}); "
        f"run completed {'after rescore --resume' if resumed else 'by task retries alone'}; "
        f"{PAIRS} grades, one per pair; ledger {ledger}; judge answered "
        f"{fake_openai_judge.calls} calls"
    )


def test_the_run_page_says_stalled_while_no_worker_is_alive(
    private_redis, private_worker_factory, fake_openai_judge, client, settings
):
    """Issue 19 item 3: a SIGKILLed worker's run page says "stalled - no worker has reported
    on this run since HH:MM" instead of an ETA (and no "being graded right now"), and stops
    saying so once a worker reports on the run again."""
    from django.contrib.auth.models import Group, User
    from django.urls import reverse
    from django.utils import timezone

    settings.SNAGLIST_WORKER_HEARTBEAT_SECONDS = 0.5  # stalled after 1.5 s without a report
    run = _slow_run(fake_openai_judge, "faults-heartbeat", delay=0.4)
    worker = private_worker_factory(**ENV, SNAGLIST_WORKER_HEARTBEAT_SECONDS="0.5")
    admin = User.objects.create_user("admin1", password="x-very-long-pass-1")
    admin.groups.add(Group.objects.get(name="admin"))
    client.force_login(admin)
    url = reverse("scoring:run-detail", kwargs={"pk": run.pk})

    worker.send("scoring.run_start", run.pk)
    worker.wait_for_run(run.pk, until=lambda r: r.done >= 6, timeout=30)
    alive = client.get(url).content.decode()
    assert "no worker has reported" not in alive, alive
    worker.kill()
    killed_at = ScoringRun.objects.get(pk=run.pk)
    time.sleep(2.0)  # more than 3 heartbeats
    page = client.get(url).content.decode()
    last = timezone.localtime(ScoringRun.objects.get(pk=run.pk).reported_at).strftime("%H:%M")
    assert f"no worker has reported on this run since {last}." in page, page
    assert "s left" not in page and "being graded by a worker right now" not in page
    assert ScoringRun.objects.get(pk=run.pk).done < PAIRS

    worker.start()
    _resume_with_the_cli(run)
    assert "no worker has reported" not in client.get(url).content.decode()
    print(
        f"\nworker SIGKILLed at {killed_at.done}/{PAIRS}; 2 s later the page said: stalled, "
        f"no worker has reported on this run since {last}; resumed after a new worker started"
    )


def _start_beat(worker, workdir):
    """Start `celery -A config beat` with the worker's environment (its broker, its queue),
    as docker-compose's `beat` service runs it."""
    import subprocess

    from tests.worker_fixtures import CELERY_BIN, PROJECT_ROOT

    log = (workdir / "beat.log").open("wb")
    return subprocess.Popen(
        [
            str(CELERY_BIN),
            "-A",
            "config",
            "beat",
            "-s",
            str(workdir / "beat-schedule"),
            "--pidfile=",
            "-l",
            "warning",
        ],
        cwd=PROJECT_ROOT,
        env=worker.env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def test_a_killed_workers_run_finishes_by_itself_once_a_worker_is_back(
    private_redis, private_worker_factory, fake_openai_judge, tmp_path
):
    """Issue 19 item 2: SIGKILL the worker twice mid-run; with Celery beat running (heal_runs
    every second here, every 30 s by default) and a new worker started, the run completes
    with no `rescore --resume`: every pair graded once, each pair lost at a kill asked again
    once, the lost calls counted."""
    import os
    import signal

    env = {
        **ENV,
        "SNAGLIST_WORKER_HEARTBEAT_SECONDS": "0.5",
        "SNAGLIST_HEAL_SECONDS": "1",
    }
    # 1 s a call: after the wait sees the threshold, the kill must land while calls are
    # still out; at 0.4 s a loaded machine sometimes saw the last 18 pairs finish first.
    run = _slow_run(fake_openai_judge, "faults-heal", delay=1.0)
    worker = private_worker_factory(**env)
    beat = _start_beat(worker, tmp_path)
    try:
        worker.send("scoring.run_start", run.pk)
        kills = []
        for threshold in (6, 18):
            worker.wait_for_run(run.pk, until=lambda r, t=threshold: r.done >= t, timeout=60)
            worker.kill()
            kills.append(ScoringRun.objects.get(pk=run.pk).done)
            time.sleep(2.5)  # no worker: the run stalls (1.5 s), leases run out (2 s)
            assert ScoringRun.objects.get(pk=run.pk).status == "running"
            back = time.monotonic()
            worker.start()
        run = worker.wait_for_run(run.pk, timeout=120)
        took = time.monotonic() - back
    finally:
        os.killpg(beat.pid, signal.SIGTERM)
        beat.wait(timeout=15)
    ledger = _assert_exactly_once(run, fake_openai_judge)
    per_pair = (
        JudgeCall.objects.filter(run=run)
        .values("response_id", "judge_id", "key_entry_id")
        .annotate(n=Count("id"))
    )
    assert max(p["n"] for p in per_pair) <= 1 + 2  # at most once more per kill
    assert ledger["repeated"] == ledger["in_flight_at_kill"]
    assert took < 120
    print(
        f"\nworker SIGKILLed at {kills} of {PAIRS} pairs, a new worker started 2.5 s after "
        f"each; with beat (heal_runs every 1 s) and no operator action the run completed "
        f"{took:.1f} s after the worker was back; ledger {ledger}; judge answered "
        f"{fake_openai_judge.calls} calls; run notes: {run.error!r}"
    )


def test_redis_restarted_mid_run_the_run_finishes_with_no_operator_action(
    private_redis, private_worker_factory, fake_openai_judge, tmp_path
):
    """Issue 19 item 2: the Redis restart of the first test (no persistence: every queued
    and unacknowledged message lost), now with Celery beat running: heal_runs sees the run
    stalled and sends it again; no `rescore --resume`. (The worker is started again only if
    kombu's reconnect race ended it, as its supervisor would.)"""
    import os
    import signal

    env = {**ENV, "SNAGLIST_WORKER_HEARTBEAT_SECONDS": "0.5", "SNAGLIST_HEAL_SECONDS": "1"}
    run = _slow_run(fake_openai_judge, "faults-redis-heal", delay=0.4)
    worker = private_worker_factory(**env)
    beat = _start_beat(worker, tmp_path)
    try:
        worker.send("scoring.run_start", run.pk)
        worker.wait_for_run(run.pk, until=lambda r: r.done >= 8, timeout=30)
        private_redis.stop()
        at_stop = ScoringRun.objects.get(pk=run.pk).done
        time.sleep(2)
        private_redis.start()
        back = time.monotonic()
        restarted = _reconnect_or_restart(worker)
        run = worker.wait_for_run(run.pk, timeout=120)
        took = time.monotonic() - back
    finally:
        os.killpg(beat.pid, signal.SIGTERM)
        beat.wait(timeout=15)
    ledger = _assert_exactly_once(run, fake_openai_judge)
    assert took < 120
    print(
        f"\nRedis (no persistence) killed at {at_stop}/{PAIRS}, down 2 s; with beat and no "
        f"operator action the run completed {took:.1f} s after Redis was back; worker "
        f"{'restarted after the kombu race' if restarted else 'reconnected by itself'}; "
        f"ledger {ledger}; run notes: {run.error!r}"
    )
