"""The shared part of the bundle import's steps: batched inserts and the comparison of a
re-imported row with the stored one (bundle-format.md: a stored row is never changed).

Inserts (`ImportBase._bulk`): on PostgreSQL every table is written with psycopg 3's
`COPY ... FROM STDIN` inside the import's one transaction, its primary keys first taken
from the table's own sequence so that the steps that follow (grades need the responses'
pks) have them; elsewhere (SQLite) with Django's `bulk_create` in batches. COPY fires the
row triggers as INSERT does (the draft-edition check on key entries), and like
`bulk_create` it sends no model signals. Table and column names come from the model's
`_meta` only, quoted with `psycopg.sql.Identifier`."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connections, models, router
from django.db.models import NOT_PROVIDED
from psycopg import sql

from interchange.bundles.data import BundleData
from interchange.bundles.problems import Problems
from questions.cli import progress

BATCH = 2000  # rows per bulk_create
KEY_FIELDS = (
    "answer",
    "citation",
    "citation.doc_id",
    "citation.locator",
    "citation.quote",
    "action",
    "reason",
    "note",
)
# The id column of each file whose rows `_sync` matches by id (see rows.IdSpace).
ID_FIELDS = {
    "categories.csv": "category_id",
    "documents.csv": "doc_id",
    "questions.jsonl": "question_id",
    "models.csv": "model_id",
    "judges.csv": "judge_id",
}
REVIEW_HINT = (
    "the original key is immutable: corrections go through review "
    "(review queue, editor approval, new key edition), not re-import"
)


def short(value: Any) -> str:
    """Return repr(value), cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def differing(old: Any, new: Any) -> tuple[str, str]:
    """Return short forms of two differing values that show where they differ.

    Long strings that share a beginning are cut around their first differing character
    (with its position), so the two forms never look the same.
    """
    if not (isinstance(old, str) and isinstance(new, str)):
        return short(old), short(new)
    if len(repr(old)) <= 60 and len(repr(new)) <= 60:
        return repr(old), repr(new)
    i = len(os.path.commonprefix([old, new]))
    start = max(0, i - 20)

    def cut(s: str) -> str:
        part = s[start : i + 30]
        return ("..." if start else "") + repr(part) + ("..." if i + 30 < len(s) else "")

    return f"{cut(old)} (from character {i + 1})", cut(new)


def copyable(model: type[models.Model], connection: Any) -> bool:
    """True when `_copy` can write `model` on `connection`: PostgreSQL, an auto-increment
    pk, and no field whose value the database computes (db_default, generated)."""
    meta = model._meta
    return (
        connection.vendor == "postgresql"
        and isinstance(meta.pk, models.AutoField | models.BigAutoField | models.SmallAutoField)
        and all(
            f.db_default is NOT_PROVIDED and not getattr(f, "generated", False)
            for f in meta.concrete_fields
        )
    )


# Fields whose get_db_prep_save returns a value of this exact type unchanged (their
# get_prep_value only coerces to it); a FK counts as its target field.
PLAIN = (
    (models.BooleanField, bool),
    (models.IntegerField, int),
    (models.CharField, str),
    (models.TextField, str),
)


def _prepared(field: models.Field, connection: Any, get: Any = getattr) -> Any:
    """Return a function obj -> the value `bulk_create` would write for `field`.

    That is `field.get_db_prep_save(field.pre_save(obj, add=True), connection)`; for a
    field with Django's plain `pre_save` and a value already of its PLAIN type (or None)
    the value itself, without the calls (they are most of the COPY's Python time). `get`
    reads the field's value from `obj`: `getattr` for model instances, `_item` for rows
    given as dicts keyed by attname (whose fields must have Django's plain `pre_save`).
    """
    target = field.target_field if field.is_relation else field
    plain = next((t for cls, t in PLAIN if isinstance(target, cls)), None)
    if type(field).pre_save is not models.Field.pre_save:
        if get is not getattr:
            raise ValueError(f"{field}: a row cannot give a field with its own pre_save")
        return lambda obj: field.get_db_prep_save(field.pre_save(obj, True), connection)
    attname = field.attname
    if plain is None:
        return lambda obj: field.get_db_prep_save(get(obj, attname), connection)

    def value(obj: Any) -> Any:
        v = get(obj, attname)
        return v if v is None or type(v) is plain else field.get_db_prep_save(v, connection)

    return value


