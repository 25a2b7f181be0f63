"""Deleting a benchmark with a published edition: the command, not the admin (issue 26, part 5).

The demo bundle (a published key, 46 questions, grades, verdicts, sources, audit log) is
deleted by `manage.py delete_benchmark` as the owner; a second benchmark stays untouched
row for row; the triggers are on again afterwards. The admin's delete page and bulk action
refuse it and name the command. PostgreSQL (the owner check and DISABLE TRIGGER).
"""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from core.models import AuditLogEntry
from questions.benchmark_delete import dependent_models
from questions.models import Benchmark, KeyEdition, KeyEntry, Question, Response
from scoring.models import AuditVerdict, Grade, JudgeCall, ScoringRun
from tests.conftest import DEMO_BUNDLE
from tests.factories import GradeFactory, JudgeFactory, KeyEntryFactory, ResponseFactory, publish

pytestmark = pytest.mark.django_db

BENCHMARK = "uk-construction-demo"


def sql(statement: str, params=None):
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else None


def counts_of(benchmark_pk: int) -> dict[str, int]:
    """Rows of the benchmark per table, counted through the ORM (independent of the walk)."""
    return {
        "questions_question": Question.objects.filter(benchmark_id=benchmark_pk).count(),
        "questions_keyedition": KeyEdition.objects.filter(benchmark_id=benchmark_pk).count(),
        "questions_keyentry": KeyEntry.objects.filter(edition__benchmark_id=benchmark_pk).count(),
        "questions_response": Response.objects.filter(question__benchmark_id=benchmark_pk).count(),
        "scoring_grade": Grade.objects.filter(judge__benchmark_id=benchmark_pk).count(),
        "scoring_auditverdict": AuditVerdict.objects.filter(
            auditor__benchmark_id=benchmark_pk
        ).count(),
        "scoring_judgecall": JudgeCall.objects.filter(judge__benchmark_id=benchmark_pk).count(),
        "scoring_scoringrun": ScoringRun.objects.filter(benchmark_id=benchmark_pk).count(),
    }


@pytest.fixture
def scene():
    call_command("import_bundle", str(DEMO_BUNDLE), verbosity=0)
    demo = Benchmark.objects.get(name=BENCHMARK)
    other = KeyEntryFactory()  # a second benchmark, published and graded
    GradeFactory(
        response=ResponseFactory(question=other.question),
        judge=JudgeFactory(benchmark=other.edition.benchmark),
        key_entry=other,
    )
    publish(other.edition)
    sql("SET CONSTRAINTS ALL IMMEDIATE")
    return {"demo": demo, "other": other}


def test_the_command_deletes_everything_of_the_benchmark_and_nothing_else(scene):
    demo, other = scene["demo"], scene["other"]
    before = counts_of(demo.pk)
    assert before["questions_question"] == 46
    assert before["scoring_grade"] > 0 and before["questions_keyentry"] > 0
    assert KeyEdition.objects.filter(benchmark=demo, status="published").exists()
    others = counts_of(other.edition.benchmark_id)
    out = io.StringIO()
    sql("SET CONSTRAINTS ALL DEFERRED")  # as in a fresh transaction (Django's are deferred)
    with CaptureQueriesContext(connection) as queries:
        call_command("delete_benchmark", "--benchmark", BENCHMARK, "--yes", stdout=out)
    assert not Benchmark.objects.filter(pk=demo.pk).exists()
    assert set(counts_of(demo.pk).values()) == {0}
    assert counts_of(other.edition.benchmark_id) == others
    # one DELETE per table plus the triggers and the audit row: far from the admin's 4,087
    assert len(queries) < 100
    entry = AuditLogEntry.objects.get(action="benchmark.delete")
    assert (entry.target_label, entry.benchmark_name) == (BENCHMARK, BENCHMARK)
    for table, n in before.items():
        assert entry.before.get(table, 0) == n, table
    assert f"deleted benchmark '{BENCHMARK}'" in out.getvalue()
    # the older audit entries of the benchmark stay (the log has no foreign key)
    assert AuditLogEntry.objects.filter(benchmark_name=BENCHMARK).count() > 1
    # every trigger is on again: the other benchmark's published entry is still immutable
    assert sql("SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal AND tgenabled <> 'O'") == [
        (0,)
    ]
    with pytest.raises(DatabaseError, match="published key edition and is immutable"):
        with transaction.atomic():
            KeyEntry.objects.filter(pk=other.pk).update(answer="changed")


