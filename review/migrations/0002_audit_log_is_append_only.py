"""The audit log is append-only: triggers on PostgreSQL and SQLite refuse UPDATE and DELETE.

Same pattern as questions/migrations/0002. (PostgreSQL's TRUNCATE, used by the test
runner to empty tables, fires no row trigger.)
"""

from django.db import migrations

from questions.db_triggers import run_trigger_sql

PG_FORWARD = r"""
CREATE OR REPLACE FUNCTION snaglist_auditlog_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only: % refused', TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER auditlog_append_only
    BEFORE UPDATE OR DELETE ON review_auditlogentry
    FOR EACH ROW EXECUTE FUNCTION snaglist_auditlog_append_only();
"""

PG_REVERSE = r"""
DROP TRIGGER IF EXISTS auditlog_append_only ON review_auditlogentry;
DROP FUNCTION IF EXISTS snaglist_auditlog_append_only();
"""

SQLITE_FORWARD = [
    """CREATE TRIGGER auditlog_append_only_update BEFORE UPDATE ON review_auditlogentry
       BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;""",
    """CREATE TRIGGER auditlog_append_only_delete BEFORE DELETE ON review_auditlogentry
       BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;""",
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS auditlog_append_only_update;",
    "DROP TRIGGER IF EXISTS auditlog_append_only_delete;",
]


class Migration(migrations.Migration):
    dependencies = [("review", "0001_initial")]

    operations = [
        run_trigger_sql(
            pg_forward=PG_FORWARD,
            pg_reverse=PG_REVERSE,
            sqlite_forward=SQLITE_FORWARD,
            sqlite_reverse=SQLITE_REVERSE,
        )
    ]
