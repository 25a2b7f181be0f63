"""Rule 7 against TRUNCATE: the key tables cannot be emptied while a published edition exists.

TRUNCATE fires no row trigger, so questions/0002 and 0004 never saw it: `TRUNCATE
questions_keyentry CASCADE` removed every entry and every grade. A statement-level BEFORE
TRUNCATE trigger on questions_keyedition, questions_keyentry and questions_question (and,
in scoring/0006, scoring_grade) refuses it while any key edition is published; TRUNCATE
... CASCADE from a table above (questions_benchmark) reaches these tables and is refused
too. A database with no published edition (a fresh one, the test runner's flush) can still
be emptied. SQLite has no TRUNCATE (its DELETE is refused row by row by 0002), so nothing
is installed there. The error is SQLSTATE 23001 restrict_violation.

What this cannot stop: the tables' owner or a superuser can DISABLE or DROP the trigger
first, and a superuser can SET session_replication_role = replica; docs/admin.md says why
the app must connect as a role that owns nothing.
"""

from django.db import migrations

from questions.db_triggers import run_trigger_sql

TABLES = ("questions_keyedition", "questions_keyentry", "questions_question")

PG_FORWARD = r"""
CREATE OR REPLACE FUNCTION snaglist_refuse_truncate_of_published_key() RETURNS trigger AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM questions_keyedition WHERE status = 'published') THEN
        RAISE EXCEPTION 'TRUNCATE of % refused: a published key edition exists and is immutable', TG_TABLE_NAME
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
""" + "".join(
    f"""
CREATE TRIGGER {table.removeprefix("questions_")}_no_truncate
    BEFORE TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION snaglist_refuse_truncate_of_published_key();
"""
    for table in TABLES
)

PG_REVERSE = "".join(
    f"DROP TRIGGER IF EXISTS {table.removeprefix('questions_')}_no_truncate ON {table};\n"
    for table in TABLES
) + "DROP FUNCTION IF EXISTS snaglist_refuse_truncate_of_published_key();\n"


class Migration(migrations.Migration):
    # questions.apps.refuse_reversing_immutability: `migrate` backwards refuses while a
    # published key edition exists (and the reverse below refuses by itself too).
    refused_backwards_while_published = True

    dependencies = [("questions", "0005_audit_exclusion_per_key_entry")]

    operations = [
        run_trigger_sql(
            pg_forward=PG_FORWARD,
            pg_reverse=PG_REVERSE,
            sqlite_forward=[],
            sqlite_reverse=[],
            reverse_refused_while_published="questions.0006",
        )
    ]
