"""Hand-written SQL of re-scoring's hot path, per database vendor (PostgreSQL, SQLite).

The ORM spent as much CPU building these statements as the rest of a judge call's database
work (measured in bench/README.md), so the few statements a grade run repeats are written
here, built once per model and vendor: the batched INSERT (`insert_rows`), the claim of
several run items (`claim_items`) and of their pairs across runs (`lease_pairs`), the settle
UPDATEs (`settle_sql`; the ledger rows' outcomes and tokens: `settle_calls`) and the marking of
lost calls on PostgreSQL (`mark_calls_lost`). Nothing else of scoring.runs.services writes SQL.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.db.models import Model
from django.utils import timezone

from scoring.models import JudgeCall, PairLease, RunItem, ScoringRun
from scoring.runs.services.work import lease_holder


def claim_items(item_ids: Sequence[int], *, lease_seconds: float) -> dict[int, int]:
    """Lease the pending, unleased run items among `item_ids` for `lease_seconds` in one
    UPDATE ... RETURNING (their attempts go up by one, their holder is this process,
    work.lease_holder); return {item id: its claims so far
    (attempts, this one included)} of those leased. An empty list costs no query."""
    from django.db import connection

    if not item_ids:
        return {}
    now = timezone.now()
    ops = connection.ops
    table = connection.ops.quote_name(RunItem._meta.db_table)
    ids: list[Any] = list(item_ids)
    if connection.vendor == "postgresql":  # one array parameter (a chunk's ids: one claim)
        which, ids = "= ANY(%s::bigint[])", [ids]
    else:
        which = f"IN ({', '.join(['%s'] * len(ids))})"
    sql = (
        f"UPDATE {table} SET lease_until = %s, attempts = attempts + 1, holder = %s "
        f"WHERE id {which} AND state = %s AND (lease_until IS NULL OR lease_until < %s) "
        "RETURNING id, attempts"
    )
    params = [
        ops.adapt_datetimefield_value(now + timedelta(seconds=lease_seconds)),
        lease_holder(),
        *ids,
        RunItem.State.PENDING,
        ops.adapt_datetimefield_value(now),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return dict(cursor.fetchall())


def lease_pairs(
    rows: Sequence[tuple[int, int | None, int, int, str]], *, run_id: int, lease_seconds: float
) -> dict[int, int | None]:
    """Take the cross-run lease (scoring.models.PairLease) of several pairs in ONE
    INSERT ... ON CONFLICT DO UPDATE ... RETURNING; return {item id: the run the pair was
    taken over from, or None when it was free} for the pairs taken.

    rows: (item id, response id or None, judge id, key entry id, prompt version) each, all
    grade pairs (response id set) or all audit pairs (None). A pair is taken when no row
    holds it, when its row's lease has passed (a dead worker's), or when the row is this
    item's own; a pair another item holds under a live lease is left out of the result.
    The unique constraint decides between two concurrent claims: the second waits for the
    first to commit and then sees its row. Works on PostgreSQL and SQLite (>= 3.35).
    An empty list costs no query.
    """
    from django.db import connection

    if not rows:
        return {}
    grade = rows[0][1] is not None
    if any((r[1] is not None) != grade for r in rows):
        raise ValueError("lease_pairs: grade and audit pairs cannot be leased together")
    ops = connection.ops
    qn = ops.quote_name
    table = qn(PairLease._meta.db_table)
    now = timezone.now()
    until = ops.adapt_datetimefield_value(now + timedelta(seconds=lease_seconds))
    target = (
        "response_id, judge_id, key_entry_id, prompt_version) WHERE response_id IS NOT NULL"
        if grade
        else "judge_id, key_entry_id, prompt_version) WHERE response_id IS NULL"
    )
    holder = lease_holder()
    if connection.vendor == "postgresql":
        # one array per column, not 8 placeholders a pair: psycopg splits a statement's text
        # at its placeholders on every call, and a chunk's claim had 8,000 of them
        meta = PairLease._meta
        names = ("item_id", "response_id", "judge_id", "key_entry_id", "prompt_version")
        arrays = ", ".join(f"%s::{meta.get_field(n).db_type(connection)}[]" for n in names)
        source = f"SELECT *, %s::bigint, %s::timestamptz, %s, NULL::bigint FROM unnest({arrays})"
        params: list[Any] = [run_id, until, holder, *([row[i] for row in rows] for i in range(5))]
    else:
        marks = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, NULL)"] * len(rows))
        source = f"VALUES {marks}"
        params = [v for row in rows for v in (*row, run_id, until, holder)]
    sql = (
        f"INSERT INTO {table} (item_id, response_id, judge_id, key_entry_id, prompt_version, "
        f"run_id, lease_until, holder, previous_run_id) {source} "
        f"ON CONFLICT ({target} DO UPDATE SET item_id = excluded.item_id, "
        "run_id = excluded.run_id, lease_until = excluded.lease_until, holder = excluded.holder, "
        f"previous_run_id = {table}.run_id "
        f"WHERE {table}.lease_until < %s OR {table}.item_id = excluded.item_id "
        "RETURNING item_id, previous_run_id"
    )
    params.append(ops.adapt_datetimefield_value(now))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return dict(cursor.fetchall())


def _json_columns(fields: Sequence[Any], connection: Any) -> str:
    """Return the SELECT list that reads one row per element of json_array_elements(...) AS r
    (each element a JSON array of the row's values in `fields` order): element i as
    r->>i, cast to its field's type; text stays text, so the column's own assignment rules
    (a varchar's length among them) apply as for any INSERT or comparison."""
    return ", ".join(
        f"r->>{i}"
        if f.get_internal_type() in ("CharField", "TextField")
        else f"(r->>{i})::{f.cast_db_type(connection)}"
        for i, f in enumerate(fields)
    )


_INSERT_SQL: dict[tuple, tuple[str, str | None, str, bool]] = {}


def _insert_sql(
    model: type[Model],
    columns: tuple[str, ...],
    connection: Any,
    skip_conflicts: tuple[str, ...] = (),
    replace_null: str = "",
) -> tuple[str, str | None, str, bool]:
    """Return (head "INSERT INTO t (columns) ", the rows' clause on PostgreSQL or None
    elsewhere, the tail: " RETURNING id", or with skip_conflicts " ON CONFLICT (those
    columns) DO NOTHING RETURNING those columns", whether created_at is stamped) for
    insert_rows, built once per model, columns, conflict columns and database vendor
    (building them asks every field for its SQL type)."""
    key = (model, columns, skip_conflicts, replace_null, connection.vendor)
    if key not in _INSERT_SQL:
        meta = model._meta
        qn = connection.ops.quote_name
        fields = [meta.get_field(name) for name in columns]
        stamped = (
            any(f.attname == "created_at" for f in meta.concrete_fields)
            and "created_at" not in columns
        )
        targets = [qn(f.column) for f in fields] + ([qn("created_at")] if stamped else [])
        clause = None
        if connection.vendor == "postgresql":
            clause = (
                f"SELECT {_json_columns(fields, connection)}{', %s' if stamped else ''} "
                "FROM json_array_elements(%s::json) AS r"
            )
        tail = f" RETURNING {qn(meta.pk.column)}"
        if skip_conflicts:
            unique = ", ".join(qn(meta.get_field(c).column) for c in skip_conflicts)
            tail = f" ON CONFLICT ({unique}) DO NOTHING RETURNING {unique}"
            if replace_null:
                table = qn(meta.db_table)
                sets = ", ".join(
                    f"{qn(f.column)} = EXCLUDED.{qn(f.column)}"
                    for f in fields
                    if f.attname not in skip_conflicts
                )
                null_col = qn(meta.get_field(replace_null).column)
                tail = (
                    f" ON CONFLICT ({unique}) DO UPDATE SET {sets} "
                    f"WHERE {table}.{null_col} IS NULL RETURNING {unique}"
                )
        _INSERT_SQL[key] = (
            f"INSERT INTO {qn(meta.db_table)} ({', '.join(targets)}) ",
            clause,
            tail,
            stamped,
        )
    return _INSERT_SQL[key]


def insert_rows(
    model: type[Model],
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    skip_conflicts: tuple[str, ...] = (),
    replace_null: str = "",
) -> list[Any]:
    """INSERT `rows` (values in `columns` order; column names are field attnames such as
    "run_id") into `model`'s table with ONE statement; return the new ids in the rows' order.
    `created_at` (auto_now_add) is filled in with the current time.

    skip_conflicts: the columns of a unique constraint (e.g. a grade's pair). Rows that
    would break it are skipped (ON CONFLICT ... DO NOTHING: no error, no savepoint needed),
    and what is returned is the tuple of those columns' values of each row inserted
    (unordered) instead of the ids. replace_null (with skip_conflicts): a column; a
    conflicting stored row whose value there is NULL is overwritten with the new row's
    values instead of kept (ON CONFLICT ... DO UPDATE ... WHERE column IS NULL) and counts
    as inserted — an unparsed grade asked again (issue 17).

    Why not QuerySet.bulk_create: for the rows of a grade run's hot path (the "started"
    ledger rows, the grades) it spent ~0.1 ms of CPU per row on per-object field
    preparation, as much as the rest of a judge call's database work. On PostgreSQL the rows
    go as ONE parameter, a JSON array of rows (INSERT ... SELECT FROM json_array_elements),
    encoded by the json module's C encoder (DjangoJSONEncoder for dates, decimals and UUIDs):
    psycopg's client-side binding of one array per column dumped each value in Python
    (32 grades: 2.5-2.9 ms of CPU, against 1.2-1.3 ms as JSON). Elsewhere (SQLite >= 3.35)
    a multi-row VALUES list. Both end in RETURNING id; the ids are returned sorted, since one
    sequence numbers the rows in order. No signals are sent (nor does bulk_create send
    them); constraints and triggers apply as usual (IntegrityError propagates).
    """
    from django.core.serializers.json import DjangoJSONEncoder
    from django.db import connection

    if not rows:
        return []
    head, clause, returning, stamped = _insert_sql(
        model, tuple(columns), connection, skip_conflicts, replace_null
    )
    now = timezone.now()
    if clause is not None:
        params: list[Any] = ([now] if stamped else []) + [json.dumps(rows, cls=DjangoJSONEncoder)]
    else:
        stamp = [connection.ops.adapt_datetimefield_value(now)] if stamped else []
        marks = "(" + ", ".join(["%s"] * (len(columns) + len(stamp))) + ")"
        clause = "VALUES " + ", ".join([marks] * len(rows))
        params = [value for row in rows for value in (*row, *stamp)]
    with connection.cursor() as cursor:
        cursor.execute(head + clause + returning, params)
        if skip_conflicts:
            return [tuple(row) for row in cursor.fetchall()]
        return sorted(row[0] for row in cursor.fetchall())


_SETTLE_SQL: dict[str, dict[str, str]] = {}


def settle_sql(connection: Any) -> dict[str, str]:
    """Return BatchSettler.write's UPDATE statements for this database vendor, each with a
    "%s" slot for its list of ids ("items", "leases") or of counter assignments ("run"):
    - items: move pending run items to a state (lease cleared, detail set);
    - run: add to the run's counters;
    - leases: delete the cross-run pair leases of run items (PairLease)."""
    if connection.vendor not in _SETTLE_SQL:
        qn = connection.ops.quote_name
        _SETTLE_SQL[connection.vendor] = {
            "items": (
                f"UPDATE {qn(RunItem._meta.db_table)} SET {qn('state')} = %%s, "
                f"{qn('lease_until')} = NULL, {qn('detail')} = %%s "
                f"WHERE {qn('id')} IN (%s) AND {qn('state')} = %%s"
            ),
            "run": f"UPDATE {qn(ScoringRun._meta.db_table)} SET %s WHERE {qn('id')} = %%s",
            "leases": f"DELETE FROM {qn(PairLease._meta.db_table)} WHERE {qn('item_id')} IN (%s)",
        }
    return _SETTLE_SQL[connection.vendor]


_USAGE = ("input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens")


def settle_calls(rows: Sequence[tuple[int, str, str, Sequence[int | None] | None]]) -> None:
    """Settle ledger rows: set each one's outcome, detail and the tokens its call reported.

    rows: (call id, outcome, detail, usage) each; usage (input, output, cached, cache write
    tokens, None each = unknown) or None when the call reported none. A token column left
    unknown keeps what it holds (NULL: unknown). On PostgreSQL ONE UPDATE for all of them,
    matched against one array per column (UPDATE ... FROM unnest(...): the planner expects
    as many rows as there are and probes the primary key per row, where from a JSON
    parameter it expects 100 and hashes the whole ledger): settling a call is then one new
    row version, where an UPDATE of the outcome per (outcome, detail) and another of the
    tokens per batch wrote two. Elsewhere (SQLite) one UPDATE per
    (outcome, detail) and one per row with usage. An empty list costs no query.
    """
    from django.db import connection

    if not rows:
        return
    qn = connection.ops.quote_name
    table = qn(JudgeCall._meta.db_table)
    if connection.vendor == "postgresql":
        sets = ", ".join(
            [f"{qn(c)} = v.{qn(c)}" for c in ("outcome", "detail")]
            + [f"{qn(c)} = COALESCE(v.{qn(c)}, {table}.{qn(c)})" for c in _USAGE]
        )
        names = ", ".join(qn(c) for c in ("id", "outcome", "detail", *_USAGE))
        arrays = ", ".join(["%s::bigint[]", "%s::text[]", "%s::text[]"] + ["%s::integer[]"] * 4)
        usage = [tuple(u) if u is not None else (None,) * len(_USAGE) for *_, u in rows]
        params = [
            [r[0] for r in rows],
            [r[1] for r in rows],
            [r[2] for r in rows],
            *([u[i] for u in usage] for i in range(len(_USAGE))),
        ]
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET {sets} FROM unnest({arrays}) AS v({names}) "
                f"WHERE {table}.{qn('id')} = v.{qn('id')}",
                params,
            )
        return
    groups: dict[tuple[str, str], list[int]] = {}
    for pk, outcome, detail, _ in rows:
        groups.setdefault((outcome, detail), []).append(pk)
    with connection.cursor() as cursor:
        for (outcome, detail), ids in groups.items():
            cursor.execute(
                f"UPDATE {table} SET {qn('outcome')} = %s, {qn('detail')} = %s "
                f"WHERE {qn('id')} IN ({', '.join(['%s'] * len(ids))})",
                [outcome, detail, *ids],
            )
    for pk, _, _, usage in rows:
        if usage is not None:
            known = {c: v for c, v in zip(_USAGE, usage, strict=True) if v is not None}
            if known:
                JudgeCall.objects.filter(pk=pk).update(**known)


def mark_calls_lost(
    pairs: Sequence[tuple[int, int, int, str]],
    *,
    detail: str,
    other_than_run: int | None = None,
) -> int:
    """PostgreSQL only: mark the "started" and "ok" ledger rows of `pairs` lost with `detail`
    in ONE UPDATE; return how many rows were marked.

    pairs: (judge id, response id, key entry id, prompt version) each (grade pairs: no
    response is None). other_than_run: a run id whose own calls are left as they are.
    The rows are matched against one array per column (the UPDATE probes the ledger's
    call_pair_idx once per pair; the planner expects as many rows from unnest as there
    are, where it expects 100 from a JSON parameter and then hashes the whole ledger).
    """
    from django.db import connection

    meta = JudgeCall._meta
    qn = connection.ops.quote_name
    names = ("judge_id", "response_id", "key_entry_id", "prompt_version")
    fields = [meta.get_field(n) for n in names]
    arrays = ", ".join(f"%s::{f.db_type(connection)}[]" for f in fields)
    sql = (
        f"UPDATE {qn(meta.db_table)} SET {qn('outcome')} = %s, {qn('detail')} = %s "
        f"WHERE {qn('outcome')} IN (%s, %s) AND ({', '.join(qn(f.column) for f in fields)}) "
        f"IN (SELECT * FROM unnest({arrays}))"
        + (f" AND {qn('run_id')} <> %s" if other_than_run is not None else "")
    )
    params = [
        JudgeCall.Outcome.LOST,
        detail,
        JudgeCall.Outcome.STARTED,
        JudgeCall.Outcome.OK,
        [j for j, _, _, _ in pairs],
        [r for _, r, _, _ in pairs],
        [e for _, _, e, _ in pairs],
        [v for _, _, _, v in pairs],
    ]
    if other_than_run is not None:
        params.append(other_than_run)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
