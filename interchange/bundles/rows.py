"""Reading a bundle file's rows: typed getters that report problems with file and line.

The column limits and value sets of bundle-format.md, strict JSON Lines (`iter_jsonl`) and
CSV (`iter_csv`) readers that yield a `Row` per record, `nul_path` and `surrogate_path`.
No database access.
"""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
from collections.abc import Iterator
from typing import Any

from interchange.bundles.problems import Problems
from interchange.bundles.source import BOM, BundleSource, decode_lines
from questions.cli import progress
from scoring.spreadsheet import unneutralise

SLUG = re.compile(r"^[-a-zA-Z0-9_]+$")
# Ids land in URLs (/questions/<id>/, leaderboard rows) and on every page: ASCII letters and
# digits first, then also `.`, `_`, `-` and `@` (the shared corpora's `model@provider`),
# nothing a URL reads as a separator (`/ ? # % :`) and no look-alike from another script
# (`model-а` with a Cyrillic а): among these characters, ids that look the same are the
# same once case is ignored, which `IdSpace` checks.
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]*")  # whole value (fullmatch: `$` let "Q1\n" in)
ID_RULE = "letters A-Z a-z, digits, then also . _ - @ (ASCII only)"
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
ORIGINAL = "original"
DEFAULT_CORRECTED = "corrected-1"
DOC_STATUSES = ("current", "superseded", "withdrawn")
ROLES = ("judge", "auditor")
BACKENDS = ("", "reference", "openai", "anthropic")
VERDICTS = ("correct", "wrong", "ungradeable")
ACTIONS = ("correct", "remove")
REASONS = ("factually_wrong", "amended_or_repealed", "superseded_edition", "ungradeable", "other")

# Column lengths of the models (questions/models.py, scoring/models.py).
MAX = {
    "id": 100,
    "model_id": 200,
    "judge_id": 200,
    "title": 500,
    "short_title": 200,
    "kind": 100,
    "edition": 100,
    "url": 1000,
    "locator": 100,
    "category_name": 200,
    "model_name": 300,
    "vendor": 100,
    "model": 200,
    "prompt_version": 50,
    "stop_reason": 50,
}

# The range of scoring.Grade.grade (a SmallIntegerField: PostgreSQL smallint), which every
# grade on a bundle's grade_scale must fit.
GRADE_MIN, GRADE_MAX = -32768, 32767


def type_name(value: Any) -> str:
    """Return the JSON type name of `value` ("string", "number", "null" ...) for messages."""
    if value is None:
        return "null"
    return {
        bool: "boolean",
        int: "number",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
    }.get(type(value), type(value).__name__)


class Row:
    """One row being checked: typed getters that report problems with file and line."""

    def __init__(
        self, problems: Problems, file: str, line: int, data: dict[str, Any], prefix: str = ""
    ) -> None:
        self.problems, self.file, self.line, self.data = problems, file, line, data
        self.prefix = prefix
        self.ok = True

    def error(self, fieldname: str, message: str) -> None:
        self.ok = False
        self.problems.add(self.file, self.line, self.prefix + fieldname, message)

    def text(
        self,
        name: str,
        *,
        required: bool = True,
        empty: bool = True,
        null: bool = False,
        max_length: int | None = None,
        default: str = "",
    ) -> str | None:
        """Return a string field; None (after reporting) when it is missing or wrong."""
        if name not in self.data:
            if required:
                self.error(name, "required field missing")
                return None
            return default
        value = self.data[name]
        if value is None and (null or not required):
            return default
        if not isinstance(value, str):
            self.error(name, f"must be a string, not {type_name(value)}")
            return None
        if not empty and not value.strip():
            self.error(name, "must not be empty")
            return None
        if max_length is not None and len(value) > max_length:
            self.error(name, f"longer than {max_length} characters")
            return None
        if "\x00" in value:
            # PostgreSQL text cannot hold it; SQLite would keep it and the export then differ.
            column = value.index("\x00") + 1
            self.error(name, f"contains a NUL character (U+0000) at character {column}")
            return None
        return value

    def ident(self, name: str, max_length: int = MAX["id"], required: bool = True) -> str | None:
        """Return a non-empty identifier; None (after reporting) when it breaks the rule.

        The rule is `ID` (ASCII letters, digits, `. _ - @`, a letter or digit first). An id
        not in Unicode NFC ("Qe" + U+0301 where "Qé01" is meant) gets its own message, as
        it is the likeliest mistake with a non-ASCII id (Unicode Standard Annex #15).
        """
        value = self.text(name, required=required, empty=False, max_length=max_length)
        if not value or ID.fullmatch(value):  # ASCII, so NFC: nothing more to check
            return value
        if unicodedata.is_normalized("NFC", value):
            self.error(
                name,
                f"{value!r} is not a valid id: use {ID_RULE}, starting with a letter or "
                "digit (ids are used in URLs and must not have look-alikes)",
            )
            return None
        nfc = unicodedata.normalize("NFC", value)
        marks = ", ".join(f"U+{ord(c):04X}" for c in value if unicodedata.combining(c))
        self.error(
            name,
            f"{value!r} is not in Unicode NFC form (combining characters {marks or 'none'}):"
            f" write it composed, as {nfc!r}, so that ids that look the same are the same",
        )
        return None

    def choice(
        self, name: str, choices: tuple[str, ...], *, required: bool = True, default: str = ""
    ) -> str | None:
        value = self.text(name, required=required, null=not required, default=default)
        if value is None:
            return None
        if value not in choices:
            shown = ", ".join(c or "(empty)" for c in choices)
            self.error(name, f"{value!r} is not one of {shown}")
            return None
        return value

    def boolean(self, name: str, default: bool = False) -> bool | None:
        value = self.data.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.error(name, f"must be true or false, not {type_name(value)}")
            return None
        return value


