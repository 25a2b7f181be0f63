"""The schema cannot be made to forget the key (issue 19, item 4).

One test per path the issue found open: TRUNCATE of the key and grade tables, reversing the
immutability migrations, and the app connecting as a superuser or as the tables' owner
(core.checks). The paths only a non-owner role closes (ALTER TABLE ... DISABLE TRIGGER,
DROP TRIGGER, ALTER COLUMN ... TYPE, SET session_replication_role) are tried as such a role,
set up by `manage.py grant_app_role`, with SET LOCAL ROLE inside the test's transaction.
PostgreSQL only.
"""

from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.db.migrations.exceptions import IrreversibleError
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder

from core.checks import database_role_warnings
from questions.models import Benchmark, KeyEdition, KeyEntry, Question
from scoring.models import Grade
from tests.factories import GradeFactory, JudgeFactory, KeyEntryFactory, ResponseFactory, publish

pytestmark = pytest.mark.django_db

APP_ROLE = "snaglist_schema19_test_app"  # created and dropped inside each test's transaction
TRIGGERS = {
    "keyedition_immutable",
    "keyentry_immutable",
    "question_wording_immutable",
    "keyedition_no_truncate",
    "keyentry_no_truncate",
    "question_no_truncate",
    "grade_no_truncate",
    "grade_settled",
    "auditlog_no_truncate",
}


def _graded_entries():
    """Two entries of one draft edition, each graded by one judge; returns the first."""
    entry = KeyEntryFactory()
    KeyEntryFactory(edition=entry.edition)
    judge = JudgeFactory(benchmark=entry.edition.benchmark)
    for e in KeyEntry.objects.all():
        GradeFactory(
            response=ResponseFactory(question=e.question), judge=judge, key_entry=e, grade=1
        )
    return entry


def _immediate_constraints() -> None:
    # Django's foreign keys are deferred: check them now, or TRUNCATE fails for "pending
    # trigger events" before the BEFORE TRUNCATE trigger could speak.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


@pytest.fixture
def scene():
    """The graded entries with their edition published (in the test's transaction)."""
    entry = _graded_entries()
    publish(entry.edition)
    _immediate_constraints()
    return entry


def counts() -> tuple[int, int, int, int]:
    return (
        KeyEdition.objects.count(),
        KeyEntry.objects.count(),
        Question.objects.count(),
        Grade.objects.count(),
    )


def installed_triggers() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tgname FROM pg_trigger WHERE tgname = ANY(%s)", [list(TRIGGERS)])
        return {name for (name,) in cursor.fetchall()}


def sql(statement: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement)


# ------------------------------------------------------------------ TRUNCATE


@pytest.mark.parametrize(
    "statement",
    [
        "TRUNCATE questions_keyentry CASCADE",
        "TRUNCATE questions_keyedition CASCADE",
        "TRUNCATE questions_question CASCADE",
        "TRUNCATE scoring_grade",
        "TRUNCATE questions_benchmark CASCADE",
        "TRUNCATE questions_keyentry, scoring_grade RESTART IDENTITY CASCADE",
    ],
)
def test_truncate_of_the_key_or_grades_is_refused_while_an_edition_is_published(scene, statement):
    before = counts()
    assert before == (1, 2, 2, 2)
    with pytest.raises(DatabaseError, match=r"TRUNCATE of \w+ refused: a published key edition"):
        with transaction.atomic():
            sql(statement)
    assert counts() == before


def test_truncate_still_empties_a_database_with_no_published_edition(db):
    """The control: the trigger refuses for the published edition, not for every TRUNCATE."""
    _graded_entries()
    _immediate_constraints()
    assert counts() == (1, 2, 2, 2)
    sql("TRUNCATE scoring_grade")
    assert Grade.objects.count() == 0
    sql("TRUNCATE questions_keyentry CASCADE")
    assert KeyEntry.objects.count() == 0


# ------------------------------------------------------------------ reverse migrations


@pytest.mark.parametrize(
    "target",
    ["questions 0001_initial", "questions 0005_audit_exclusion_per_key_entry", "scoring 0005"],
)
def test_migrate_backwards_over_an_immutability_migration_is_refused(scene, target):
    applied = set(MigrationRecorder(connection).applied_migrations())
    with pytest.raises(CommandError, match=r"migrate refused: it would reverse .*Nothing"):
        with transaction.atomic():
            call_command("migrate", *target.split(), verbosity=0)
    assert set(MigrationRecorder(connection).applied_migrations()) == applied
    assert installed_triggers() == TRIGGERS


@pytest.mark.parametrize(
    "target, refused",
    [
        (("scoring", "0005_rescore_request"), r"scoring\.00(16|06)"),
        (("questions", "0005_audit_exclusion_per_key_entry"), r"(scoring|questions)\.00(16|06)"),
    ],
)
def test_the_reverse_itself_refuses_when_run_without_migrate(scene, target, refused):
    """A MigrationExecutor (no pre_migrate signal) meets the guard in the reverse function."""
    with pytest.raises(IrreversibleError, match=rf"{refused} cannot be reversed: 1 published"):
        with transaction.atomic():
            executor = MigrationExecutor(connection)
            executor.loader.build_graph()
            executor.migrate([target])
    assert installed_triggers() == TRIGGERS


