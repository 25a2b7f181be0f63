"""Value queries compiled to SQL once per process and run again with new values (issue 28).

On the review pages the ORM's building and compiling of a query cost more CPU than
PostgreSQL's answering it (1-2 ms a query against well under 0.5 ms). A query whose shape
never changes, only its values, can be compiled once: :class:`CompiledQuery` builds the
queryset with stand-in values, compiles it, remembers where each stand-in sits among the
SQL parameters, and from then on sends the same SQL with the caller's values.

Only for ``values`` and ``values_list`` querysets; each column goes through the converters the
compiler names for it, as the ORM's own rows do. A query whose stand-ins are not each
found as whole parameters (an ``__in`` list, a LIKE pattern), or whose rows the ORM would
reorder, is not compiled: it runs through the ORM on every call, as before. Either way
the rows are the ORM's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import QuerySet


class CompiledQuery:
    """``CompiledQuery(build, stand_ins)(*values)`` == ``list(build(*values))``, compiled once.

    `build(*args)` returns a ``values`` or ``values_list`` queryset whose parameters are
    the args used as plain values (equality, comparison); `stand_ins` are values of the
    same types that the query would never hold otherwise (each must appear among the
    compiled parameters, and no other parameter may equal one). Calling with the real
    values returns the list of rows (dicts, tuples, or values for a flat query). Compiled per
    database alias and vendor on first use; a query that does not qualify (the module's
    docstring) runs as ``list(build(*values))`` instead (`compiled(using)` says which).
    """

    def __init__(self, build: Callable[..., QuerySet], stand_ins: Sequence) -> None:
        self.build = build
        self.stand_ins = tuple(stand_ins)
        self._compiled: dict[
            tuple[str, str], tuple[str, tuple, list[list[int]], list, Any] | None
        ] = {}
        self._lock = threading.Lock()

    def _compile(self, alias: str) -> tuple[str, tuple, list[list[int]], list, Any] | None:
        """Return (sql, parameters, positions of each stand-in, converters, the rows' shape:
        "flat", "tuples" or the names of a values() query's dicts), or None when the query
        does not qualify."""
        qs = self.build(*self.stand_ins)
        kind = qs._iterable_class.__name__
        if kind not in ("ValuesIterable", "ValuesListIterable", "FlatValuesListIterable"):
            return None
        query = qs.query
        names = [*query.extra_select, *query.values_select, *query.annotation_select]
        if kind != "ValuesIterable" and qs._fields:
            fields = [*qs._fields, *(f for f in query.annotation_select if f not in qs._fields)]
            if fields != names:
                return None  # the ORM reorders such rows
        compiler = query.get_compiler(using=alias)
        try:
            sql, params = compiler.as_sql()
        except EmptyResultSet:  # a query that can match nothing (an empty __in list)
            return None
        converters = list(
            compiler.get_converters(
                [expression for expression, _sql, _alias in compiler.select]
            ).items()
        )
        positions = []
        for stand_in in self.stand_ins:
            # isinstance: Django passes an integer compared with < or > as psycopg's Int4
            at = [
                i for i, p in enumerate(params) if isinstance(p, type(stand_in)) and p == stand_in
            ]
            if not at:
                return None
            positions.append(at)
        shape = {"ValuesIterable": names, "FlatValuesListIterable": "flat"}.get(kind, "tuples")
        return sql, tuple(params), positions, converters, shape

    def compiled(self, using: str = "default") -> bool:
        """True when the query runs as compiled SQL on database `using` (compiling it)."""
        return self._get(using) is not None

    def _get(self, using: str):
        key = (using, connections[using].vendor)
        if key not in self._compiled:
            with self._lock:
                if key not in self._compiled:
                    self._compiled[key] = self._compile(using)
        return self._compiled[key]

    def __call__(self, *values, using: str = "default") -> list:
        """Return the rows of build(*values) on database `using` (one query)."""
        if len(values) != len(self.stand_ins):
            raise TypeError(f"CompiledQuery takes {len(self.stand_ins)} values")
        compiled = self._get(using)
        if compiled is None:
            return list(self.build(*values).using(using))
        sql, params, positions, converters, shape = compiled
        bound = list(params)
        for value, at in zip(values, positions, strict=True):
            for i in at:
                kind = type(params[i])  # the stand-in's, or the type Django wrapped it in
                bound[i] = value if kind is type(value) else kind(value)
        connection = connections[using]
        with connection.cursor() as cursor:
            cursor.execute(sql, bound)
            rows = cursor.fetchall()
        if converters:  # as SQLCompiler.apply_converters
            rows = [list(row) for row in rows]
            for row in rows:
                for pos, (functions, expression) in converters:
                    for convert in functions:
                        row[pos] = convert(row[pos], expression, connection)
        if shape == "flat":
            return [row[0] for row in rows]
        if shape == "tuples":
            return [tuple(row) for row in rows]
        return [dict(zip(shape, row, strict=True)) for row in rows]  # values(): by name
