"""Rule 7 against TRUNCATE: the grades cannot be emptied while a published key edition exists.

Uses questions/0006's trigger function (the one statement of the rule); see its docstring
for what this does and does not stop. PostgreSQL only: SQLite has no TRUNCATE.
"""

from django.db import migrations

from questions.db_triggers import run_trigger_sql

PG_FORWARD = r"""
CREATE TRIGGER grade_no_truncate
    BEFORE TRUNCATE ON scoring_grade
    FOR EACH STATEMENT EXECUTE FUNCTION snaglist_refuse_truncate_of_published_key();
"""

PG_REVERSE = "DROP TRIGGER IF EXISTS grade_no_truncate ON scoring_grade;\n"


class Migration(migrations.Migration):
    # questions.apps.refuse_reversing_immutability: `migrate` backwards refuses while a
    # published key edition exists (and the reverse below refuses by itself too).
    refused_backwards_while_published = True

    dependencies = [
        ("questions", "0006_truncate_refused_while_key_published"),
        ("scoring", "0005_rescore_request"),
    ]

    operations = [
        run_trigger_sql(
            pg_forward=PG_FORWARD,
            pg_reverse=PG_REVERSE,
            sqlite_forward=[],
            sqlite_reverse=[],
            reverse_refused_while_published="scoring.0006",
        )
    ]
