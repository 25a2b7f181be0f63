"""Deleting a whole benchmark, published key and all, in one transaction (issue 26, part 5).

The one documented path past the immutability triggers (methodology rule 7 protects a
published key from change; removing the benchmark with everything that depends on it is
not a change of its key but its end, and it is logged). `manage.py delete_benchmark` calls
it; the admin refuses to delete a benchmark with a published edition and names the command.

How: every model that depends on Benchmark through foreign keys (walked from the model
graph, so a new model is included without a list to keep) is deleted with ONE DELETE per
table, children before parents, each selecting its rows by a subquery over its parents'
rows. The immutability triggers on those tables are switched off for this transaction
only (PostgreSQL: ALTER TABLE ... DISABLE TRIGGER, which needs the tables' owner, and
whose lock keeps every other writer out until the transaction re-enables them; SQLite:
the triggers are dropped and re-created from their stored SQL). The audit log (no foreign
key) keeps its rows, and gains one entry `benchmark.delete` with the rows deleted per table.
"""

from __future__ import annotations

import functools
import graphlib
import operator
from typing import Any

from django.db import connection, models, transaction

from core.actions import Action
from core.services import audit_log
from questions.models import Benchmark


class NotTheOwner(Exception):
    """The database role may not switch the triggers off (it is not the tables' owner)."""


def dependent_models() -> list[tuple[type[models.Model], list[models.ForeignKey]]]:
    """Return [(model, its foreign keys to other models of the list)], children first.

    Benchmark comes last. Self-references (KeyEdition.parent) are left out: those rows are
    reached through another key. Raises graphlib.CycleError on a cycle between models.
    """
    from django.apps import apps

    # every model (auto-created many-to-many tables too) with a foreign key into the set
    parents: dict[type[models.Model], list[models.ForeignKey]] = {Benchmark: []}
    grew = True
    while grew:
        grew = False
        for model in apps.get_models(include_auto_created=True):
            for field in model._meta.concrete_fields:
                target = field.related_model if field.is_relation else None
                if target is None or target is model or target not in parents:
                    continue
                if model not in parents:
                    parents[model] = []
                    grew = True
                if field not in parents[model]:
                    parents[model].append(field)
    # a parent is deleted after every child: the child's subquery reads the parent's rows
    graph: dict[Any, set[Any]] = {m: set() for m in parents}
    for child, fks in parents.items():
        for fk in fks:
            graph[fk.related_model].add(child)
    order = list(graphlib.TopologicalSorter(graph).static_order())
    return [(m, parents[m]) for m in order]


def _rows(model, fks, querysets, benchmark_pk):
    if model is Benchmark:
        return Benchmark._base_manager.filter(pk=benchmark_pk)
    conditions = [
        models.Q(**{f"{fk.name}__in": querysets[fk.related_model].values("pk")}) for fk in fks
    ]
    return model._base_manager.filter(functools.reduce(operator.or_, conditions))


def _user_triggers(tables: list[str]) -> list[tuple[str, str, str]]:
    """Return [(table, trigger name, sqlite's CREATE statement or "")] on `tables`."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT c.relname, t.tgname, '' FROM pg_trigger t JOIN pg_class c"
                " ON c.oid = t.tgrelid WHERE NOT t.tgisinternal"
                " AND c.relnamespace = current_schema()::regnamespace AND c.relname = ANY(%s)"
                " AND t.tgtype & 1 = 1",  # row triggers (the TRUNCATE guards stay on)
                [tables],
            )
        else:
            marks = ", ".join(["%s"] * len(tables))
            cursor.execute(
                "SELECT tbl_name, name, sql FROM sqlite_master"
                f" WHERE type = 'trigger' AND tbl_name IN ({marks})",
                tables,
            )
        return list(cursor.fetchall())


def _check_owner(tables: list[str]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT string_agg(relname, ', ' ORDER BY relname) FROM pg_class"
            " WHERE relnamespace = current_schema()::regnamespace AND relname = ANY(%s)"
            " AND NOT pg_has_role(current_user, relowner, 'USAGE')",
            [tables],
        )
        (not_owned,) = cursor.fetchone()
    if not_owned:
        raise NotTheOwner(
            f"the database role is not the owner of {not_owned}: run delete_benchmark as the "
            "tables' owner (the role that runs migrate), not as the app's role"
        )


def delete_benchmark(benchmark: Benchmark, *, actor: Any = None) -> dict[str, int]:
    """Delete `benchmark` and every row that depends on it; return {table: rows deleted}.

    One transaction: nothing is deleted if any statement fails. Writes one audit-log
    entry (action benchmark.delete, `before` = the counts). Raises NotTheOwner on
    PostgreSQL when the connection's role does not own the tables (their triggers cannot be
    switched off by any other role). Queries: about 3 per table plus 2 per trigger.
    """
    plan = dependent_models()
    tables = [m._meta.db_table for m, _ in plan]
    with transaction.atomic():
        if connection.vendor == "postgresql":
            _check_owner(tables)
            # Checked per statement (children go first, so each holds): a deferred check
            # left pending would make ALTER TABLE ... ENABLE TRIGGER fail at the end.
            with connection.cursor() as cursor:
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        triggers = _user_triggers(tables)
        qn = connection.ops.quote_name
        with connection.cursor() as cursor:
            for table, name, _ in triggers:
                if connection.vendor == "postgresql":
                    cursor.execute(f"ALTER TABLE {qn(table)} DISABLE TRIGGER {qn(name)}")
                else:
                    cursor.execute(f"DROP TRIGGER {qn(name)}")
        querysets: dict[Any, Any] = {}
        for model, fks in reversed(plan):  # parents first, to build the subqueries
            querysets[model] = _rows(model, fks, querysets, benchmark.pk)
        counts: dict[str, int] = {}
        for model, _ in plan:
            deleted = querysets[model]._raw_delete(connection.alias)
            if deleted:
                counts[model._meta.db_table] = deleted
        with connection.cursor() as cursor:
            for table, name, create in triggers:
                if connection.vendor == "postgresql":
                    cursor.execute(f"ALTER TABLE {qn(table)} ENABLE TRIGGER {qn(name)}")
                else:
                    cursor.execute(create)
        audit_log(
            actor=actor,
            action=Action.BENCHMARK_DELETE,
            target_type="benchmark",
            target_id=benchmark.pk,
            target_label=benchmark.name,
            benchmark_name=benchmark.name,
            before=counts,
        )
    return counts
