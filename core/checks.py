"""System checks and a start-up warning about the PostgreSQL role the app connects as.

The triggers that keep the published key immutable (questions/0002, 0004, 0006 and
scoring/0006) and the audit log append-only (review/0002) bind every role except the
tables' owner and a superuser: the owner may ALTER TABLE ... DISABLE TRIGGER, DROP TRIGGER,
ALTER COLUMN ... TYPE and TRUNCATE; a superuser may do all that and also SET
session_replication_role = replica. So the app must connect as a role that owns nothing and
holds only SELECT, INSERT, UPDATE and DELETE (docs/admin.md); migrations run as the owner.
"""

from __future__ import annotations

import logging

from django.core import checks
from django.db import DatabaseError, connections

logger = logging.getLogger(__name__)

# The tables whose rows the triggers protect (table names, not models: core sits below the
# apps that own them and imports none of them).
PROTECTED_TABLES = (
    "questions_keyedition",
    "questions_keyentry",
    "questions_question",
    "scoring_grade",
    "review_auditlogentry",
)

_ROLE_SQL = """
SELECT current_user, r.rolsuper
FROM pg_roles r WHERE r.rolname = current_user
"""
# For each protected table: its owner, whether the current role is (or inherits) the
# owner, and whether it holds TRUNCATE or TRIGGER, which the app never needs.
_TABLES_SQL = """
SELECT c.relname, pg_get_userbyid(c.relowner),
       pg_has_role(current_user, c.relowner, 'USAGE'),
       has_table_privilege(current_user, c.oid, 'TRUNCATE'),
       has_table_privilege(current_user, c.oid, 'TRIGGER')
FROM pg_class c
WHERE c.relname = ANY(%s) AND c.relkind = 'r' AND pg_table_is_visible(c.oid)
ORDER BY c.relname
"""

HINT = (
    "Connect the web process and workers as a role that owns no table and holds only "
    "SELECT, INSERT, UPDATE and DELETE; run migrations as the owner (docs/admin.md, "
    "'The database role')."
)


def database_role_warnings(alias: str = "default") -> list[checks.CheckMessage]:
    """Return warnings if the connection `alias` could undo the database's immutability rules.

    snaglist.W001: the role is a PostgreSQL superuser (may also SET session_replication_role
    = replica, which silences every trigger). snaglist.W002: the role owns, or is a member
    of the owner of, a protected table (may DISABLE/DROP the triggers, ALTER the columns,
    TRUNCATE). snaglist.W003: the role holds TRUNCATE or TRIGGER on a protected table.
    snaglist.W004: the role could not be read (the database is unreachable). An empty list
    on SQLite (no roles; its file's owner can do anything anyway) and for a role that owns
    nothing and holds neither privilege.
    """
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return []
    try:
        with connection.cursor() as cursor:
            cursor.execute(_ROLE_SQL)
            user, superuser = cursor.fetchone()
            cursor.execute(_TABLES_SQL, [list(PROTECTED_TABLES)])
            tables = cursor.fetchall()
    except DatabaseError as exc:
        return [
            checks.Warning(
                f"Could not read the database role of connection '{alias}': {exc}",
                hint=HINT,
                id="snaglist.W004",
            )
        ]
    found: list[checks.CheckMessage] = []
    if superuser:
        found.append(
            checks.Warning(
                f"The app connects to PostgreSQL as '{user}', a superuser: it can silence the "
                "triggers that keep the published key immutable and the audit log append-only.",
                hint=HINT,
                id="snaglist.W001",
            )
        )
        return found  # a superuser passes every ownership and privilege test below
    owned = [f"{name} (owner {owner})" for name, owner, member, _, _ in tables if member]
    if owned:
        found.append(
            checks.Warning(
                f"The app connects to PostgreSQL as '{user}', which owns "
                f"{', '.join(owned)}: it can disable, drop or bypass their triggers.",
                hint=HINT,
                id="snaglist.W002",
            )
        )
    granted = [name for name, _, member, trunc, trig in tables if not member and (trunc or trig)]
    if granted:
        found.append(
            checks.Warning(
                f"The app's role '{user}' holds TRUNCATE or TRIGGER on {', '.join(granted)}.",
                hint=HINT,
                id="snaglist.W003",
            )
        )
    return found


@checks.register(checks.Tags.security, deploy=True)
def check_database_role(app_configs=None, databases=None, **kwargs) -> list[checks.CheckMessage]:
    """`manage.py check --deploy`: warn when the app's database role can undo rule 7."""
    return database_role_warnings()


def log_database_role_warnings(process: str) -> int:
    """Log each database_role_warnings() message at WARNING level; return how many.

    Called at start-up by config/wsgi.py (process "web") and the Celery worker
    (process "worker"), which run no system checks of their own. Closes the connection
    afterwards: both callers may fork, and a forked child must not share its socket.
    """
    try:
        found = database_role_warnings()
    finally:
        connections["default"].close()
    for message in found:
        logger.warning("%s start-up: %s: %s %s", process, message.id, message.msg, message.hint)
    return len(found)
