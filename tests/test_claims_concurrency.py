"""Claim races with REAL concurrent transactions on PostgreSQL (two threads, two connections)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from review import services
from review.errors import InvalidTransitionError
from review.models import ReviewItem
from tests.factories import ReviewItemFactory
from tests.review_fixtures import *  # noqa: F403

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL row locks"),
]


def race(fns):
    """Run each fn in its own thread (own DB connection) released together by a barrier."""
    barrier = threading.Barrier(len(fns))
    results: list = [None] * len(fns)

    def run(i, fn):
        try:
            barrier.wait(timeout=10)
            results[i] = fn()
        except Exception as exc:  # noqa: BLE001 - the outcome is what we assert
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return results


@pytest.mark.parametrize("attempt", range(5))
def test_two_reviewers_claiming_the_same_item_exactly_one_wins(world, reviewer, reviewer2, attempt):
    item = ReviewItemFactory(question=world.q(0), benchmark=world.benchmark)
    results = race(
        [
            lambda: services.review_item_claim(item=ReviewItem(pk=item.pk), user=reviewer),
            lambda: services.review_item_claim(item=ReviewItem(pk=item.pk), user=reviewer2),
        ]
    )
    winners = [r for r in results if isinstance(r, ReviewItem)]
    losers = [r for r in results if isinstance(r, InvalidTransitionError)]
    assert len(winners) == 1 and len(losers) == 1, results
    item.refresh_from_db()
    assert item.claimed_by_id == winners[0].claimed_by_id
    assert item.version == 2


@pytest.mark.parametrize("attempt", range(5))
def test_two_reviewers_pressing_next_get_different_items(world, reviewer, reviewer2, attempt):
    a = ReviewItemFactory(question=world.q(0), benchmark=world.benchmark, priority=300)
    b = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark, priority=200)
    results = race(
        [
            lambda: services.review_item_claim_next(user=reviewer, benchmark=world.benchmark),
            lambda: services.review_item_claim_next(user=reviewer2, benchmark=world.benchmark),
        ]
    )
    assert all(isinstance(r, ReviewItem) for r in results), results
    assert {r.pk for r in results} == {a.pk, b.pk}
    holders = dict(ReviewItem.objects.values_list("pk", "claimed_by__username"))
    assert set(holders.values()) == {"reviewer", "reviewer2"}
