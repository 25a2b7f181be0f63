"""The PostgreSQL trigger functions that keep the key immutable and the audit log append-only
(methodology rule 7): the one place their SQL lives since scoring/0016 (issue 26, part 2).

Each function names every table with its schema and is defined with a fixed search_path
(`pg_catalog, <schema>, pg_temp`: pg_temp is listed, and last, so that a temporary table the
session made cannot stand in for a real one; unlisted, pg_temp is searched *first* for
tables). Before 0016 the functions named tables bare, and a `CREATE TEMP TABLE
questions_keyedition (...)` in the app's session made the entry trigger read an empty
table and let an UPDATE of a published entry through.

`function_sql(schema)` returns the CREATE OR REPLACE FUNCTION statements; `TRIGGERS_SQL`
the triggers scoring/0016 adds (grades and the audit log's TRUNCATE). Migrations 0002, 0004,
0006 of questions and review/0002 keep the first, unqualified, versions as history.

The grade rule (`snaglist_protect_grade`): a role that does not own `scoring_grade` (the
app's role) may UPDATE a grade only when (1) the stored grade is null (an unparsed reply),
(2) the pair (response, judge, key entry, prompt version) is unchanged, and (3) the
transaction set the marker `snaglist.reask_unparsed` to `on` (SET LOCAL, through
`REASK_MARKER_SQL`, which scoring.runs.services.batching runs before it writes a batch). The
marker is a constant in code, never a value read from a bundle or a reply; it guards against
an accidental ORM update, while (1) and (2) are what bind a role that could run any SQL.
Each such update writes an audit-log entry (action `grade.reask`) from the trigger itself,
so no path changes a grade without one (whoever runs it). Every other UPDATE and every
DELETE by such a role is refused. The table's owner and superusers pass (test fixtures;
`delete_benchmark` switches the trigger off anyway): they could DISABLE it in any case
(docs/admin.md, "The database role").
"""

from __future__ import annotations

# The marker the re-ask of an unparsed reply sets inside its transaction (SET LOCAL).
REASK_MARKER = "snaglist.reask_unparsed"
REASK_MARKER_SQL = f"SELECT set_config('{REASK_MARKER}', 'on', true)"

# Every table a trigger function reads, for the shadowing test (tests/test_trigger_shadowing.py).
TABLES_READ = {
    "snaglist_protect_published_entry": ("questions_keyedition",),
    "snaglist_protect_published_question": ("questions_keyentry", "questions_keyedition"),
    "snaglist_refuse_truncate_of_published_key": ("questions_keyedition",),
    "snaglist_protect_grade": ("scoring_judge", "questions_benchmark"),
}


def _create_function(schema: str, name: str, body: str) -> str:
    """Return one CREATE OR REPLACE FUNCTION statement: a plpgsql trigger function `name`
    in `schema` with the fixed search_path (module docstring) and `body` (BEGIN ... END;)."""
    fixed = f"SET search_path = pg_catalog, {schema}, pg_temp"
    return (
        f"CREATE OR REPLACE FUNCTION {schema}.{name}() RETURNS trigger\n"
        f"LANGUAGE plpgsql {fixed} AS $$\n{body}$$;\n"
    )


def _key_bodies(s: str) -> dict[str, str]:
    """The published key's functions (rule 7): editions, entries, questions, TRUNCATE."""
    return {
        "snaglist_protect_published_edition": """\
BEGIN
    IF OLD.status = 'published' THEN
        RAISE EXCEPTION 'key edition "%" is published and immutable', OLD.name
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
END;
""",
        "snaglist_protect_published_entry": f"""\
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND EXISTS (
        SELECT 1 FROM {s}.questions_keyedition WHERE id = OLD.edition_id AND status = 'published'
    ) THEN
        RAISE EXCEPTION 'key entry % belongs to a published key edition and is immutable', OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND EXISTS (
        SELECT 1 FROM {s}.questions_keyedition WHERE id = NEW.edition_id AND status = 'published'
    ) THEN
        RAISE EXCEPTION 'key edition % is published: no entry may be added to it', NEW.edition_id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
END;
""",
        "snaglist_protect_published_question": f"""\
BEGIN
    IF EXISTS (
        SELECT 1 FROM {s}.questions_keyentry e
        JOIN {s}.questions_keyedition k ON k.id = e.edition_id
        WHERE e.question_id = OLD.id AND k.status = 'published'
    ) THEN
        IF TG_OP = 'DELETE' THEN
            RAISE EXCEPTION 'question % is answered by a published key edition and cannot be deleted', OLD.question_id
                USING ERRCODE = 'restrict_violation';
        END IF;
        IF NEW.text IS DISTINCT FROM OLD.text
           OR NEW.question_id IS DISTINCT FROM OLD.question_id
           OR NEW.benchmark_id IS DISTINCT FROM OLD.benchmark_id
           OR NEW.category_id IS DISTINCT FROM OLD.category_id THEN
            RAISE EXCEPTION 'question % is answered by a published key edition: its wording is immutable', OLD.question_id
                USING ERRCODE = 'restrict_violation';
        END IF;
    END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
END;
""",
        "snaglist_refuse_truncate_of_published_key": f"""\
BEGIN
    IF EXISTS (SELECT 1 FROM {s}.questions_keyedition WHERE status = 'published') THEN
        RAISE EXCEPTION 'TRUNCATE of % refused: a published key edition exists and is immutable', TG_TABLE_NAME
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NULL;
END;
""",
    }