class IdSpace:
    """The ids of one kind in one bundle (questions, models ...): refuses two that differ
    only in case (`Q001` and `q001` look like one row; Windows, macOS and many URLs treat
    them as one). Exact duplicates are left to the caller, whose message names the file's
    key."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[str, int]] = {}

    def clash(self, row: Row, name: str, value: str) -> bool:
        """Report and return True when `value` equals an earlier id but for case."""
        folded = value.casefold()
        first = self.seen.setdefault(folded, (value, row.line))
        if first[0] == value:
            return False
        row.error(
            name,
            f"{value!r} differs from {first[0]!r} (line {first[1]}) only in case; ids of one "
            "kind must differ in more than case",
        )
        return True


def _reject_constant(value: str) -> Any:
    raise ValueError(f"{value} is not valid JSON")


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """object_pairs_hook: a key given twice in one object is an error, not "last one wins"."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"key {key!r} appears twice in one object")
            seen.add(key)
    return out


# One decoder for every line (json.loads with options builds a new one per call).
_STRICT = json.JSONDecoder(
    parse_constant=_reject_constant, object_pairs_hook=_reject_duplicate_keys
)


def loads_strict(text: str) -> Any:
    """Parse strict JSON: no NaN/Infinity, no duplicate keys, bounded nesting.

    Raises ValueError with a message for the problem report (a document nested too deeply
    for the parser's recursion limit is reported, not raised as RecursionError).
    """
    try:
        return _STRICT.decode(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def iter_jsonl(
    source: BundleSource, name: str, problems: Problems, show_progress: bool = False
) -> Iterator[Row]:
    """Yield a Row per non-blank line of a JSONL file; report broken lines and go on."""
    lines = decode_lines(name, source.read_bytes(name), problems, partial=True)
    if lines is None:
        return
    for number, text in progress(
        lines, enabled=show_progress and len(lines) > 5000, total=len(lines), desc=name
    ):
        if not text.strip():
            continue
        try:
            value = loads_strict(text)
        except ValueError as exc:
            detail = f"{exc.msg} at column {exc.colno}" if hasattr(exc, "msg") else str(exc)
            problems.add(name, number, "json", f"broken JSON: {detail}")
            continue
        if not isinstance(value, dict):
            problems.add(
                name, number, "json", f"each line must be a JSON object, not {type_name(value)}"
            )
            continue
        lone = surrogate_path(text, value)
        if lone is not None:
            problems.add(name, number, lone[0], surrogate_message(lone[1]))
            continue
        yield Row(problems, name, number, value)


def iter_csv(
    source: BundleSource,
    name: str,
    problems: Problems,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
) -> Iterator[Row]:
    """Yield a Row per record of a CSV file (header first); quoted fields may span lines.

    Cells get one leading apostrophe removed where export neutralised a formula
    (scoring.spreadsheet). Unknown columns are ignored.
    """
    lines = decode_lines(name, source.read_bytes(name), problems, keepends=True)
    if lines is None:
        return
    text = "".join(t for _, t in lines)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header: list[str] | None = None
    last = 0
    try:
        for record in reader:
            start, last = last + 1, reader.line_num
            if not record or (len(record) == 1 and not record[0].strip()):
                continue
            if header is None:
                header = [h.strip() for h in record]
                seen = set()
                for h in header:
                    if h in seen:
                        problems.add(name, start, h, "column appears twice in the header")
                    seen.add(h)
                missing = [c for c in required if c not in header]
                for column in missing:
                    problems.add(name, start, column, "required column missing")
                if missing:
                    return
                continue
            if len(record) != len(header):
                problems.add(
                    name, start, "row", f"expected {len(header)} fields, got {len(record)}"
                )
                continue
            data = {
                h: unneutralise(v)
                for h, v in zip(header, record, strict=True)
                if h in required or h in optional
            }
            yield Row(problems, name, start, data)
    except csv.Error as exc:
        problems.add(name, reader.line_num, "csv", f"malformed CSV: {exc}")
    if header is None:
        problems.add(name, 1, "header", "empty file: a header row is required")


def count_rows(name: str, data: bytes) -> int | None:
    """Return the rows of bundle file `name` as the manifest's `counts` give them.

    JSONL: its non-blank lines. CSV: its records after the header, blank ones not counted
    (as `iter_csv` skips them; a quoted cell may span lines). Any other file: 1. None when a
    CSV is not UTF-8 or not CSV (its own problems are reported by the reader). A leading
    BOM is ignored, lines break at LF, CRLF or CR (as `decode_lines`).
    """
    if data.startswith(BOM):
        data = data[len(BOM) :]
    if name.endswith(".jsonl"):
        return sum(1 for line in data.splitlines() if line.strip())
    if not name.endswith(".csv"):
        return 1
    try:
        reader = csv.reader(io.StringIO(data.decode("utf-8"), newline=""), strict=True)
        records = sum(1 for r in reader if r and (len(r) > 1 or r[0].strip()))
    except (UnicodeDecodeError, csv.Error):
        return None
    return max(0, records - 1)


def _char_path(value: Any, bad: re.Pattern[str], path: str) -> tuple[str, str] | None:
    """Return (path, first match) of the first string or key of `value` that `bad` finds."""
    if isinstance(value, str):
        found = bad.search(value)
        return ((path or "value"), found.group()) if found else None
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            found = bad.search(str(key))
            if found:
                return here, found.group()
            inner = _char_path(item, bad, here)
            if inner is not None:
                return inner
    if isinstance(value, list):
        for i, item in enumerate(value):
            inner = _char_path(item, bad, f"{path}[{i}]")
            if inner is not None:
                return inner
    return None


_NUL = re.compile("\x00")
_SURROGATE = re.compile("[\ud800-\udfff]")
# The only way a surrogate reaches a decoded line: UTF-8 decoding refuses encoded ones.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def nul_path(value: Any, path: str = "") -> str | None:
    """Return the path (`editions[0].note`) of the first string or key holding U+0000."""
    found = _char_path(value, _NUL, path)
    return found[0] if found else None


def surrogate_path(text: str, value: Any) -> tuple[str, str] | None:
    """Return (path, `U+D800`) of the first string or key of `value` (parsed from the JSON
    `text`) holding a lone surrogate, or None.

    JSON's `\\ud800` escape without its pair decodes to a code point that is not a
    character (Unicode 15, section 3.9: surrogates are not scalar values): UTF-8 cannot
    encode it, so the database write failed with a traceback. A pair (`\\ud83d\\ude00`)
    decodes to one character and is fine. Only lines with such an escape are walked.
    """
    if not _SURROGATE_ESCAPE.search(text):
        return None
    found = _char_path(value, _SURROGATE, "")
    if found is None:
        return None
    # A key may hold it too: the path is shown escaped, or printing it would fail.
    return found[0].encode("utf-8", "backslashreplace").decode(), f"U+{ord(found[1]):04X}"


def surrogate_message(code: str) -> str:
    """The problem text for a lone surrogate (`code` as `U+D800`)."""
    return (
        f"contains a lone surrogate {code} (a JSON \\u escape without its pair): not a "
        "Unicode character, it cannot be stored; write the character itself"
    )
