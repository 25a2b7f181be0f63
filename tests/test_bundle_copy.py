"""The bundle import's COPY path on PostgreSQL (issue 28 item 4): pks from the table's
sequence, values as the ORM writes them, row triggers still firing; SQLite keeps
bulk_create. The tests not marked `sqlite` run in the PostgreSQL pass only."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from interchange.bundles import import_bundle
from interchange.bundles.import_base import ImportBase, _prepared, copyable
from questions.models import (
    Benchmark,
    KeyEdition,
    KeyEntry,
    ModelUnderTest,
    Question,
    Response,
)
from scoring.models import AuditVerdict, Grade, Judge, ScoringRun
from tests.bundle_factory import write_bundle


def bulk(model, objs, label="grades"):
    """Insert `objs` through ImportBase._bulk, as an import step does."""
    base = ImportBase.__new__(ImportBase)
    base.show, base.created = False, {label: 0}
    made = base._bulk(model, objs, label)
    assert base.created[label] == len(objs)
    return made


@pytest.fixture
def bench():
    b = Benchmark.objects.create(name="copy-test", grade_scale=[0, 1, 2])
    q = Question.objects.create(benchmark=b, question_id="Q1", text="Which regulation?")
    edition = KeyEdition.objects.create(benchmark=b, name="original")
    entry = KeyEntry.objects.create(edition=edition, question=q, answer="Part B")
    m = ModelUnderTest.objects.create(benchmark=b, model_id="m1", name="M1", vendor="v")
    judge = Judge.objects.create(benchmark=b, judge_id="j1", name="J1", vendor="w")
    return {
        "bench": b,
        "question": q,
        "edition": edition,
        "entry": entry,
        "model": m,
        "judge": judge,
    }


@pytest.mark.django_db
def test_large_tables_are_copyable_on_postgresql_and_a_db_default_model_is_not():
    assert connection.vendor == "postgresql"
    for model in (Question, KeyEntry, Response, Grade, AuditVerdict):
        assert copyable(model, connection)
    assert not copyable(ScoringRun, connection)  # mode, resend_count: db_default


@pytest.mark.sqlite
@pytest.mark.django_db
def test_rows_come_back_with_pks_and_the_values_the_orm_would_store(bench):
    m2 = ModelUnderTest.objects.create(benchmark=bench["bench"], model_id="m2", name="M2")
    before = Response.objects.aggregate(top=Max("pk"))["top"] or 0
    # COPY's text format escapes tab, newline and backslash; \\N is its NULL marker.
    texts = ["plain", "tab\there, newline\nthere", "back\\slash and \\N", "é ü “quotes”"]
    made = bulk(
        Response,
        [
            Response(question=bench["question"], model=bench["model"], text=texts[0]),
            Response(question=bench["question"], model=m2, text=texts[1]),
        ],
        "responses",
    )
    assert len({r.pk for r in made}) == 2
    assert all(r.pk > before and not r._state.adding for r in made)
    stored = dict(Response.objects.filter(pk__in=[r.pk for r in made]).values_list("pk", "text"))
    assert stored == {made[0].pk: texts[0], made[1].pk: texts[1]}
    grades = bulk(
        Grade,
        [
            Grade(
                response=made[i],
                judge=bench["judge"],
                key_entry=bench["entry"],
                grade=g,
                rationale=texts[i + 2],
                raw_output=r"\N",
            )
            for i, g in ((0, None), (1, 2))
        ],
    )
    rows = {g.pk: g for g in Grade.objects.filter(pk__in=[g.pk for g in grades]).order_by("pk")}
    assert [rows[g.pk].grade for g in grades] == [None, 2]  # NULL stays NULL, not 0
    assert [rows[g.pk].rationale for g in grades] == texts[2:]
    assert all(rows[g.pk].raw_output == "\\N" for g in grades)  # the two characters, not NULL
    assert all(rows[g.pk].prompt_version == "v1" and not rows[g.pk].flag for g in grades)
    assert all(rows[g.pk].created_at is not None for g in grades)  # auto_now_add
    # The sequence is past every copied pk: the ORM's next insert takes a fresh one.
    m3 = ModelUnderTest.objects.create(benchmark=bench["bench"], model_id="m3", name="M3")
    later = Response.objects.create(question=bench["question"], model=m3, text="later")
    assert later.pk > max(r.pk for r in made)


@pytest.mark.django_db
def test_copy_fires_the_row_trigger_that_refuses_entries_in_a_published_edition(bench):
    KeyEdition.objects.filter(pk=bench["edition"].pk).update(
        status=KeyEdition.Status.PUBLISHED, published_at=timezone.now()
    )
    q2 = Question.objects.create(benchmark=bench["bench"], question_id="Q2", text="Which part?")
    with pytest.raises(DatabaseError, match="is published: no entry may be added"):
        with transaction.atomic():
            bulk(KeyEntry, [KeyEntry(edition=bench["edition"], question=q2)], "key_entries")
    assert not KeyEntry.objects.filter(question=q2).exists()


@pytest.mark.django_db
def test_a_full_import_through_copy_then_a_reimport_writes_nothing(tmp_path):
    folder = tmp_path / "b"
    counts = write_bundle(folder, n_questions=12, n_models=3, seed=2, name="copy-full")
    first = import_bundle(folder)
    assert first.created["grades"] == counts["grades.jsonl"]
    bench = Benchmark.objects.get(name="copy-full")
    grades = Grade.objects.filter(judge__benchmark=bench)
    assert grades.count() == counts["grades.jsonl"]
    # Every grade points at a response of this benchmark (the pks handed on by COPY).
    assert grades.exclude(response__question__benchmark=bench).count() == 0
    assert Response.objects.filter(question__benchmark=bench).count() == counts["responses.jsonl"]
    again = import_bundle(folder)
    assert again.already_imported
    assert Grade.objects.filter(judge__benchmark=bench).count() == counts["grades.jsonl"]


@pytest.mark.django_db
def test_the_shortcut_gives_what_get_db_prep_save_gives_for_every_field():
    objs = [
        Grade(response_id=7, judge_id=3, key_entry_id=5, grade=True, rationale="r"),
        Grade(response_id=7, judge_id=3, key_entry_id=5, grade=None, flag_reason=None),
        KeyEntry(edition_id=1, question_id=2, reason=KeyEntry.Reason.OTHER, removed=1, note="n"),
        Response(question_id=1, model_id=2, text="t"),
    ]
    for obj in objs:
        for field in type(obj)._meta.concrete_fields:
            if field.attname == "created_at":
                continue  # auto_now_add: now, differs by microseconds
            expected = field.get_db_prep_save(field.pre_save(obj, True), connection)
            got = _prepared(field, connection)(obj)
            assert got == expected and type(got) is type(expected), (field.name, got, expected)
    # A bool for an integer grade is coerced as the ORM does, not passed through.
    assert _prepared(Grade._meta.get_field("grade"), connection)(objs[0]) == 1
    entry = KeyEntry(edition_id=1, question_id=2)
    created = _prepared(KeyEntry._meta.get_field("created_at"), connection)(entry)
    assert created is not None and entry.created_at == created
