"""Triage's bulk writer files exactly what one review_item_create per piece of evidence does.

review.services.review_items_file (issue 27: triage of 1,001 x 18 spent 73 % of its time in
per-evidence writes): the same items, fields, evidence and audit-log entries, compared
field by field with the one-by-one path on the same input, inside savepoints.
"""

from __future__ import annotations

from django.db import transaction

from core.models import AuditLogEntry
from review.models import Evidence, ReviewItem, Source
from review.services import review_item_create
from review.services.items import _file_one_by_one, review_items_file
from tests.factories import ReviewItemFactory
from tests.review_fixtures import *  # noqa: F403


def _state():
    items = sorted(
        ReviewItem.objects.values_list(
            "question_id", "status", "source", "sources", "priority", "reasons", "version"
        )
    )
    evidence = sorted(Evidence.objects.values_list("item__question_id", "kind", "fingerprint"))
    log = [
        (e.action, e.target_label, e.actor_label, e.before, e.after)
        for e in AuditLogEntry.objects.order_by("pk")
    ]
    return items, evidence, log


def test_the_bulk_writer_equals_one_call_per_piece(world):
    q = world.questions
    # An open item holding evidence already (its priority moves), and a closed one (a new
    # item opens beside it).
    review_item_create(question=q[0], source=Source.JUDGE_FLAG, detail={"n": 1})
    ReviewItemFactory(question=q[1], source=Source.JUDGE_FLAG, status=ReviewItem.Status.CONFIRMED)
    found = {
        q[0].pk: [
            (Source.JUDGE_FLAG.value, {"n": 1}),  # the same piece again: nothing added
            (Source.SUPERSEDED_CITATION.value, {"doc": "ADA"}),
        ],
        q[1].pk: [(Source.SINGLE_AUDITOR_FLAG.value, {"verdicts": []})],
        q[2].pk: [
            (Source.CONSENSUS_AGAINST_KEY.value, {"share": 0.8}),
            (Source.SINGLE_AUDITOR_FLAG.value, {"verdicts": []}),
            (Source.CONSENSUS_AGAINST_KEY.value, {"share": 0.8}),
        ],
    }
    questions = {x.pk: x for x in q}
    results = []
    for writer in (_file_one_by_one, None):
        sid = transaction.savepoint()
        if writer is None:
            returned = review_items_file(found=found, questions=questions)
        else:
            returned = writer(found, questions)
        results.append((returned, _state()))
        transaction.savepoint_rollback(sid)
    (slow_returned, slow), (bulk_returned, bulk) = results
    assert (
        bulk_returned
        == slow_returned
        == {
            q[0].pk: (False, 1),
            q[1].pk: (True, 1),
            q[2].pk: (True, 2),
        }
    )
    assert bulk == slow
    items, evidence, log = bulk
    assert len(items) == 4 and len(evidence) == 5
    # create + one add_evidence for q0's first call, then: q0 one change (the repeat adds
    # nothing and changes nothing), q1 create, q2 create + add + (repeat: nothing).
    assert [e[0] for e in log] == [
        "review_item.create",
        "review_item.add_evidence",
        "review_item.create",
        "review_item.create",
        "review_item.add_evidence",
    ]


def test_nothing_to_file_writes_nothing(world):
    assert review_items_file(found={}, questions={}) == {}
    assert not AuditLogEntry.objects.exists()
