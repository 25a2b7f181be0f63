"""Runs that heal themselves (issue 19 item 2), without a worker: the periodic heal_runs
frees dead pair leases (marking their calls lost) and sends stalled runs again, once per
stall. The worker test (SIGKILL, a new worker and Celery beat, no operator action) is in
tests/test_worker_faults.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from scoring.models import JudgeCall, PairLease, RunItem, ScoringRun
from scoring.runs import services
from scoring.runs.services import ledger
from tests.worker_fixtures import build_benchmark, publish_correction

pytestmark = pytest.mark.django_db


@pytest.fixture
def run():
    data = build_benchmark(n_questions=4, n_models=3)
    run = services.scoring_run_create(
        edition=publish_correction(data), judges=data.judges, enqueue=False
    )
    ScoringRun.objects.filter(pk=run.pk).update(status=ScoringRun.Status.RUNNING)
    run.refresh_from_db()
    return run


@pytest.fixture
def sent(monkeypatch):
    """Record the runs sent to the workers (scoring.run_start.delay) instead of sending."""
    from scoring.runs import tasks

    ids: list[int] = []
    monkeypatch.setattr(tasks.run_start, "delay", ids.append)
    return ids


def test_the_heal_task_is_on_the_beat_schedule_beside_the_sweep():
    schedule = django_settings.CELERY_BEAT_SCHEDULE
    assert schedule["heal-runs"] == {"task": "scoring.heal_runs", "schedule": 30.0}
    assert "sweep-rescore-requests" in schedule


@pytest.mark.parametrize("entry", sorted(django_settings.CELERY_BEAT_SCHEDULE))
def test_beat_can_send_every_scheduled_task(entry):
    """Celery refuses to send a task whose soft time limit (its own, else the global
    CELERY_TASK_SOFT_TIME_LIMIT of 3300 s) exceeds its time limit: the sweep's time_limit=300
    alone made beat fail with "soft_time_limit must be less than or equal to time_limit"
    every minute (found with the worker test of heal_runs, issue 19)."""
    import scoring.runs.tasks  # noqa: F401 - registers the tasks
    from config.celery import app

    task = app.tasks[django_settings.CELERY_BEAT_SCHEDULE[entry]["task"]]
    soft = task.soft_time_limit or app.conf.task_soft_time_limit
    hard = task.time_limit or app.conf.task_time_limit
    assert soft <= hard, (entry, soft, hard)


def test_dead_leases_are_freed_and_their_calls_marked_lost(run, sent):
    dead, live = list(run.items.order_by("pk")[:2])
    ledger.claim_pairs(run.pk, [(dead, dead.judge), (live, live.judge)])
    for item in (dead, live):
        JudgeCall.objects.create(
            run=run,
            judge=item.judge,
            response=item.response,
            key_entry=item.key_entry,
            prompt_version=item.judge.prompt_version,
        )
    gone = timezone.now() - timedelta(seconds=1)
    RunItem.objects.filter(pk=dead.pk).update(lease_until=gone)
    PairLease.objects.filter(item=dead).update(lease_until=gone)
    ScoringRun.objects.filter(pk=run.pk).update(reported_at=timezone.now())

    done = services.heal_runs()
    done.pop("slots")  # judge limiter slots: the last test

    assert done == {"leases": 1, "calls_lost": 1, "items": 1, "resent": []}
    assert list(PairLease.objects.values_list("item_id", flat=True)) == [live.pk]
    outcomes = dict(JudgeCall.objects.values_list("response_id", "outcome"))
    assert outcomes == {dead.response_id: "lost", live.response_id: "started"}
    assert RunItem.objects.get(pk=dead.pk).lease_until is None
    assert RunItem.objects.get(pk=live.pk).lease_until > timezone.now()
    assert sent == []  # the run moves (a report just now): nothing to send


def test_a_stalled_run_is_sent_again_once_until_a_worker_reports(
    run, sent, settings, django_capture_on_commit_callbacks
):
    settings.SNAGLIST_WORKER_HEARTBEAT_SECONDS = 10
    long_ago = timezone.now() - timedelta(seconds=31)
    ScoringRun.objects.filter(pk=run.pk).update(reported_at=long_ago)
    finished = services.scoring_run_create(edition=run.edition, judges=run.judges.all())
    ScoringRun.objects.filter(pk=finished.pk).update(status="complete", reported_at=long_ago)

    with django_capture_on_commit_callbacks(execute=True):
        assert services.heal_runs()["resent"] == [run.pk]
    assert sent == [run.pk]
    run.refresh_from_db()
    assert run.resent_at is not None
    assert "sent to the workers again at" in run.error and "no worker had reported" in run.error

    # no worker picked it up: not sent again at every period
    with django_capture_on_commit_callbacks(execute=True):
        assert services.heal_runs()["resent"] == []
    assert sent == [run.pk]

    # a worker reported, then stopped again: sent again once more
    ScoringRun.objects.filter(pk=run.pk).update(reported_at=run.resent_at + timedelta(seconds=1))
    later = run.resent_at + timedelta(seconds=60)
    with django_capture_on_commit_callbacks(execute=True):
        assert services.heal_runs(now=later)["resent"] == [run.pk]
    assert sent == [run.pk, run.pk]


def test_a_run_that_moves_is_left_alone(run, sent, settings):
    settings.SNAGLIST_WORKER_HEARTBEAT_SECONDS = 10
    ScoringRun.objects.filter(pk=run.pk).update(reported_at=timezone.now() - timedelta(seconds=29))
    assert services.heal_runs()["resent"] == []
    assert sent == []


def test_a_dead_processes_limiter_slots_are_freed_and_live_ones_kept(run, sent):
    """A killed worker's judge slot (Redis limiter) stayed taken for its 300 s expiry: with
    concurrency 1 the next worker waited 5 minutes. heal_runs frees the slots of processes
    that hold no live pair lease (a live worker renews its leases while its calls are out)."""
    import uuid

    from judges.limits import RedisLimiter, process_holder

    client = services.backends.redis_client()
    assert client is not None, "this test needs REDIS_URL"
    limiter = RedisLimiter(client, f"heal-{uuid.uuid4().hex}", max_concurrency=2)
    try:
        mine, _ = limiter.try_acquire_lease()
        assert mine.startswith(process_holder() + "/")
        seconds, micros = client.time()
        expiry = seconds * 1000 + micros // 1000 + 300_000
        client.zadd(limiter.lease_key, {"deadhost:4242/0123abcd": expiry})
        assert limiter.try_acquire_lease()[0] is None  # both slots taken
        item = run.items.order_by("pk").first()
        ledger.claim_pairs(run.pk, [(item, item.judge)])  # this process is at work
        ScoringRun.objects.filter(pk=run.pk).update(reported_at=timezone.now())

        # (other tests' dead workers may have left slots under other judges' keys: >= 1)
        assert services.heal_runs()["slots"] >= 1
        assert [m.decode() for m in client.zrange(limiter.lease_key, 0, -1)] == [mine]
        second, wait = limiter.try_acquire_lease()
        assert second is not None and wait == 0
        limiter.release_lease(second)

        # once this process holds no live lease either, its slot is a dead one too
        ledger.release_item(item)
        assert services.heal_runs()["slots"] >= 1
        assert client.zcard(limiter.lease_key) == 0
    finally:
        client.delete(*limiter.keys())


def _at(run, seconds):
    """The time `seconds` after the run's creation (the test's clock)."""
    return run.created_at + timedelta(seconds=seconds)


def test_a_resend_lost_too_is_sent_again_after_a_doubling_deadline(
    run, sent, settings, django_capture_on_commit_callbacks
):
    """Issue 26 item 3: the run's start message is lost (no worker ever reports), heal_runs
    sends it again, and that re-send is lost too (its worker killed as it took it). Before,
    resent_at > coalesce(reported_at, created_at) kept it from ever being sent again. Now the
    re-send's deadline is the stall time (3 heartbeats of 10 s = 30 s), doubled per unanswered
    re-send (60 s, then the 100 s cap set here)."""
    settings.SNAGLIST_WORKER_HEARTBEAT_SECONDS = 10
    settings.SNAGLIST_HEAL_BACKOFF_CAP_SECONDS = 100
    ScoringRun.objects.filter(pk=run.pk).update(reported_at=None)
    run.refresh_from_db()

    def heal(seconds):
        with django_capture_on_commit_callbacks(execute=True):
            return services.heal_runs(now=_at(run, seconds))["resent"]

    assert heal(29) == []  # not stalled yet
    assert heal(31) == [run.pk]  # the start message was lost: sent again
    # the re-send is lost too: nothing before its 30 s deadline, then sent again
    assert heal(60) == []
    assert heal(61) == [run.pk]
    # the next deadline is twice as far: 60 s after the second re-send
    assert heal(120) == []
    assert heal(121) == [run.pk]
    # then the cap (100 s, not 120 s)
    assert heal(220) == []
    assert heal(221) == [run.pk]
    assert sent == [run.pk] * 4
    run.refresh_from_db()
    assert (run.resend_count, run.resends_unanswered, run.resent_at) == (4, 4, _at(run, 221))
    assert "(re-send 4 with no report since)" in run.error

    # a worker reports after the last re-send: the backoff starts again from the stall time
    ScoringRun.objects.filter(pk=run.pk).update(reported_at=_at(run, 230))
    run.refresh_from_db()
    assert heal(259) == []
    assert heal(261) == [run.pk]
    run.refresh_from_db()
    assert (run.resend_count, run.resends_unanswered) == (5, 1)
    assert heal(290) == []
    assert heal(292) == [run.pk]
    assert sent == [run.pk] * 6


def test_the_resend_count_and_its_deadline_are_shown(run, sent, client, settings):
    from django.contrib.auth.models import Group, User
    from django.urls import reverse

    settings.SNAGLIST_WORKER_HEARTBEAT_SECONDS = 10
    settings.TIME_ZONE = "UTC"
    user = User.objects.create_user("admin1", password="x-very-long-pass-1")
    user.groups.add(Group.objects.get(name="admin"))
    client.force_login(user)
    detail = reverse("scoring:run-detail", kwargs={"pk": run.pk})
    page = client.get(detail).content.decode()
    assert "Sent to the workers again" not in page

    resent = timezone.now() - timedelta(seconds=5)
    ScoringRun.objects.filter(pk=run.pk).update(
        reported_at=resent - timedelta(minutes=2),
        resent_at=resent,
        resend_count=3,
        resends_unanswered=2,
    )
    due = resent + timedelta(seconds=60)  # 30 s stall, doubled once
    page = client.get(detail).content.decode()
    assert f"Sent to the workers again by Celery beat 3 times, last at {resent:%H:%M:%S}." in page
    assert f"it is sent again at {due:%H:%M:%S} if none does by then." in page
    listing = client.get(reverse("scoring:runs")).content.decode()
    assert "sent again 3 times" in listing

    # a worker reported since: no deadline; a finished run keeps its count
    ScoringRun.objects.filter(pk=run.pk).update(reported_at=timezone.now())
    page = client.get(detail).content.decode()
    assert "3 times" in page and "if none does by then" not in page
    ScoringRun.objects.filter(pk=run.pk).update(status=ScoringRun.Status.COMPLETE)
    assert "sent again 3 times" in client.get(reverse("scoring:runs")).content.decode()
