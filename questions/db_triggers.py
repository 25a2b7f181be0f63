"""Run database-trigger SQL written per vendor from a migration (PostgreSQL and SQLite).

Used by the migrations that make published key rows immutable (questions/0002, 0004) and
the audit log append-only (review/0002). Kept stable: migrations import it.
"""

from __future__ import annotations

from django.db import migrations


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


def run_trigger_sql(
    *, pg_forward: str, pg_reverse: str, sqlite_forward: list[str], sqlite_reverse: list[str]
) -> migrations.RunPython:
    """Return a RunPython operation that installs (and on reverse drops) the triggers.

    Raises RuntimeError on a database other than PostgreSQL or SQLite.
    """

    def forward(apps, schema_editor):
        _run(schema_editor, pg_forward, sqlite_forward)

    def reverse(apps, schema_editor):
        _run(schema_editor, pg_reverse, sqlite_reverse)

    return migrations.RunPython(forward, reverse)
