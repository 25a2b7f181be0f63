"""Run database-trigger SQL written per vendor from a migration (PostgreSQL and SQLite).

Used by the migrations that make published key rows immutable (questions/0002, 0004, 0006,
scoring/0006) and the audit log append-only (review/0002). Kept stable: migrations import it.
"""

from __future__ import annotations

from django.db import migrations
from django.db.migrations.exceptions import IrreversibleError


def _run(schema_editor, postgresql: str, sqlite: list[str]) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        # A plain cursor: plpgsql's '%' placeholders must not be read as query parameters.
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(postgresql)
    elif vendor == "sqlite":
        for statement in sqlite:
            schema_editor.execute(statement)
    else:  # pragma: no cover - only the two supported databases
        raise RuntimeError(f"database triggers are not written for {vendor}")


def refuse_while_published(schema_editor, migration: str) -> None:
    """Raise IrreversibleError if any key edition is published (methodology rule 7).

    `migration` names the migration being reversed ("questions.0002"), for the message.
    Reversing an immutability migration drops its triggers, after which the published key
    could be changed and migrating forward again would leave no trace; so the reverse is
    allowed only on a database with no published edition (a fresh or test database).
    """
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM questions_keyedition WHERE status = 'published'")
        (published,) = cursor.fetchone()
    if published:
        raise IrreversibleError(
            f"{migration} cannot be reversed: {published} published key edition(s) exist, and "
            "its reverse would drop the triggers that keep them immutable (methodology rule 7)."
        )


def run_trigger_sql(
    *,
    pg_forward: str,
    pg_reverse: str,
    sqlite_forward: list[str],
    sqlite_reverse: list[str],
    reverse_refused_while_published: str | None = None,
) -> migrations.RunPython:
    """Return a RunPython operation that installs (and on reverse drops) the triggers.

    With `reverse_refused_while_published` (the migration's label, e.g. "questions.0002")
    the reverse first calls refuse_while_published and so raises IrreversibleError while a
    published key edition exists. Raises RuntimeError on a database other than PostgreSQL
    or SQLite.
    """

    def forward(apps, schema_editor):
        _run(schema_editor, pg_forward, sqlite_forward)

    def reverse(apps, schema_editor):
        if reverse_refused_while_published:
            refuse_while_published(schema_editor, reverse_refused_while_published)
        _run(schema_editor, pg_reverse, sqlite_reverse)

    return migrations.RunPython(forward, reverse)
