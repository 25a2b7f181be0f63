"""Rule 7: "the original question set ... kept unaltered": a question answered by a published
key entry keeps its id, wording, category and benchmark, and cannot be deleted.

Its scoring status (exclusion by audit) may still change: that is not the question set.
"""

from django.db import migrations

from questions.db_triggers import run_trigger_sql

_PUBLISHED_ENTRY = (
    "EXISTS (SELECT 1 FROM questions_keyentry e JOIN questions_keyedition k ON k.id = e.edition_id "
    "WHERE e.question_id = {ref}.id AND k.status = 'published')"
)

PG_FORWARD = f"""
CREATE OR REPLACE FUNCTION snaglist_protect_published_question() RETURNS trigger AS $$
BEGIN
    IF {_PUBLISHED_ENTRY.format(ref="OLD")} THEN
        IF TG_OP = 'DELETE' THEN
            RAISE EXCEPTION 'question %% is answered by a published key edition and cannot be deleted', OLD.question_id
                USING ERRCODE = 'restrict_violation';
        END IF;
        IF NEW.text IS DISTINCT FROM OLD.text
           OR NEW.question_id IS DISTINCT FROM OLD.question_id
           OR NEW.benchmark_id IS DISTINCT FROM OLD.benchmark_id
           OR NEW.category_id IS DISTINCT FROM OLD.category_id THEN
            RAISE EXCEPTION 'question %% is answered by a published key edition: its wording is immutable', OLD.question_id
                USING ERRCODE = 'restrict_violation';
        END IF;
    END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER question_wording_immutable
    BEFORE UPDATE OR DELETE ON questions_question
    FOR EACH ROW EXECUTE FUNCTION snaglist_protect_published_question();
""".replace("%%", "%")

PG_REVERSE = """
DROP TRIGGER IF EXISTS question_wording_immutable ON questions_question;
DROP FUNCTION IF EXISTS snaglist_protect_published_question();
"""

SQLITE_FORWARD = [
    f"""CREATE TRIGGER question_wording_immutable_update BEFORE UPDATE ON questions_question
       WHEN {_PUBLISHED_ENTRY.format(ref="OLD")} AND (
            NEW.text IS NOT OLD.text OR NEW.question_id IS NOT OLD.question_id
            OR NEW.benchmark_id IS NOT OLD.benchmark_id OR NEW.category_id IS NOT OLD.category_id)
       BEGIN SELECT RAISE(ABORT, 'question is answered by a published key edition: its wording is immutable'); END;""",
    f"""CREATE TRIGGER question_wording_immutable_delete BEFORE DELETE ON questions_question
       WHEN {_PUBLISHED_ENTRY.format(ref="OLD")}
       BEGIN SELECT RAISE(ABORT, 'question is answered by a published key edition and cannot be deleted'); END;""",
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS question_wording_immutable_update;",
    "DROP TRIGGER IF EXISTS question_wording_immutable_delete;",
]


class Migration(migrations.Migration):
    # questions.apps.refuse_reversing_immutability: `migrate` backwards refuses while a
    # published key edition exists (and the reverse below refuses by itself too).
    refused_backwards_while_published = True

    dependencies = [("questions", "0003_roles")]

    operations = [
        run_trigger_sql(
            pg_forward=PG_FORWARD,
            pg_reverse=PG_REVERSE,
            sqlite_forward=SQLITE_FORWARD,
            sqlite_reverse=SQLITE_REVERSE,
            reverse_refused_while_published="questions.0004",
        )
    ]
