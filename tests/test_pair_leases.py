"""Exactly once across runs (issue 19 item 1), without a worker: the cross-run pair lease
(scoring.models.PairLease) and the ledger's "paid twice" counted across runs.

The worker test of two overlapping runs is tests/test_worker_once_across_runs.py.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from scoring.models import Grade, JudgeCall, PairLease, RunItem
from scoring.runs import selectors as runs_selectors
from scoring.runs import services
from scoring.runs.services import ledger, vendor_sql
from scoring.runs.services.work import PairKey, WorkItem
from tests.test_rescore import CountingBackend
from tests.worker_fixtures import build_benchmark, publish_correction

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake_backend(monkeypatch):
    backend = CountingBackend()
    monkeypatch.setattr(services.backends, "judge_backend", lambda judge: backend)
    return backend


@pytest.fixture
def two_runs():
    """Two grade runs of the same corrected edition, created back to back: both need the
    same 6 pairs (3 models x 2 judges on the corrected question)."""
    data = build_benchmark(n_questions=6, n_models=3)
    corrected = publish_correction(data)
    first = services.scoring_run_create(edition=corrected, judges=data.judges, enqueue=False)
    second = services.scoring_run_create(edition=corrected, judges=data.judges, enqueue=False)
    assert first.needed == second.needed == 6
    return first, second


def _twin(run, item):
    return run.items.get(response=item.response, judge=item.judge, key_entry=item.key_entry)


def _work(item):
    item = RunItem.objects.select_related("judge", "response", "key_entry").get(pk=item.pk)
    return WorkItem(PairKey(*item.pair()), item.judge, item.key_entry, item.response, item, True)


def test_a_pair_in_flight_in_one_run_is_left_to_it_and_its_grade_reused(two_runs, fake_backend):
    first, second = two_runs
    item = first.items.order_by("pk").first()
    claimed, taken_over = ledger.claim_pairs(first.pk, [(item, item.judge)])
    assert claimed == {item.pk: 1} and taken_over == set()

    twin = _twin(second, item)
    outcome = services.settle_chunk(run=second, pairs=[twin.pair()])
    assert outcome.busy == [twin.pair()]
    assert fake_backend.calls == [] and JudgeCall.objects.count() == 0
    twin.refresh_from_db()
    # the busy pair is left as it was: pending, unleased, no attempt counted
    assert (twin.state, twin.lease_until, twin.attempts) == ("pending", None, 0)

    # the first run's call lands: grade written, pair settled, lease deleted with it
    Grade.objects.create(
        response=item.response, judge=item.judge, key_entry=item.key_entry, grade=1, run=first
    )
    ledger.release_item(item)
    assert PairLease.objects.count() == 0

    outcome = services.settle_chunk(run=second, pairs=[twin.pair()])
    assert outcome.settled == {"reused": 1} and outcome.busy == []
    assert fake_backend.calls == []


def test_the_rest_of_the_overlap_is_graded_once_by_whichever_run_claims_it(two_runs, fake_backend):
    first, second = two_runs
    reused_at_start = first.reused  # pairs of other questions, graded against `original`
    services.settle_chunk(run=first, pairs=[i.pair() for i in first.items.order_by("pk")[:4]])
    services.settle_chunk(run=second, pairs=[i.pair() for i in second.items.order_by("pk")])
    services.settle_chunk(run=first, pairs=[i.pair() for i in first.items.order_by("pk")[4:]])
    first.refresh_from_db()
    second.refresh_from_db()
    assert len(fake_backend.calls) == 6
    assert (first.graded, second.graded) == (4, 2)
    assert (first.reused - reused_at_start, second.reused - reused_at_start) == (2, 4)
    assert (first.done, second.done) == (6, 6)
    assert Grade.objects.filter(run__in=[first, second]).count() == 6
    assert PairLease.objects.count() == 0
    assert runs_selectors.ledger_summary(second)["paid_twice"] == 0
    assert runs_selectors.edition_paid_twice(first.edition) == 0


def test_a_grade_landed_after_the_chunk_looked_is_not_bought_again(two_runs, fake_backend):
    """The holder settled between the chunk's look for grades and the claim: the claim sees
    the grade (one SELECT after the lease), gives the lease back and leaves the pair busy; the
    next delivery settles it as reused."""
    first, second = two_runs
    item = second.items.order_by("pk").first()
    Grade.objects.create(
        response=item.response, judge=item.judge, key_entry=item.key_entry, grade=2, run=first
    )
    outcome = services.ChunkOutcome()
    mine = ledger.claim_group([_work(item)], outcome, threading.Lock())
    assert mine == [] and outcome.busy == [item.pair()]
    assert PairLease.objects.count() == 0
    item.refresh_from_db()
    assert item.lease_until is None and item.state == "pending"


def test_an_expired_lease_of_a_dead_worker_is_taken_over_and_named(two_runs):
    first, second = two_runs
    item = first.items.order_by("pk").first()
    ledger.claim_pairs(first.pk, [(item, item.judge)])
    twin = _twin(second, item)
    assert ledger.claim_pairs(second.pk, [(twin, twin.judge)]) == ({}, set())
    PairLease.objects.update(lease_until=timezone.now() - timedelta(seconds=1))
    claimed, taken_over = ledger.claim_pairs(second.pk, [(twin, twin.judge)])
    assert claimed == {twin.pk: 1} and taken_over == {twin.pk}
    lease = PairLease.objects.get()
    assert (lease.run_id, lease.item_id, lease.previous_run_id) == (second.pk, twin.pk, first.pk)


def test_the_database_refuses_a_second_lease_of_one_pair(two_runs):
    first, second = two_runs
    item = first.items.order_by("pk").first()
    ledger.claim_pairs(first.pk, [(item, item.judge)])
    twin = _twin(second, item)
    with pytest.raises(IntegrityError), transaction.atomic():
        PairLease.objects.create(
            response=twin.response,
            judge=twin.judge,
            key_entry=twin.key_entry,
            prompt_version=twin.judge.prompt_version,
            run=second,
            item=twin,
            lease_until=timezone.now(),
        )


def test_lease_pairs_refuses_a_mix_of_grade_and_audit_pairs(two_runs):
    first, _ = two_runs
    item = first.items.order_by("pk").first()
    with pytest.raises(ValueError, match="grade and audit pairs"):
        vendor_sql.lease_pairs(
            [
                (item.pk, item.response_id, item.judge_id, item.key_entry_id, "v1"),
                (item.pk, None, item.judge_id, item.key_entry_id, "v1"),
            ],
            run_id=first.pk,
            lease_seconds=10,
        )


def test_paid_twice_is_counted_across_runs_per_run_and_per_edition(two_runs):
    """Two runs each answered for the same pair (before issue 19 each run's page said 0):
    the later answer is paid twice, on the later call's run and on the edition."""
    first, second = two_runs
    item = first.items.order_by("pk").first()
    other = first.items.order_by("pk")[1]
    pair = {
        "judge": item.judge,
        "response": item.response,
        "key_entry": item.key_entry,
        "prompt_version": "v1",
    }
    JudgeCall.objects.create(run=first, outcome="ok", **pair)
    JudgeCall.objects.create(run=second, outcome="ok", **pair)
    JudgeCall.objects.create(run=second, outcome="lost", **pair)  # lost: not an answer
    JudgeCall.objects.create(
        run=second,
        outcome="ok",
        judge=other.judge,
        response=other.response,
        key_entry=other.key_entry,
        prompt_version="v1",
    )
    JudgeCall.objects.create(run=first, outcome="ok", **{**pair, "prompt_version": "v2"})
    assert runs_selectors.ledger_summary(first)["paid_twice"] == 0
    assert runs_selectors.ledger_summary(second)["paid_twice"] == 1
    assert runs_selectors.ledger_summary(second)["edition_paid_twice"] == 1
    assert runs_selectors.edition_paid_twice(first.edition) == 1
    # audit calls (no response) are pairs too
    auditor = first.judges.first()
    for run in (first, second, second):
        JudgeCall.objects.create(
            run=run, outcome="ok", judge=auditor, key_entry=item.key_entry, prompt_version="a1"
        )
    assert runs_selectors.ledger_summary(second)["paid_twice"] == 3
    assert runs_selectors.edition_paid_twice(first.edition) == 3