def test_the_walk_reaches_every_model_that_points_at_the_benchmark():
    """Each model with a foreign key into the walk's models is in the walk (the m2m too)."""
    from django.apps import apps

    walked = {m for m, _ in dependent_models()}
    for model in apps.get_models(include_auto_created=True):
        for field in model._meta.concrete_fields:
            if field.is_relation and field.related_model in walked:
                assert model in walked, (model, field.name)
    assert ScoringRun.judges.through in walked
    assert [m for m, _ in dependent_models()][-1] is Benchmark


def test_the_app_role_cannot_delete_a_benchmark(scene):
    before = counts_of(scene["demo"].pk)
    sql("CREATE ROLE snaglist_delete26_test_app NOLOGIN")
    call_command("grant_app_role", "snaglist_delete26_test_app", verbosity=0)
    sql("SET LOCAL ROLE snaglist_delete26_test_app")
    with pytest.raises(CommandError, match="not the owner of .*nothing deleted"):
        call_command("delete_benchmark", "--benchmark", BENCHMARK, "--yes")
    sql("RESET ROLE")
    assert counts_of(scene["demo"].pk) == before


def test_the_command_asks_for_the_name(scene, monkeypatch):
    before = counts_of(scene["demo"].pk)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal
    with pytest.raises(CommandError, match="without confirmation: pass --yes"):
        call_command("delete_benchmark", "--benchmark", BENCHMARK)
    monkeypatch.setattr("sys.stdin.isatty", lambda: True, raising=False)
    monkeypatch.setattr("builtins.input", lambda prompt: "uk-construction")
    with pytest.raises(CommandError, match="does not match; nothing deleted"):
        call_command("delete_benchmark", "--benchmark", BENCHMARK)
    with pytest.raises(CommandError, match="name the benchmark with --benchmark"):
        call_command("delete_benchmark", "--yes")
    assert counts_of(scene["demo"].pk) == before
    monkeypatch.setattr("builtins.input", lambda prompt: BENCHMARK)
    call_command("delete_benchmark", "--benchmark", BENCHMARK, stdout=io.StringIO())
    assert not Benchmark.objects.filter(name=BENCHMARK).exists()


@pytest.fixture
def admin_client(client):
    user = User.objects.create_superuser("root26", "root26@example.org", "pw")
    client.force_login(user)
    return client


def test_the_admin_refuses_to_delete_a_published_benchmark_and_names_the_command(
    scene, admin_client
):
    demo = scene["demo"]
    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get(f"/admin/questions/benchmark/{demo.pk}/delete/", follow=True)
    assert len(queries) < 30
    assert page.redirect_chain[0][0] == f"/admin/questions/benchmark/{demo.pk}/change/"
    html = page.content.decode()
    assert "manage.py delete_benchmark --benchmark uk-construction-demo" in html
    posted = admin_client.post(f"/admin/questions/benchmark/{demo.pk}/delete/", {"post": "yes"})
    assert posted.status_code == 302
    assert Benchmark.objects.filter(pk=demo.pk).exists()
    listing = admin_client.get("/admin/questions/benchmark/")
    assert listing.status_code == 200
    assert "delete_selected" not in listing.content.decode()


def test_the_admin_still_deletes_a_benchmark_with_nothing_published(admin_client):
    empty = Benchmark.objects.create(name="empty26", grade_scale=[0, 1], manifest={})
    page = admin_client.get(f"/admin/questions/benchmark/{empty.pk}/delete/")
    assert page.status_code == 200
    admin_client.post(f"/admin/questions/benchmark/{empty.pk}/delete/", {"post": "yes"})
    assert not Benchmark.objects.filter(pk=empty.pk).exists()


@pytest.mark.sqlite  # SQLite: the triggers are dropped and re-created from their stored SQL
def test_the_command_deletes_a_published_benchmark_and_the_triggers_come_back(db):
    gone, kept = KeyEntryFactory(), KeyEntryFactory()
    for entry in (gone, kept):
        GradeFactory(
            response=ResponseFactory(question=entry.question),
            judge=JudgeFactory(benchmark=entry.edition.benchmark),
            key_entry=entry,
        )
        publish(entry.edition)
    name = gone.edition.benchmark.name
    call_command("delete_benchmark", "--benchmark", name, "--yes", stdout=io.StringIO())
    assert not Benchmark.objects.filter(name=name).exists()
    assert set(counts_of(gone.edition.benchmark_id).values()) == {0}
    assert counts_of(kept.edition.benchmark_id)["scoring_grade"] == 1
    with pytest.raises(DatabaseError, match="immutable"):
        with transaction.atomic():
            KeyEntry.objects.filter(pk=kept.pk).update(answer="changed")
    assert AuditLogEntry.objects.get(action="benchmark.delete").before["scoring_grade"] == 1