def _item(row: dict[str, Any], attname: str) -> Any:
    """row[attname]: `_prepared`'s reader for rows given as dicts."""
    return row[attname]


def _take_pks(cursor: Any, raw: Any, meta: Any, n: int) -> list[int]:
    """Take `n` primary keys from the sequence of `meta`'s table (one `nextval` per row,
    in one query), so the sequence stays ahead of every row written with them."""
    cursor.execute(
        "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
        [sql.Identifier(meta.db_table).as_string(raw), meta.pk.column, n],
    )
    return [row[0] for row in cursor.fetchall()]


def _copy_statement(meta: Any, fields: Sequence[models.Field]) -> sql.Composed:
    """COPY <table> (<columns>) FROM STDIN, names from `_meta` quoted as identifiers."""
    return sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(meta.db_table),
        sql.SQL(", ").join(sql.Identifier(f.column) for f in fields),
    )


def _raw(connection: Any) -> Any:
    """The connection's psycopg connection, connecting first if need be."""
    if connection.connection is None:
        connection.ensure_connection()
    return connection.connection


def _copy(
    model: type[models.Model],
    objs: Sequence[models.Model],
    chunks: Iterable[Sequence[models.Model]],
    connection: Any,
) -> list[models.Model]:
    """Write `objs` (given again as `chunks`, for progress) to `model`'s table with one COPY.

    The pks are taken first from the table's sequence (`_take_pks`), set on the objects
    and written with them. Values pass through each field's `pre_save(add=True)` and
    `get_db_prep_save` as `bulk_create` does (auto_now_add, JSON, choices; `_prepared`).
    """
    meta = model._meta
    fields = list(meta.concrete_fields)
    raw = _raw(connection)
    with connection.cursor() as cursor:
        for obj, pk in zip(objs, _take_pks(cursor, raw, meta, len(objs)), strict=True):
            obj.pk = pk
        # The raw psycopg cursor's errors are turned into Django's, as the ORM's are.
        values = [_prepared(f, connection) for f in fields]
        with (
            connection.wrap_database_errors,
            cursor.cursor.copy(_copy_statement(meta, fields)) as copy,
        ):
            for chunk in chunks:
                for obj in chunk:
                    copy.write_row([value(obj) for value in values])
    for obj in objs:
        obj._state.adding = False
        obj._state.db = connection.alias
    return list(objs)


def _copy_rows(
    model: type[models.Model],
    rows: Sequence[dict[str, Any]],
    chunks: Iterable[Sequence[dict[str, Any]]],
    connection: Any,
) -> list[int]:
    """Write `rows` (dicts of attname -> value, all with the same keys; given again as
    `chunks`) to `model`'s table with one COPY, building no model instance; return the
    pks, in order (each row also gets its pk under the pk's attname, as `_copy` sets it
    on its objects).

    A field a row gives is written as `_prepared` would write it from an instance; a field
    it does not give takes the value an unsaved instance's `pre_save(add=True)` or default
    gives, computed once for the whole COPY (an auto_now_add field: one instant for all
    the rows). Raises ValueError when a row names no field of `model`, when the rows' keys
    differ, or when they give a field with its own `pre_save`.
    """
    meta = model._meta
    fields = list(meta.concrete_fields)
    given = set(rows[0]) if rows else set()
    unknown = given - {f.attname for f in fields}
    if unknown or any(row.keys() != given for row in rows):
        raise ValueError(
            f"{meta.label}: the rows name no field {sorted(unknown)}"
            if unknown
            else f"{meta.label}: the rows do not all give the same fields"
        )
    blank = model()
    raw = _raw(connection)
    with connection.cursor() as cursor:
        pks = _take_pks(cursor, raw, meta, len(rows))
        for row, pk in zip(rows, pks, strict=True):
            row[meta.pk.attname] = pk
        values = []
        for f in fields:
            if f is meta.pk or f.attname in given:
                values.append(_prepared(f, connection, _item))
            else:
                constant = f.get_db_prep_save(f.pre_save(blank, True), connection)
                values.append(lambda row, constant=constant: constant)
        with (
            connection.wrap_database_errors,
            cursor.cursor.copy(_copy_statement(meta, fields)) as copy,
        ):
            for chunk in chunks:
                for row in chunk:
                    copy.write_row([value(row) for value in values])
    return pks


