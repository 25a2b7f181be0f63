"""docs/admin.md's table of what each role can do, tried for the app's role (issue 26, part 2).

The table is read from the document: every row must have a check here, and each check
does, as the role grant_app_role makes (SET LOCAL ROLE in the test's transaction), what
the row's "app's role" cell claims: "refused ..." raises a database error and changes
nothing, "allowed" goes through. Rows about files on the server, or about commands
(`migrate`, `delete_benchmark`), are tried in tests/test_schema_guard.py and
tests/test_benchmark_delete.py, named below. PostgreSQL only.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

from core.models import AuditLogEntry
from questions.models import KeyEdition
from questions.trigger_functions import REASK_MARKER_SQL
from tests.conftest import PROJECT_ROOT
from tests.factories import (
    GradeFactory,
    JudgeFactory,
    KeyEditionFactory,
    KeyEntryFactory,
    ResponseFactory,
    publish,
)

pytestmark = pytest.mark.django_db

APP_ROLE = "snaglist_table26_test_app"


def sql(statement: str, params=None):
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else None


def table_rows() -> dict[str, str]:
    """{path cell: app's-role cell} of the table under "What each role can do"."""
    text = (PROJECT_ROOT / "docs" / "admin.md").read_text(encoding="utf-8")
    section = text.split("What each role can do", 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("path", "---"):
            rows[cells[0]] = cells[1]
    return rows


@pytest.fixture
def scene():
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
    draft = KeyEditionFactory(benchmark=entry.edition.benchmark, name="draft")
    AuditLogEntry.objects.create(actor_label="system", action="x", target_type="t", target_id="1")
    sql("SET CONSTRAINTS ALL IMMEDIATE")
    return {"entry": entry, "graded": graded, "unparsed": unparsed, "draft": draft}


def _published_key(s):
    return [
        ("UPDATE questions_keyentry SET answer = 'X' WHERE id = %s", [s["entry"].pk]),
        ("DELETE FROM questions_keyedition WHERE id = %s", [s["entry"].edition_id]),
        ("UPDATE questions_question SET text = 'X' WHERE id = %s", [s["entry"].question_id]),
        (
            "INSERT INTO questions_keyentry SELECT * FROM questions_keyentry WHERE id = %s",
            [s["entry"].pk],
        ),
    ]


def _draft_key(s):
    return [
        ("UPDATE questions_keyedition SET note = 'edited' WHERE id = %s", [s["draft"].pk]),
        ("DELETE FROM questions_keyedition WHERE id = %s", [s["draft"].pk]),
    ]


def _reask(s):
    return [
        (REASK_MARKER_SQL, None),
        ("UPDATE scoring_grade SET grade = 2 WHERE id = %s", [s["unparsed"].pk]),
    ]


def _other_grade_change(s):
    return [
        ("UPDATE scoring_grade SET grade = 0 WHERE id = %s", [s["graded"].pk]),
        ("UPDATE scoring_grade SET flag = true WHERE id = %s", [s["unparsed"].pk]),
        ("DELETE FROM scoring_grade WHERE id = %s", [s["unparsed"].pk]),
    ]


def _audit_rows(s):
    return [
        ("UPDATE review_auditlogentry SET action = 'y'", None),
        ("DELETE FROM review_auditlogentry", None),
    ]


# path cell -> (statements, each tried in a transaction of its own) or the test that tries it
CHECKS: dict[str, Callable | str] = {
    "UPDATE / DELETE / INSERT of a published key row (edition, entries, question wording)": _published_key,
    "UPDATE / DELETE / INSERT of a draft key row": _draft_key,
    "UPDATE of an unparsed grade by the re-ask (same pair, marker set)": _reask,
    "any other UPDATE, or a DELETE, of a grade": _other_grade_change,
    "UPDATE / DELETE of an audit-log row": _audit_rows,
    "TRUNCATE of the audit log": lambda s: [("TRUNCATE review_auditlogentry", None)],
    "TRUNCATE of the key or grade tables, also via CASCADE": lambda s: [
        ("TRUNCATE questions_keyentry CASCADE", None),
        ("TRUNCATE scoring_grade", None),
    ],
    "CREATE TEMP TABLE (e.g. one named like a protected table)": lambda s: [
        ("CREATE TEMP TABLE questions_keyedition (id bigint, status text)", None)
    ],
    "`ALTER TABLE ... DISABLE TRIGGER`, `DROP TRIGGER`, replacing the trigger function": lambda s: [
        ("ALTER TABLE scoring_grade DISABLE TRIGGER grade_settled", None),
        ("DROP TRIGGER keyentry_immutable ON questions_keyentry", None),
        (
            "CREATE OR REPLACE FUNCTION public.snaglist_protect_grade() RETURNS trigger"
            " AS $$ BEGIN RETURN NEW; END; $$ LANGUAGE plpgsql",
            None,
        ),
    ],
    "`ALTER COLUMN ... TYPE ... USING` (rewrites every row, fires no trigger)": lambda s: [
        (
            "ALTER TABLE questions_keyentry ALTER COLUMN answer TYPE varchar(5) USING left(answer, 5)",
            None,
        )
    ],
    "`SET session_replication_role = replica` (no ordinary trigger fires)": lambda s: [
        ("SET session_replication_role = replica", None)
    ],
    "`delete_benchmark` (a whole benchmark, published key included)": "tests/test_benchmark_delete.py::test_the_app_role_cannot_delete_a_benchmark",
    "`migrate` backwards over the immutability migrations": "tests/test_schema_guard.py::test_migrate_backwards_over_an_immutability_migration_is_refused",
    "editing the data files, `pg_resetwal`, restoring an older dump": "not a database statement",
}


def test_every_row_of_the_table_has_a_check():
    assert set(table_rows()) == set(CHECKS)


def _state() -> tuple:
    return (
        sql("SELECT id, answer FROM questions_keyentry ORDER BY id"),
        sql("SELECT id, grade, flag FROM scoring_grade ORDER BY id"),
        sql("SELECT id, note FROM questions_keyedition ORDER BY id"),
        sql("SELECT id, text FROM questions_question ORDER BY id"),
        sql("SELECT id, action FROM review_auditlogentry ORDER BY id"),
    )


@pytest.mark.parametrize("path", [p for p, c in CHECKS.items() if callable(c)])
def test_the_app_role_does_what_the_table_says(scene, path):
    claim = table_rows()[path]
    assert claim.startswith(("refused", "allowed")), claim
    sql(f"CREATE ROLE {APP_ROLE} NOLOGIN")
    call_command("grant_app_role", APP_ROLE, verbosity=0)
    before = _state()
    audit_before = AuditLogEntry.objects.count()
    sql(f"SET LOCAL ROLE {APP_ROLE}")
    statements = CHECKS[path](scene)
    if claim.startswith("refused"):
        for statement, params in statements:
            with pytest.raises(DatabaseError):
                with transaction.atomic():
                    sql(statement, params)
        sql("RESET ROLE")
        assert _state() == before
        assert re.search(r"trigger|privilege|owner|TEMPORARY", claim) or claim == "refused"
    else:
        with transaction.atomic():
            for statement, params in statements:
                sql(statement, params)
        sql("RESET ROLE")
        assert _state() != before
        if "audited" in claim:
            assert AuditLogEntry.objects.count() == audit_before + 1
    assert KeyEdition.objects.filter(status="published").count() == 1
