"""Spreadsheet-safe CSV: every CSV the product writes neutralises formula cells here.

CSV files get opened in spreadsheets, where a cell starting with `= + - @`, a tab or a CR
runs as a formula (OWASP "CSV Injection"): a model id `=1+2`, a note `@SUM(A1)`, even a
tie rank `=3`. So every CSV writer (the leaderboard download and command, the bundle
export) goes through `csv_text`, which prefixes ONE apostrophe to every cell that
matches `^'*[=+\\-@\\t\\r]` (a dangerous cell, or one that already starts with apostrophes
before such a character), and import removes one apostrophe from every cell matching
`^'+[=+\\-@\\t\\r]` (interchange's bundle reader). The two are inverse for every
string: a stored `=HYPERLINK("x")` is written `'=HYPERLINK("x")` and read back as
`=HYPERLINK("x")`; a stored `'=x` is written `''=x` and read back as `'=x`; a stored
`'hello` is left alone both ways. JSONL files are
not touched (no spreadsheet opens them).

It lives in `scoring`, the lowest layer that writes CSV (interchange imports it from here).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from typing import Any

_EXPORT = re.compile(r"^'*[=+\-@\t\r]")
_IMPORT = re.compile(r"^'+[=+\-@\t\r]")


def neutralise(value: str) -> str:
    """Return a CSV cell safe to open in a spreadsheet (see module docstring)."""
    return "'" + value if _EXPORT.match(value) else value


def unneutralise(value: str) -> str:
    """Undo `neutralise` on a cell read from a bundle CSV."""
    return value[1:] if _IMPORT.match(value) else value


def csv_text(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    """Return CSV text (``\\n`` line ends): `header`, then `rows` with every cell neutralised.

    None becomes an empty cell; other values are written as ``str(value)``, then passed
    through `neutralise`, header included.
    """
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([neutralise(str(h)) for h in header])
    for row in rows:
        writer.writerow([neutralise("" if v is None else str(v)) for v in row])
    return out.getvalue()
