"""Methodology rule 7: no row of a published key edition is ever updated or deleted.

Checked underneath Python: raw SQL and every ORM path must fail on PostgreSQL and SQLite,
and the rows must be byte-identical afterwards.
"""

from __future__ import annotations

import hashlib

import pytest
from django.db import DatabaseError, connection, transaction

from questions import services
from questions.errors import ImmutableEditionError, InvalidTransitionError
from questions.models import Benchmark, KeyEdition, KeyEntry, Question


def _fingerprint() -> str:
    rows = list(KeyEntry.objects.order_by("pk").values_list()) + list(
        KeyEdition.objects.order_by("pk").values_list()
    )
    return hashlib.sha256(repr(rows).encode()).hexdigest()


@pytest.fixture
def published(db):
    bench = Benchmark.objects.create(name="imm", grade_scale=[0, 1, 2])
    q1 = Question.objects.create(benchmark=bench, question_id="Q1", text="Width?")
    q2 = Question.objects.create(benchmark=bench, question_id="Q2", text="Pitch?")
    edition = services.key_edition_create(benchmark=bench, name="original", parent=None)
    e1 = services.key_entry_create(edition=edition, question=q1, answer="800\u00a0mm")
    services.key_entry_create(edition=edition, question=q2, answer="42°")
    services.key_edition_publish(edition=edition, user=None)
    edition.refresh_from_db()
    return {"bench": bench, "edition": edition, "entry": e1, "q1": q1, "q2": q2}


def _refused(fn) -> None:
    with pytest.raises(DatabaseError), transaction.atomic():
        fn()


RAW = [
    "UPDATE questions_keyentry SET answer = 'changed' WHERE id = %(entry)s",
    "DELETE FROM questions_keyentry WHERE id = %(entry)s",
    "UPDATE questions_keyedition SET note = 'changed' WHERE id = %(edition)s",
    "UPDATE questions_keyedition SET status = 'draft', published_at = NULL WHERE id = %(edition)s",
    "DELETE FROM questions_keyedition WHERE id = %(edition)s",
]


@pytest.mark.sqlite
@pytest.mark.parametrize("sql", RAW)
def test_raw_sql_cannot_change_a_published_edition_or_entry(published, sql):
    before = _fingerprint()

    def run():
        with connection.cursor() as cursor:
            cursor.execute(
                sql % {"entry": published["entry"].pk, "edition": published["edition"].pk}
            )

    _refused(run)
    assert _fingerprint() == before


@pytest.mark.sqlite
def test_orm_writes_to_a_published_entry_all_fail(published):
    before = _fingerprint()
    entry = published["entry"]

    def save():
        entry.answer = "changed"
        entry.save()

    def bulk_update():
        entry.answer = "changed"
        KeyEntry.objects.bulk_update([entry], ["answer"])

    for attempt in (
        save,
        lambda: KeyEntry.objects.filter(pk=entry.pk).update(answer="changed"),
        lambda: KeyEntry.objects.filter(edition=published["edition"]).delete(),
        lambda: KeyEntry.objects.get(pk=entry.pk).delete(),
        bulk_update,
        lambda: KeyEntry.objects.create(
            edition=published["edition"], question=published["q1"], answer="sneaked in"
        ),
        lambda: KeyEdition.objects.filter(pk=published["edition"].pk).update(note="x"),
        lambda: KeyEdition.objects.get(pk=published["edition"].pk).delete(),
    ):
        _refused(attempt)
    assert _fingerprint() == before
    assert KeyEntry.objects.get(pk=entry.pk).answer == "800\u00a0mm"


@pytest.mark.sqlite
def test_services_refuse_to_touch_a_published_edition(published):
    before = _fingerprint()
    with pytest.raises(ImmutableEditionError):
        services.key_entry_create(
            edition=published["edition"], question=published["q1"], answer="new"
        )
    with pytest.raises(InvalidTransitionError):
        services.key_edition_publish(edition=published["edition"], user=None)
    assert _fingerprint() == before


def _original_hash(edition) -> str:
    rows = list(KeyEntry.objects.filter(edition=edition).order_by("pk").values_list())
    rows += list(KeyEdition.objects.filter(pk=edition.pk).values_list())
    return hashlib.sha256(repr(rows).encode()).hexdigest()


@pytest.mark.sqlite
def test_a_correction_goes_into_a_new_edition_and_the_original_stays(published):
    from questions.selectors import key_entries_for_edition

    before = _original_hash(published["edition"])
    draft = services.key_edition_create(
        benchmark=published["bench"], name="corrected-1", parent=published["edition"]
    )
    with pytest.raises(InvalidTransitionError):
        services.key_edition_create(
            benchmark=published["bench"], name="other", parent=published["edition"]
        )
    services.key_entry_create(
        edition=draft,
        question=published["q2"],
        answer="40°",
        reason="factually_wrong",
        note="checked",
    )
    services.key_edition_publish(edition=draft, user=None)
    effective = key_entries_for_edition(draft)
    assert effective[published["q1"].pk].answer == "800\u00a0mm"
    assert effective[published["q1"].pk].edition_id == published["edition"].pk
    assert effective[published["q2"].pk].answer == "40°"
    assert effective[published["q2"].pk].edition_id == draft.pk
    assert _original_hash(published["edition"]) == before
