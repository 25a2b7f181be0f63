"""Migration questions/0005 moves each exclusion by audit to the key entry it was decided on.

Before it, an exclusion was a status of the question, shared by every edition. A tester
found the first version of the data step putting every exclusion on the original entry,
so a corrected entry both auditors had rejected came back into scoring (and was paid for
again), while the original kept an exclusion it had only one adverse verdict for.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils.timezone import now

# PostgreSQL only: on SQLite the flush after a transactional test DELETEs rows, which the
# immutability triggers refuse for published editions (PostgreSQL TRUNCATEs).
pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [
    ("questions", "0004_published_question_wording_is_immutable"),
    ("scoring", "0004_fewer_indexes_and_room_for_hot_updates"),
    ("review", "0002_audit_log_is_append_only"),
]
AFTER = [("questions", "0005_audit_exclusion_per_key_entry")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def test_each_exclusion_moves_to_the_entry_it_was_decided_on():
    apps = _migrate(BEFORE)
    Benchmark = apps.get_model("questions", "Benchmark")
    Question = apps.get_model("questions", "Question")
    KeyEdition = apps.get_model("questions", "KeyEdition")
    KeyEntry = apps.get_model("questions", "KeyEntry")
    Judge = apps.get_model("scoring", "Judge")
    AuditVerdict = apps.get_model("scoring", "AuditVerdict")
    AuditLogEntry = apps.get_model("review", "AuditLogEntry")

    bench = Benchmark.objects.create(name="m", grade_scale=[0, 1, 2], manifest={})
    q = {
        qid: Question.objects.create(benchmark=bench, question_id=qid, text=f"{qid}?")
        for qid in ("Q1", "Q2", "Q3", "Q4")
    }
    original = KeyEdition.objects.create(benchmark=bench, name="original", status="draft")
    entries = {
        qid: KeyEntry.objects.create(edition=original, question=x, answer="a")
        for qid, x in q.items()
    }
    KeyEdition.objects.filter(pk=original.pk).update(status="published", published_at=now())
    corrected = KeyEdition.objects.create(
        benchmark=bench, name="corrected-1", parent=original, status="draft"
    )
    fixed = {
        qid: KeyEntry.objects.create(edition=corrected, question=q[qid], answer="b", reason="other")
        for qid in ("Q1", "Q2")
    }
    KeyEdition.objects.filter(pk=corrected.pk).update(status="published", published_at=now())
    a1, a2 = (
        Judge.objects.create(benchmark=bench, judge_id=a, name=a, role="auditor")
        for a in ("a1", "a2")
    )
    # Q1: triage of corrected-1 excluded it (its log entry names the edition).
    AuditLogEntry.objects.create(
        actor_label="system",
        action="question.exclude",
        target_type="question",
        target_id=str(q["Q1"].pk),
        after={"scoring_status": "excluded", "edition": "corrected-1"},
    )
    # Q2: no log entry; both auditors adverse on its corrected entry only.
    for auditor, verdict in ((a1, "wrong"), (a2, "ungradeable")):
        AuditVerdict.objects.create(key_entry=fixed["Q2"], auditor=auditor, verdict=verdict)
    AuditVerdict.objects.create(key_entry=entries["Q2"], auditor=a1, verdict="wrong")
    AuditVerdict.objects.create(key_entry=entries["Q2"], auditor=a2, verdict="correct")
    # Q3: neither: the root edition's entry. Q4: not excluded at all.
    for qid in ("Q1", "Q2", "Q3"):
        Question.objects.filter(pk=q[qid].pk).update(
            scoring_status="excluded", excluded_reason="auditors_agree"
        )

    apps = _migrate(AFTER)
    AuditExclusion = apps.get_model("questions", "AuditExclusion")
    moved = sorted(
        AuditExclusion.objects.values_list(
            "key_entry__question__question_id", "key_entry__edition__name", "reason"
        )
    )
    assert moved == [
        ("Q1", "corrected-1", "auditors_agree"),
        ("Q2", "corrected-1", "auditors_agree"),
        ("Q3", "original", "auditors_agree"),
    ]
    _migrate(executor_leaves())


def executor_leaves():
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()
