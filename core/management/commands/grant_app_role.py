"""Give the app's PostgreSQL role the privileges it needs and nothing more (run as the owner)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction

GRANTS = (
    "GRANT USAGE ON SCHEMA {schema} TO {role}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}",
    "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
    # Nothing else: no TRUNCATE, TRIGGER or REFERENCES, and (being no owner) no ALTER/DROP.
    "REVOKE TRUNCATE, TRIGGER, REFERENCES ON ALL TABLES IN SCHEMA {schema} FROM {role}",
    # No temporary tables (issue 26): PUBLIC holds TEMP on every database by default, so it
    # is revoked from PUBLIC as well as from the role (a REVOKE from the role alone leaves
    # what PUBLIC grants). The trigger functions cannot be fooled by one anyway
    # (questions/trigger_functions.py); this closes the path for any other SQL.
    "REVOKE TEMPORARY ON DATABASE {database} FROM PUBLIC",
    "REVOKE TEMPORARY ON DATABASE {database} FROM {role}",
)


class Command(BaseCommand):
    help = (
        "Grant ROLE SELECT, INSERT, UPDATE and DELETE on every table (and use of the id "
        "sequences) in the current schema, and nothing else (TEMPORARY on the database is "
        "revoked, from PUBLIC too). Run it as the tables' owner "
        "after every migrate. Refuses a role that is a superuser or owns a table, since such a "
        "role could disable the triggers that keep the published key immutable."
    )

    def add_arguments(self, parser):
        parser.add_argument("role", help="the PostgreSQL role the web process and workers use")

    def handle(self, *args, role: str, **options):
        if connection.vendor != "postgresql":
            raise CommandError("grant_app_role: only PostgreSQL has roles to grant to")
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT rolsuper, pg_has_role(%s, current_user, 'USAGE'), current_schema(),"
                " current_database()"
                " FROM pg_roles WHERE rolname = %s",
                [role, role],
            )
            row = cursor.fetchone()
            if row is None:
                raise CommandError(f"grant_app_role: role '{role}': no such PostgreSQL role")
            superuser, owner_member, schema, database = row
            if superuser:
                raise CommandError(f"grant_app_role: role '{role}': is a superuser")
            if owner_member:
                raise CommandError(
                    f"grant_app_role: role '{role}': is, or is a member of, the role "
                    "running this command (the owner)"
                )
            cursor.execute(
                "SELECT string_agg(c.relname, ', ' ORDER BY c.relname) FROM pg_class c"
                " WHERE c.relnamespace = current_schema()::regnamespace"
                " AND c.relkind IN ('r', 'p') AND pg_has_role(%s, c.relowner, 'USAGE')",
                [role],
            )
            (owned,) = cursor.fetchone()
            if owned:
                raise CommandError(f"grant_app_role: role '{role}': owns {owned}")
            quoted_role = connection.ops.quote_name(role)
            quoted_schema = connection.ops.quote_name(schema)
            quoted_database = connection.ops.quote_name(database)
            for statement in GRANTS:
                cursor.execute(
                    statement.format(
                        schema=quoted_schema, role=quoted_role, database=quoted_database
                    )
                )
        self.stdout.write(
            f"granted {role} SELECT, INSERT, UPDATE, DELETE on the tables of schema {schema};"
            f" revoked TEMPORARY on database {database}"
        )