class ImportBase:
    """One bundle import in progress: the validated data `d`, the problems `p` found while
    writing, the counts `created` and the `warnings`; the helpers every step uses."""

    def __init__(self, data: BundleData, problems: Problems, show: bool, user: Any) -> None:
        self.d, self.p, self.show, self.user = data, problems, show, user
        self.created: dict[str, int] = dict.fromkeys(
            ("benchmarks", *data.counts().keys(), "exclusions", "users"), 0
        )
        self.warnings = list(data.warnings)

    # --- helpers -------------------------------------------------------------------
    def _chunks(self, items: Sequence[Any], label: str, batch: int) -> Iterable[Sequence[Any]]:
        """`items` in chunks of `batch`, with a progress bar "writing <label>" when
        `self.show` and there are more than 5,000 (`_bulk`, `_bulk_rows`)."""
        chunks = [items[i : i + batch] for i in range(0, len(items), batch)]
        return progress(
            chunks,
            enabled=self.show and len(items) > 5000,
            total=len(chunks),
            desc=f"writing {label}",
        )

    def _bulk(
        self,
        model: type[models.Model],
        objs: Sequence[models.Model],
        label: str,
        batch: int = BATCH,
    ) -> list[models.Model]:
        """Insert `objs` (unsaved instances of `model`) and return them with their pks set.

        Counts them under `self.created[label]`; shows progress by chunks of `batch` rows
        when `self.show` and there are more than 5,000. PostgreSQL: one COPY (`_copy`);
        otherwise `bulk_create` per chunk. Database errors (a constraint, a trigger) are
        raised as Django's exceptions and roll back the caller's transaction.
        """
        shown = self._chunks(objs, label, batch)
        connection = connections[router.db_for_write(model)]
        made: list[models.Model] = []
        if objs and copyable(model, connection):
            made = _copy(model, objs, shown, connection)
        else:
            for chunk in shown:
                made.extend(model.objects.bulk_create(chunk))
        self.created[label] += len(objs)
        return made

    def _bulk_rows(
        self,
        model: type[models.Model],
        rows: Sequence[dict[str, Any]],
        label: str,
        batch: int = BATCH,
    ) -> list[int]:
        """Insert `rows` (dicts of attname -> value, the same keys in each) into `model`'s
        table and return their pks in order: `_bulk` for the large tables, with no model
        instance built on PostgreSQL (`_copy_rows`; instances were half of the import's
        Python time, bench/README.md "Bundle import"). Counts and progress as `_bulk`;
        elsewhere (SQLite) `bulk_create` of instances made from the rows.
        """
        shown = self._chunks(rows, label, batch)
        connection = connections[router.db_for_write(model)]
        pks: list[int] = []
        if rows and copyable(model, connection):
            pks = _copy_rows(model, rows, shown, connection)
        else:
            for chunk in shown:
                pks.extend(o.pk for o in model.objects.bulk_create(model(**r) for r in chunk))
        self.created[label] += len(rows)
        return pks

    def _compare(
        self,
        file: str,
        line: int,
        names: Sequence[str],
        stored: Sequence[Any],
        given: Sequence[Any],
        hint: str = "re-import adds rows; it never changes stored ones",
    ) -> bool:
        """Report the first field that differs; return True when equal."""
        for name, old, new in zip(names, stored, given, strict=True):
            if old != new:
                self.p.add(
                    file,
                    line,
                    name,
                    "differs from the stored value (stored {}, bundle {}); {}".format(
                        *differing(old, new), hint
                    ),
                )
                return False
        return True

    def _sync(
        self,
        file: str,
        names: Sequence[str],
        stored: dict[Any, Sequence[Any]],
        incoming: Iterable[tuple[Any, Sequence[Any], int]],
    ) -> list[Any]:
        """Compare rows whose key is stored; return the keys that are new.

        A new id of a file in `ID_FIELDS` that equals a stored one but for case is a
        problem (the reader's `IdSpace` rule, held across imports into one benchmark).
        """
        new = []
        field = ID_FIELDS.get(file)
        folded = {k.casefold(): k for k in stored if isinstance(k, str)} if field else {}
        for key, values, line in incoming:
            if key in stored:
                self._compare(file, line, names, stored[key], values)
            elif field and key.casefold() in folded:
                self.p.add(
                    file,
                    line,
                    field,
                    f"{key!r} differs from the stored {folded[key.casefold()]!r} only in case; "
                    "ids of one kind must differ in more than case",
                )
            else:
                new.append(key)
        return new
