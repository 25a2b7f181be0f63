"""Issue 26, part 2: the trigger functions name their tables with the schema and run with a
fixed search_path, so a temporary table cannot stand in for a real one; grades may be
changed by the app's role only through the re-ask of an unparsed reply (audited); the audit
log refuses TRUNCATE. The SQL is questions/trigger_functions.py. PostgreSQL only (SQLite has
no temporary-schema search, no roles and no TRUNCATE).

The reverse drops the two new triggers and keeps the hardened functions (the unqualified
ones are not put back).
"""

from django.db import migrations

from questions.db_triggers import refuse_while_published
from questions.trigger_functions import drop_triggers_sql, function_sql, triggers_sql


def _schema(schema_editor) -> str:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT current_schema()")
        (schema,) = cursor.fetchone()
    return schema_editor.connection.ops.quote_name(schema)


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema = _schema(schema_editor)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(function_sql(schema))
        cursor.execute(triggers_sql(schema))


def reverse(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    refuse_while_published(schema_editor, "scoring.0016")
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(drop_triggers_sql(_schema(schema_editor)))


class Migration(migrations.Migration):
    # questions.apps.refuse_reversing_immutability: `migrate` backwards refuses while a
    # published key edition exists (and the reverse refuses by itself too).
    refused_backwards_while_published = True

    dependencies = [
        ("scoring", "0015_batch_mode"),
        ("questions", "0007_public22_benchmark_public_switch"),
        ("review", "0002_audit_log_is_append_only"),
        ("core", "0001_initial"),
    ]

    operations = [migrations.RunPython(forward, reverse)]
