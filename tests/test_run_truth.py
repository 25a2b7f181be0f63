"""A run page that tells the truth (issue 19 item 3): "stalled" instead of an ETA when no
worker reports, and the calls lost at a kill and asked again, with their counts.

The worker test (a SIGKILLed worker's run shows "stalled") is in
tests/test_worker_once_across_runs.py.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse
from django.utils import timezone

from scoring.models import JudgeCall, RunItem, ScoringRun
from scoring.runs import selectors as runs_selectors
from scoring.runs import services
from tests.worker_fixtures import build_benchmark, publish_correction


@pytest.fixture
def run(db):
    data = build_benchmark(n_questions=4, n_models=3)
    corrected = publish_correction(data)
    run = services.scoring_run_create(edition=corrected, judges=data.judges, enqueue=False)
    ScoringRun.objects.filter(pk=run.pk).update(
        status=ScoringRun.Status.RUNNING, started_at=timezone.now() - timedelta(minutes=5), done=2
    )
    run.refresh_from_db()
    return run


@pytest.fixture
def admin_client(client, db):
    user = User.objects.create_user("admin1", password="x-very-long-pass-1")
    user.groups.add(Group.objects.get(name="admin"))
    client.force_login(user)
    return client


def _reported(run, seconds_ago):
    at = timezone.now() - timedelta(seconds=seconds_ago)
    ScoringRun.objects.filter(pk=run.pk).update(reported_at=at)
    run.refresh_from_db()
    return at


def test_a_run_is_stalled_after_three_heartbeats_without_a_report(run, settings):
    settings.SNAGLIST_WORKER_HEARTBEAT_SECONDS = 10
    _reported(run, 29)
    assert runs_selectors.run_stall(run) is None
    at = _reported(run, 31)
    assert runs_selectors.run_stall(run) == {"since": at, "elsewhere": False}
    # never reported: counted from its creation
    ScoringRun.objects.filter(pk=run.pk).update(
        reported_at=None, created_at=timezone.now() - timedelta(minutes=2)
    )
    run.refresh_from_db()
    assert runs_selectors.run_stall(run)["since"] == run.created_at
    # finished runs never stall
    run.status = ScoringRun.Status.COMPLETE
    assert runs_selectors.run_stall(run) is None


def test_a_stall_says_whether_workers_report_on_other_runs(run, settings):
    settings.SNAGLIST_WORKER_HEARTBEAT_SECONDS = 10
    _reported(run, 120)
    other = services.scoring_run_create(edition=run.edition, judges=run.judges.all(), enqueue=False)
    ScoringRun.objects.filter(pk=other.pk).update(reported_at=timezone.now())
    assert runs_selectors.run_stall(run)["elsewhere"] is True
    ScoringRun.objects.filter(pk=other.pk).update(status=ScoringRun.Status.COMPLETE)
    assert runs_selectors.run_stall(run)["elsewhere"] is False


def test_the_run_page_says_stalled_instead_of_an_eta(run, admin_client, settings):
    settings.SNAGLIST_WORKER_HEARTBEAT_SECONDS = 10
    settings.TIME_ZONE = "Europe/London"
    RunItem.objects.filter(run=run).update(lease_until=timezone.now() + timedelta(minutes=10))
    _reported(run, 3)
    page = admin_client.get(reverse("scoring:run-detail", kwargs={"pk": run.pk})).content.decode()
    assert "s left" in page and "stalled" not in page
    assert "being graded by a worker right now" in page

    at = _reported(run, 600)
    local_at = timezone.localtime(at)
    local = local_at.strftime("%H:%M")
    if local_at.date() != timezone.localdate():  # ten minutes ago was yesterday
        local += f" on {local_at.day} {local_at:%B}"
    for url in (
        reverse("scoring:run-detail", kwargs={"pk": run.pk}),
        reverse("scoring:run-progress", kwargs={"pk": run.pk}),
    ):
        page = admin_client.get(url).content.decode()
        assert f"no worker has reported on this run since {local}." in page
        assert "stalled" in page and "s left" not in page and "pairs/s" not in page
        assert "being graded by a worker right now" not in page
        assert "No worker has reported on any run" in page


def test_calls_lost_and_repeated_are_counted_on_the_page(run, admin_client):
    items = list(run.items.order_by("pk")[:2])
    for item in items:
        pair = {
            "judge": item.judge,
            "response": item.response,
            "key_entry": item.key_entry,
            "prompt_version": item.judge.prompt_version,
        }
        JudgeCall.objects.create(run=run, outcome="lost", **pair)
        JudgeCall.objects.create(run=run, outcome="ok", **pair)
    ledger = runs_selectors.ledger_summary(run)
    assert (ledger["in_flight_at_kill"], ledger["repeated"], ledger["paid_twice"]) == (2, 2, 0)
    page = admin_client.get(reverse("scoring:run-detail", kwargs={"pk": run.pk})).content.decode()
    assert "<dt>Sent, outcome unknown (in flight at a kill)</dt><dd>2</dd>" in page
    assert "<dt>Calls repeated after a loss</dt><dd>2</dd>" in page


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_reports_while_a_task_runs_and_stops_after(settings):
    settings.SNAGLIST_WORKER_HEARTBEAT_SECONDS = 0.2
    data = build_benchmark(n_questions=2, n_models=1, name="beat")
    run = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)
    seen = set()
    with services.RunHeartbeat(run.pk):
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            seen.add(ScoringRun.objects.get(pk=run.pk).reported_at)
            time.sleep(0.05)
    assert None not in seen and len(seen) >= 4  # the first report, then one per 0.2 s
    last = ScoringRun.objects.get(pk=run.pk).reported_at
    time.sleep(0.5)
    assert ScoringRun.objects.get(pk=run.pk).reported_at == last


def test_a_heartbeat_renews_this_process_leases_only(run, settings):
    """Issue 19 item 2: short pair leases, renewed by the live worker's heartbeat; a dead
    process's leases (another holder) and leases already run out are left to expire."""
    from scoring.models import PairLease
    from scoring.runs.services import heartbeat, ledger

    settings.SNAGLIST_PAIR_LEASE_SECONDS = 60
    mine, dead, late = list(run.items.order_by("pk")[:3])
    ledger.claim_pairs(run.pk, [(mine, mine.judge), (dead, dead.judge), (late, late.judge)])
    soon = timezone.now() + timedelta(seconds=5)
    RunItem.objects.filter(pk=mine.pk).update(lease_until=soon)
    RunItem.objects.filter(pk=dead.pk).update(lease_until=soon, holder="elsewhere:1")
    PairLease.objects.filter(item=dead).update(lease_until=soon, holder="elsewhere:1")
    gone = timezone.now() - timedelta(seconds=1)
    RunItem.objects.filter(pk=late.pk).update(lease_until=gone)
    PairLease.objects.filter(item=late).update(lease_until=gone)

    assert heartbeat.renew_leases(run.pk) == 1
    now = timezone.now()
    renewed = RunItem.objects.get(pk=mine.pk).lease_until
    assert timedelta(seconds=59) < renewed - now <= timedelta(seconds=60)
    assert PairLease.objects.get(item=mine).lease_until == renewed
    assert RunItem.objects.get(pk=dead.pk).lease_until == soon
    assert PairLease.objects.get(item=dead).lease_until == soon
    assert RunItem.objects.get(pk=late.pk).lease_until == gone
    assert PairLease.objects.get(item=late).lease_until == gone
