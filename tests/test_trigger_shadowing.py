"""The immutability triggers cannot be fooled by a temporary table (issue 26, part 2).

Tried as the unprivileged role `manage.py grant_app_role` makes (SET LOCAL ROLE inside the
test's transaction, as tests/test_schema_guard.py does). grant_app_role revokes TEMPORARY,
so the role cannot make a temporary table at all; to show that the triggers hold even where
it could (a database set up by hand), TEMPORARY is granted back to it before the attack.
Each trigger function is tried with an empty temporary table named after each table it
reads (questions.trigger_functions.TABLES_READ). PostgreSQL only.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

from core.models import AuditLogEntry
from questions.models import KeyEntry, Question
from questions.trigger_functions import REASK_MARKER_SQL, TABLES_READ
from scoring.models import Grade
from tests.factories import GradeFactory, JudgeFactory, KeyEntryFactory, ResponseFactory, publish

pytestmark = pytest.mark.django_db

APP_ROLE = "snaglist_shadow26_test_app"  # created inside each test's transaction

SHADOWS = {
    "questions_keyedition": "id bigint, status text, name text",
    "questions_keyentry": "id bigint, edition_id bigint, question_id bigint",
    "scoring_judge": "id bigint, judge_id text, benchmark_id bigint",
    "questions_benchmark": "id bigint, name text",
}


def sql(statement: str, params=None):
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else None


@pytest.fixture
def scene():
    """A published edition of two entries, each graded once (one grade null: unparsed)."""
    entry = KeyEntryFactory()
    other = KeyEntryFactory(edition=entry.edition)
    judge = JudgeFactory(benchmark=entry.edition.benchmark)
    graded = GradeFactory(
        response=ResponseFactory(question=entry.question), judge=judge, key_entry=entry, grade=1
    )
    unparsed = GradeFactory(
        response=ResponseFactory(question=other.question), judge=judge, key_entry=other, grade=None
    )
    publish(entry.edition)
    sql("SET CONSTRAINTS ALL IMMEDIATE")
    return {"entry": entry, "graded": graded, "unparsed": unparsed, "judge": judge}


def as_app_role(*, temp: bool) -> None:
    """Become APP_ROLE, granted what grant_app_role grants (and TEMPORARY back if `temp`)."""
    sql(f"CREATE ROLE {APP_ROLE} NOLOGIN")
    call_command("grant_app_role", APP_ROLE, verbosity=0)
    if temp:
        sql(
            f"GRANT TEMPORARY ON DATABASE {connection.ops.quote_name(connection.settings_dict['NAME'])} TO {APP_ROLE}"
        )
    sql(f"SET LOCAL ROLE {APP_ROLE}")


def shadow(*tables: str) -> None:
    for table in tables:
        sql(f"CREATE TEMP TABLE {table} ({SHADOWS[table]}) ON COMMIT DROP")
    # the shadow is what an unqualified name now finds
    assert sql(f"SELECT count(*) FROM {tables[0]}") == [(0,)]


def back_to_owner() -> None:
    """Drop the shadows (the ORM's own queries would read them) and leave the app role."""
    for table in SHADOWS:
        sql(f"DROP TABLE IF EXISTS pg_temp.{table}")
    sql("RESET ROLE")


def refused(
    statement: str, params=None, match="immutable|refused|settled|cannot be deleted"
) -> None:
    with pytest.raises(DatabaseError, match=match):
        with transaction.atomic():
            sql(statement, params)


def test_grant_app_role_takes_temporary_tables_away(scene):
    as_app_role(temp=False)
    assert sql("SELECT has_database_privilege(current_database(), 'TEMPORARY')") == [(False,)]
    refused(
        "CREATE TEMP TABLE questions_keyedition (id bigint, status text)", match="permission denied"
    )


def test_every_table_a_trigger_reads_has_a_shadow_here():
    """The list the tests below shadow covers every table each trigger function reads."""
    assert {t for tables in TABLES_READ.values() for t in tables} == set(SHADOWS)


def test_a_published_entry_stays_immutable_with_the_edition_table_shadowed(scene):
    entry = scene["entry"]
    as_app_role(temp=True)
    shadow(*TABLES_READ["snaglist_protect_published_entry"])
    refused("UPDATE public.questions_keyentry SET answer = 'X' WHERE id = %s", [entry.pk])
    refused("DELETE FROM public.questions_keyentry WHERE id = %s", [entry.pk])
    refused(
        "INSERT INTO public.questions_keyentry SELECT * FROM public.questions_keyentry"
        " WHERE id = %s",
        [entry.pk],
        "no entry may be added",
    )
    back_to_owner()
    assert KeyEntry.objects.get(pk=entry.pk).answer == entry.answer


def test_question_wording_stays_immutable_with_the_key_tables_shadowed(scene):
    question = scene["entry"].question
    as_app_role(temp=True)
    shadow(*TABLES_READ["snaglist_protect_published_question"])
    refused("UPDATE public.questions_question SET text = 'changed' WHERE id = %s", [question.pk])
    refused("DELETE FROM public.questions_question WHERE id = %s", [question.pk])
    back_to_owner()
    assert Question.objects.get(pk=question.pk).text == question.text


def test_truncate_stays_refused_with_the_edition_table_shadowed(scene):
    """As the owner (the app role has no TRUNCATE): the statement trigger reads the real table."""
    sql(f"CREATE TEMP TABLE questions_keyedition ({SHADOWS['questions_keyedition']})")
    refused("TRUNCATE public.questions_keyentry CASCADE", match="TRUNCATE of .* refused")
    assert KeyEntry.objects.count() == 2


def test_a_settled_grade_cannot_be_changed_or_deleted_by_the_app_role(scene):
    graded, unparsed = scene["graded"], scene["unparsed"]
    as_app_role(temp=True)
    shadow(*TABLES_READ["snaglist_protect_grade"])
    refused("UPDATE public.scoring_grade SET grade = 0 WHERE id = %s", [graded.pk])
    refused("DELETE FROM public.scoring_grade WHERE id = %s", [graded.pk])
    refused("DELETE FROM public.scoring_grade WHERE id = %s", [unparsed.pk])
    # even with the marker a settled (non-null) grade stays
    sql(REASK_MARKER_SQL)
    refused("UPDATE public.scoring_grade SET grade = 0 WHERE id = %s", [graded.pk])
    # an unparsed grade without the marker (an ORM update, say) is refused too
    sql("SELECT set_config('snaglist.reask_unparsed', '', true)")
    refused("UPDATE public.scoring_grade SET grade = 2 WHERE id = %s", [unparsed.pk])
    # with the marker the pair itself cannot move
    sql(REASK_MARKER_SQL)
    refused(
        "UPDATE public.scoring_grade SET grade = 2, prompt_version = 'v9' WHERE id = %s",
        [unparsed.pk],
    )
    back_to_owner()
    assert dict(Grade.objects.values_list("pk", "grade")) == {graded.pk: 1, unparsed.pk: None}


def test_the_re_ask_of_an_unparsed_grade_is_let_through_and_audited(scene):
    """With the shadows in place the audit row still names the real judge and benchmark."""
    unparsed, judge = scene["unparsed"], scene["judge"]
    as_app_role(temp=True)
    shadow(*TABLES_READ["snaglist_protect_grade"])
    sql(REASK_MARKER_SQL)
    sql("UPDATE public.scoring_grade SET grade = 2 WHERE id = %s", [unparsed.pk])
    back_to_owner()
    assert Grade.objects.get(pk=unparsed.pk).grade == 2
    entry = AuditLogEntry.objects.get(action="grade.reask")
    assert (entry.actor_label, entry.target_type, entry.target_id) == (
        "system",
        "grade",
        str(unparsed.pk),
    )
    assert entry.benchmark_name == judge.benchmark.name
    assert entry.target_label == f"response {unparsed.response_id}, judge {judge.judge_id}"
    assert (entry.before, entry.after) == ({"grade": None, "run": None}, {"grade": 2, "run": None})


def test_the_audit_log_refuses_truncate(scene):
    """Refused for the owner too (a statement trigger; the app role has no TRUNCATE at all)."""
    AuditLogEntry.objects.create(actor_label="system", action="x", target_type="t", target_id="1")
    sql("SET CONSTRAINTS ALL IMMEDIATE")
    refused("TRUNCATE review_auditlogentry", match="the audit log is append-only")
    assert AuditLogEntry.objects.count() == 1


def test_every_trigger_function_has_a_fixed_search_path():
    rows = sql(
        "SELECT p.proname, p.proconfig FROM pg_proc p"
        " WHERE p.proname LIKE 'snaglist\\_%%' ORDER BY p.proname"
    )
    assert {name for name, _ in rows} >= set(TABLES_READ) | {
        "snaglist_protect_published_edition",
        "snaglist_auditlog_append_only",
        "snaglist_refuse_truncate",
    }
    for name, config in rows:
        assert config == ["search_path=pg_catalog, public, pg_temp"], name
