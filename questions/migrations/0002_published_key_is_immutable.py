"""Rule 7: no row of a published key edition is ever updated or deleted.

Triggers on PostgreSQL and SQLite abort UPDATE/DELETE of a published KeyEdition, and
INSERT/UPDATE/DELETE of a KeyEntry whose edition is published. Publishing itself (draft ->
published) is an update of a draft row and is allowed. The error is an integrity error
(SQLSTATE 23001 restrict_violation on PostgreSQL; SQLITE_CONSTRAINT on SQLite).
"""

from django.db import migrations

from questions.db_triggers import run_trigger_sql

PG_FORWARD = r"""
CREATE OR REPLACE FUNCTION snaglist_protect_published_edition() RETURNS trigger AS $$
BEGIN
    IF OLD.status = 'published' THEN
        RAISE EXCEPTION 'key edition "%" is published and immutable', OLD.name
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER keyedition_immutable
    BEFORE UPDATE OR DELETE ON questions_keyedition
    FOR EACH ROW EXECUTE FUNCTION snaglist_protect_published_edition();

CREATE OR REPLACE FUNCTION snaglist_protect_published_entry() RETURNS trigger AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND EXISTS (
        SELECT 1 FROM questions_keyedition WHERE id = OLD.edition_id AND status = 'published'
    ) THEN
        RAISE EXCEPTION 'key entry % belongs to a published key edition and is immutable', OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND EXISTS (
        SELECT 1 FROM questions_keyedition WHERE id = NEW.edition_id AND status = 'published'
    ) THEN
        RAISE EXCEPTION 'key edition % is published: no entry may be added to it', NEW.edition_id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER keyentry_immutable
    BEFORE INSERT OR UPDATE OR DELETE ON questions_keyentry
    FOR EACH ROW EXECUTE FUNCTION snaglist_protect_published_entry();
"""

PG_REVERSE = r"""
DROP TRIGGER IF EXISTS keyentry_immutable ON questions_keyentry;
DROP FUNCTION IF EXISTS snaglist_protect_published_entry();
DROP TRIGGER IF EXISTS keyedition_immutable ON questions_keyedition;
DROP FUNCTION IF EXISTS snaglist_protect_published_edition();
"""

_PUBLISHED = "(SELECT status FROM questions_keyedition WHERE id = {ref}.edition_id) = 'published'"

SQLITE_FORWARD = [
    """CREATE TRIGGER keyedition_immutable_update BEFORE UPDATE ON questions_keyedition
       WHEN OLD.status = 'published'
       BEGIN SELECT RAISE(ABORT, 'key edition is published and immutable'); END;""",
    """CREATE TRIGGER keyedition_immutable_delete BEFORE DELETE ON questions_keyedition
       WHEN OLD.status = 'published'
       BEGIN SELECT RAISE(ABORT, 'key edition is published and immutable'); END;""",
    f"""CREATE TRIGGER keyentry_immutable_update BEFORE UPDATE ON questions_keyentry
       WHEN {_PUBLISHED.format(ref="OLD")} OR {_PUBLISHED.format(ref="NEW")}
       BEGIN SELECT RAISE(ABORT, 'key entry belongs to a published key edition and is immutable'); END;""",
    f"""CREATE TRIGGER keyentry_immutable_delete BEFORE DELETE ON questions_keyentry
       WHEN {_PUBLISHED.format(ref="OLD")}
       BEGIN SELECT RAISE(ABORT, 'key entry belongs to a published key edition and is immutable'); END;""",
    f"""CREATE TRIGGER keyentry_immutable_insert BEFORE INSERT ON questions_keyentry
       WHEN {_PUBLISHED.format(ref="NEW")}
       BEGIN SELECT RAISE(ABORT, 'key edition is published: no entry may be added to it'); END;""",
]
SQLITE_REVERSE = [
    f"DROP TRIGGER IF EXISTS {name};"
    for name in (
        "keyedition_immutable_update",
        "keyedition_immutable_delete",
        "keyentry_immutable_update",
        "keyentry_immutable_delete",
        "keyentry_immutable_insert",
    )
]


class Migration(migrations.Migration):
    # questions.apps.refuse_reversing_immutability: `migrate` backwards refuses while a
    # published key edition exists (and the reverse below refuses by itself too).
    refused_backwards_while_published = True

    dependencies = [("questions", "0001_initial")]

    operations = [
        run_trigger_sql(
            pg_forward=PG_FORWARD,
            pg_reverse=PG_REVERSE,
            sqlite_forward=SQLITE_FORWARD,
            sqlite_reverse=SQLITE_REVERSE,
            reverse_refused_while_published="questions.0002",
        )
    ]