def _grade_bodies(s: str) -> dict[str, str]:
    """The grade rule (module docstring): an unparsed grade re-asked under the marker, else refused."""
    return {
        "snaglist_protect_grade": f"""\
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.grade IS NULL
       AND NEW.response_id = OLD.response_id AND NEW.judge_id = OLD.judge_id
       AND NEW.key_entry_id = OLD.key_entry_id AND NEW.prompt_version = OLD.prompt_version
       AND pg_catalog.current_setting('{REASK_MARKER}', true) = 'on' THEN
        INSERT INTO {s}.review_auditlogentry
            (actor_id, actor_label, action, target_type, target_id, target_label,
             benchmark_name, before, after, created_at)
        SELECT NULL, 'system', 'grade.reask', 'grade', OLD.id::text,
               'response ' || OLD.response_id || ', judge ' || j.judge_id,
               b.name,
               pg_catalog.jsonb_build_object('grade', NULL, 'run', OLD.run_id),
               pg_catalog.jsonb_build_object('grade', NEW.grade, 'run', NEW.run_id),
               pg_catalog.now()
        FROM {s}.scoring_judge j JOIN {s}.questions_benchmark b ON b.id = j.benchmark_id
        WHERE j.id = OLD.judge_id;
        RETURN NEW;
    END IF;
    IF pg_catalog.pg_has_role(current_user, (
        SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID
    ), 'USAGE') THEN
        -- the owner or a superuser: it could disable this trigger anyway
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'grade % is settled: % refused (only an unparsed grade is replaced, by asking its judge again)', OLD.id, TG_OP
        USING ERRCODE = 'restrict_violation';
END;
""",
    }


def _audit_log_bodies(s: str) -> dict[str, str]:
    """The audit log's functions: append-only rows, no TRUNCATE."""
    return {
        "snaglist_auditlog_append_only": """\
BEGIN
    RAISE EXCEPTION 'the audit log is append-only: % refused', TG_OP
        USING ERRCODE = 'restrict_violation';
END;
""",
        "snaglist_refuse_truncate": """\
BEGIN
    RAISE EXCEPTION 'TRUNCATE of % refused: the audit log is append-only', TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation';
END;
""",
    }


def function_sql(schema: str) -> str:
    """Return the CREATE OR REPLACE FUNCTION statements, tables qualified with `schema`.

    `schema` is an identifier already quoted for SQL (connection.ops.quote_name of the
    migration connection's current_schema(), "public" by default).
    """
    bodies = {**_key_bodies(schema), **_grade_bodies(schema), **_audit_log_bodies(schema)}
    order = (
        "snaglist_protect_published_edition",
        "snaglist_protect_published_entry",
        "snaglist_protect_published_question",
        "snaglist_refuse_truncate_of_published_key",
        "snaglist_auditlog_append_only",
        "snaglist_protect_grade",
        "snaglist_refuse_truncate",
    )
    return "\n" + "\n".join(_create_function(schema, name, bodies[name]) for name in order)


def triggers_sql(schema: str) -> str:
    """Return the CREATE TRIGGER statements scoring/0016 adds (grades; audit-log TRUNCATE)."""
    s = schema
    return f"""
CREATE TRIGGER grade_settled
    BEFORE UPDATE OR DELETE ON {s}.scoring_grade
    FOR EACH ROW EXECUTE FUNCTION {s}.snaglist_protect_grade();

CREATE TRIGGER auditlog_no_truncate
    BEFORE TRUNCATE ON {s}.review_auditlogentry
    FOR EACH STATEMENT EXECUTE FUNCTION {s}.snaglist_refuse_truncate();
"""


def drop_triggers_sql(schema: str) -> str:
    """Return the reverse of triggers_sql (the hardened functions above are kept)."""
    s = schema
    return f"""
DROP TRIGGER IF EXISTS grade_settled ON {s}.scoring_grade;
DROP TRIGGER IF EXISTS auditlog_no_truncate ON {s}.review_auditlogentry;
DROP FUNCTION IF EXISTS {s}.snaglist_protect_grade();
DROP FUNCTION IF EXISTS {s}.snaglist_refuse_truncate();
"""