def test_migrate_backwards_is_allowed_with_no_published_edition(db):
    """With nothing published the immutability migrations reverse (and re-apply) as before."""
    assert not KeyEdition.objects.filter(status="published").exists()
    with transaction.atomic():
        call_command("migrate", "scoring", "0005", verbosity=0)
        assert "grade_no_truncate" not in installed_triggers()
        call_command("migrate", "scoring", verbosity=0)
    assert installed_triggers() == TRIGGERS


# ------------------------------------------------------------------ the connecting role


def _as_app_role():
    """Create APP_ROLE, grant it what grant_app_role grants, and become it (SET LOCAL ROLE)."""
    sql(f"CREATE ROLE {APP_ROLE} NOLOGIN")
    call_command("grant_app_role", APP_ROLE, verbosity=0)
    sql(f"SET LOCAL ROLE {APP_ROLE}")


def test_superuser_connection_gets_the_superuser_warning(db):
    found = database_role_warnings()
    assert [m.id for m in found] == ["snaglist.W001"]
    assert "superuser" in found[0].msg
    deploy = run_checks(include_deployment_checks=True)
    assert "snaglist.W001" in [m.id for m in deploy]


def test_owner_connection_gets_the_owner_warning(db):
    sql(f"CREATE ROLE {APP_ROLE} NOLOGIN")
    sql(f"ALTER TABLE questions_keyentry OWNER TO {APP_ROLE}")
    sql(f"SET LOCAL ROLE {APP_ROLE}")
    found = database_role_warnings()
    assert [m.id for m in found] == ["snaglist.W002"]
    assert f"'{APP_ROLE}', which owns questions_keyentry (owner {APP_ROLE})" in found[0].msg


def test_a_role_granted_truncate_gets_the_privilege_warning(db):
    _as_app_role()
    sql("RESET ROLE")
    sql(f"GRANT TRUNCATE ON scoring_grade TO {APP_ROLE}")
    sql(f"SET LOCAL ROLE {APP_ROLE}")
    found = database_role_warnings()
    assert [m.id for m in found] == ["snaglist.W003"]
    assert "TRUNCATE or TRIGGER on scoring_grade" in found[0].msg


def test_the_app_role_gets_no_warning_and_can_do_its_work(scene):
    _as_app_role()
    assert database_role_warnings() == []
    assert "snaglist" not in " ".join(m.id for m in run_checks(include_deployment_checks=True))
    # Its ordinary work: read, insert (the id sequence), update and delete of draft rows.
    bench = Benchmark.objects.create(name="role-test", grade_scale=[0, 1], manifest={})
    draft = KeyEdition.objects.create(benchmark=bench, name="draft")
    KeyEdition.objects.filter(pk=draft.pk).update(note="edited")
    KeyEdition.objects.filter(pk=draft.pk).delete()
    assert KeyEntry.objects.count() == 2


@pytest.mark.parametrize(
    "statement",
    [
        "TRUNCATE questions_keyentry CASCADE",
        "TRUNCATE scoring_grade",
        "ALTER TABLE questions_keyentry DISABLE TRIGGER keyentry_immutable",
        "ALTER TABLE questions_keyentry DISABLE TRIGGER ALL",
        "DROP TRIGGER keyentry_immutable ON questions_keyentry",
        "ALTER TABLE questions_keyentry ALTER COLUMN answer TYPE varchar(5) USING left(answer, 5)",
        "SET session_replication_role = replica",
        "DROP FUNCTION snaglist_protect_published_entry() CASCADE",
        "CREATE OR REPLACE FUNCTION snaglist_protect_published_entry() RETURNS trigger"
        " AS $$ BEGIN RETURN NEW; END; $$ LANGUAGE plpgsql",
    ],
)
def test_the_app_role_cannot_take_the_paths_around_the_triggers(scene, statement):
    before = counts()
    _as_app_role()
    with pytest.raises(DatabaseError, match=r"permission denied|must be owner"):
        with transaction.atomic():
            sql(statement)
    sql("RESET ROLE")
    assert counts() == before
    assert installed_triggers() == TRIGGERS


def test_as_the_app_role_a_published_entry_still_cannot_be_updated(scene):
    _as_app_role()
    with pytest.raises(DatabaseError, match="published key edition and is immutable"):
        with transaction.atomic():
            KeyEntry.objects.filter(pk=scene.pk).update(answer="changed")


def test_grant_app_role_refuses_a_superuser_an_owner_and_an_unknown_role(db):
    with pytest.raises(CommandError, match="'postgres': is a superuser"):
        call_command("grant_app_role", "postgres")
    with pytest.raises(CommandError, match="no such PostgreSQL role"):
        call_command("grant_app_role", "snaglist_schema19_nobody")
    sql(f"CREATE ROLE {APP_ROLE} NOLOGIN")
    sql(f"ALTER TABLE scoring_grade OWNER TO {APP_ROLE}")
    with pytest.raises(CommandError, match=f"'{APP_ROLE}': owns scoring_grade"):
        call_command("grant_app_role", APP_ROLE)


def test_web_and_worker_start_up_log_the_warning(db, caplog):
    """config/wsgi.py and the worker's worker_init call this; it logs each warning."""
    from core.checks import log_database_role_warnings

    with caplog.at_level("WARNING", logger="core.checks"):
        assert log_database_role_warnings("web") == 1
    assert (
        caplog.records[0]
        .getMessage()
        .startswith(
            "web start-up: snaglist.W001: The app connects to PostgreSQL as 'postgres', a superuser"
        )
    )
