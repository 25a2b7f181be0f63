"""Issue 17 item 7: unparsed replies are asked again up to SNAGLIST_UNPARSED_RETRIES; then evidence."""

from __future__ import annotations

import pytest

from review.models import ReviewItem
from review.triage import triage_run
from scoring.models import Grade, JudgeCall
from scoring.runs import services
from scoring.runs.services import backends
from tests.test_rescore import CountingBackend
from tests.worker_fixtures import build_benchmark, publish_correction

pytestmark = pytest.mark.django_db


@pytest.fixture
def data():
    return build_benchmark(n_questions=4, n_models=3)


def run_once(edition, judges, capture):
    with capture(execute=True):
        run = services.scoring_run_create(edition=edition, judges=judges)
    run.refresh_from_db()
    return run


@pytest.mark.sqlite  # the replacing upsert is vendor SQL: PostgreSQL and SQLite
def test_an_unparsed_reply_is_asked_again_and_its_grade_replaced(
    data, monkeypatch, django_capture_on_commit_callbacks
):
    backend = CountingBackend(unparsed=True)
    monkeypatch.setattr(backends, "judge_backend", lambda judge: backend)
    corrected = publish_correction(data)
    judge = data.judges[:1]
    first = run_once(corrected, judge, django_capture_on_commit_callbacks)
    assert (first.needed, first.unparsed) == (3, 3)  # 3 models x 1 judge on the corrected Q
    entry = corrected.entries.get()
    assert list(Grade.objects.filter(key_entry=entry).values_list("grade", flat=True)) == [None] * 3

    backend.unparsed = False  # the judge answers properly the second time
    second = run_once(corrected, judge, django_capture_on_commit_callbacks)
    # Before issue 17 the three were "reused" and never asked again.
    assert (second.needed, second.graded, second.unparsed, second.reused) == (3, 3, 0, first.reused)
    grades = Grade.objects.filter(key_entry=entry)
    assert grades.count() == 3 and None not in set(grades.values_list("grade", flat=True))
    assert set(grades.values_list("run_id", flat=True)) == {second.pk}
    # Six calls sent; the first run's three are marked lost when the pairs are taken again.
    assert JudgeCall.objects.filter(key_entry=entry, outcome__in=["ok", "lost"]).count() == 6
    third = run_once(corrected, judge, django_capture_on_commit_callbacks)
    assert third.needed == 0  # a parsed grade is never bought twice


def test_asks_stop_at_the_limit_and_triage_files_the_question(
    data, monkeypatch, settings, django_capture_on_commit_callbacks
):
    settings.SNAGLIST_UNPARSED_RETRIES = 1
    backend = CountingBackend(unparsed=True)
    monkeypatch.setattr(backends, "judge_backend", lambda judge: backend)
    corrected = publish_correction(data)
    judge = data.judges[:1]
    needed = [
        run_once(corrected, judge, django_capture_on_commit_callbacks).needed for _ in range(3)
    ]
    assert needed == [3, 3, 0]  # the first ask, one more (the limit), then no more
    assert len(backend.calls) == 6

    triage_run(benchmark=data.benchmark, edition=corrected)
    item = ReviewItem.objects.get(question=corrected.entries.get().question)
    detail = item.evidence.get(kind="unparsed_replies").detail
    assert detail["n_replies"] == 3 and detail["retries"] == 1
    assert {(r["judge"], r["asked"]) for r in detail["replies"]} == {("j1", 2)}
    assert "3 judge replies still unparsed after re-asking" in item.reasons


def test_replies_with_asks_left_are_not_evidence(
    data, monkeypatch, django_capture_on_commit_callbacks
):
    backend = CountingBackend(unparsed=True)
    monkeypatch.setattr(backends, "judge_backend", lambda judge: backend)
    corrected = publish_correction(data)
    run_once(corrected, data.judges[:1], django_capture_on_commit_callbacks)
    triage_run(benchmark=data.benchmark, edition=corrected)
    assert not ReviewItem.objects.filter(sources__contains=["unparsed_replies"]).exists()


def test_as_the_app_role_the_re_ask_replaces_the_grade_and_logs_it(
    data, monkeypatch, django_capture_on_commit_callbacks
):
    """Issue 26: the grade trigger lets the re-ask through (its marker) and audits each pair."""
    from django.core.management import call_command
    from django.db import connection

    from core.models import AuditLogEntry

    backend = CountingBackend(unparsed=True)
    monkeypatch.setattr(backends, "judge_backend", lambda judge: backend)
    corrected = publish_correction(data)
    judge = data.judges[:1]
    run_once(corrected, judge, django_capture_on_commit_callbacks)
    entry = corrected.entries.get()
    nulls = set(Grade.objects.filter(key_entry=entry).values_list("pk", flat=True))
    assert len(nulls) == 3
    with connection.cursor() as cursor:
        cursor.execute("CREATE ROLE snaglist_reask26_test_app NOLOGIN")
        call_command("grant_app_role", "snaglist_reask26_test_app", verbosity=0)
        cursor.execute("SET LOCAL ROLE snaglist_reask26_test_app")
    backend.unparsed = False
    second = run_once(corrected, judge, django_capture_on_commit_callbacks)
    with connection.cursor() as cursor:
        cursor.execute("RESET ROLE")
    assert (second.graded, second.unparsed) == (3, 0)
    grades = Grade.objects.filter(key_entry=entry)
    assert set(grades.values_list("pk", flat=True)) == nulls  # the same rows, replaced
    assert None not in set(grades.values_list("grade", flat=True))
    logged = AuditLogEntry.objects.filter(action="grade.reask")
    assert sorted(int(e.target_id) for e in logged) == sorted(nulls)
    assert {e.after["run"] for e in logged} == {second.pk}
    assert {e.benchmark_name for e in logged} == {data.benchmark.name}
