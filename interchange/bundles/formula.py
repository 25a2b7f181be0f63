"""CSV formula injection: neutralise on export, undo exactly that on import.

A bundle is the interchange format and must round-trip exactly, yet its CSV files get
opened in spreadsheets, where a cell starting with `= + - @`, a tab or a CR runs as a
formula (OWASP "CSV Injection"). So export prefixes ONE apostrophe to every CSV cell that
matches `^'*[=+\\-@\\t\\r]` (a dangerous cell, or one that already starts with apostrophes
before such a character), and import removes one apostrophe from every cell matching
`^'+[=+\\-@\\t\\r]`. The two are inverse for every string: a stored `=HYPERLINK("x")` is
written `'=HYPERLINK("x")` and read back as `=HYPERLINK("x")`; a stored `'=x` is written
`''=x` and read back as `'=x`; a stored `'hello` is left alone both ways. JSONL files are
not touched (no spreadsheet opens them).
"""

from __future__ import annotations

import re

_EXPORT = re.compile(r"^'*[=+\-@\t\r]")
_IMPORT = re.compile(r"^'+[=+\-@\t\r]")


def neutralise(value: str) -> str:
    """Return a CSV cell safe to open in a spreadsheet (see module docstring)."""
    return "'" + value if _EXPORT.match(value) else value


def unneutralise(value: str) -> str:
    """Undo `neutralise` on a cell read from a bundle CSV."""
    return value[1:] if _IMPORT.match(value) else value
