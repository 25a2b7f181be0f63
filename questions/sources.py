"""Index the plain text of Approved Documents into located passages.

Pure functions only (no Django import): the ``import_sources`` / ``locate``
management commands call :func:`index_files`, :func:`parse_sections`,
:func:`normalise_locator`, :func:`nearest_locators` and :func:`quote_span`;
questions.passages builds on :func:`quote_span` (where a key entry's quote lies, and
which passages to keep when a document is re-indexed).

Locators produced: numbered paragraphs (``"2.1"``, ``"10.14"``, Approved
Document A's ``"2C12"``, appendix forms ``"A1.1"``, ``"B.2"``, ``"B11"``) and
captions (``"Table 4.1"``, ``"Diagram 2.3"``, ``"Figure 3"``, ``"Table D1"``).
"""

from __future__ import annotations

import bisect
import difflib
import functools
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ParsedSection",
    "clean_text",
    "fold",
    "guess_document_meta",
    "index_files",
    "nearest_locators",
    "normalise_locator",
    "parse_sections",
    "quote_span",
]


@dataclass(frozen=True)
class ParsedSection:
    """One located passage: ``locator`` is unique within its document.

    ``position`` is the 0-based order of the section in the document, ``text``
    the cleaned passage after the locator label, ``heading`` the caption (tables,
    diagrams) or the opening words (paragraphs).
    """

    locator: str
    heading: str
    text: str
    position: int


# --------------------------------------------------------------------------- folding

_CHAR_FOLDS = {
    **{"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl"},
    **dict.fromkeys("\ufb05\ufb06", "st"),
    **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u2033", '"'),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2212", "-"),
    **dict.fromkeys("\u00a0\u202f\u2007", " "),
    **dict.fromkeys("\u00ad\u200b\u200c\u200d\ufeff", ""),
}


_FOLD_TABLE = str.maketrans(_CHAR_FOLDS)


@functools.lru_cache(maxsize=8192)
def _fold_cluster(cluster: str) -> str:
    """Fold one base character plus its combining marks (no whitespace collapsing).

    Cached: a text is folded one cluster at a time and has few distinct clusters (the
    review page folds every passage of a document to find a quote elsewhere)."""
    s = "".join(_CHAR_FOLDS.get(ch, ch) for ch in cluster)
    return unicodedata.normalize("NFKC", s).casefold()


def _fold_with_map(text: str, drop_spaces: bool = False) -> tuple[str, list[int], list[int]]:
    """Fold ``text`` and map every folded char back to its original [start, end) span."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i, n = 0, len(text)
    while i < n:
        j = i + 1
        while j < n and unicodedata.combining(text[j]):
            j += 1
        folded = _fold_cluster(text[i:j])
        if folded.isspace():
            if not drop_spaces and out and out[-1] != " ":
                out.append(" ")
                starts.append(i)
                ends.append(j)
        else:
            for ch in folded:
                if ch.isspace():
                    if drop_spaces or (out and out[-1] == " "):
                        continue
                out.append(ch)
                starts.append(i)
                ends.append(j)
        i = j
    while out and out[-1] == " ":
        out.pop(), starts.pop(), ends.pop()
    return "".join(out), starts, ends


def fold(text: str, *, drop_spaces: bool = False) -> str:
    """Return ``text`` normalised for searching.

    Rules: ligatures (ﬁ ﬂ ﬀ ﬃ ﬄ) expanded, curly quotes/primes to ``'``/``"``,
    dashes and minus to ``-``, soft hyphens and zero-width characters removed,
    NFKC applied, non-breaking spaces to spaces, whitespace runs collapsed to one
    space and trimmed, then ``casefold``; with ``drop_spaces`` all whitespace is
    removed instead (the second pass of :func:`quote_span`). Never raises for ``str``.
    """
    simple = text.translate(_FOLD_TABLE)
    if simple.isascii():
        # Every character is then its own cluster and NFKC leaves it as it is, so this is
        # what _fold_with_map gives, without its loop over the characters (97 % of the
        # paragraphs of the Approved Documents; tests/test_fold.py compares the two).
        return ("" if drop_spaces else " ").join(simple.split()).lower()
    return _fold_with_map(text, drop_spaces=drop_spaces)[0]


def quote_span(section_text: str, quote: str) -> tuple[int, int] | None:
    """Find ``quote`` in ``section_text`` and return its [start, end) offsets.

    Offsets index the ORIGINAL ``section_text`` (slice it to highlight). Matching
    is done on :func:`fold` output (whitespace, case, ligature, quote and dash
    insensitive); if that fails, it is retried with all whitespace removed (text
    glued or split by extraction). Returns the first match, or ``None`` when the
    quote is absent or blank.
    """
    for drop in (False, True):
        hay, starts, ends = _fold_with_map(section_text, drop_spaces=drop)
        needle = _fold_with_map(quote, drop_spaces=drop)[0]
        if not needle:
            return None
        k = hay.find(needle)
        if k >= 0:
            return starts[k], ends[k + len(needle) - 1]
    return None


# --------------------------------------------------------------------------- cleaning

_ONLINE = re.compile(r"(?:O ?N ?L ?I ?N ?E\s*V ?E ?R ?S ?I ?O ?N[ \t]*)+")
_PAGE_HEADER = re.compile(
    r"(?:Building\s+Regulations\s+2010\s+)?(?:\b\d{1,3}\s+)?"
    r"Approved\s+Document\s+[A-Z0-9](?:\s+Volume\s+\d)?,\s+\d{4}\s+edition"
    r"(?:\s+(?:Building\s+Regulations\s+2010|t\s+[A-Z0-9],\s+\d{4}\s+edition"
    r"|Approved\s+Docu\w*(?=\s*$)|\d{1,3}(?![\d.])))?"
    r"|(?:\b\d{1,3}\s+)?\bt\s+[A-Z0-9],\s+\d{4}\s+edition"
)
_CODE = r"[A-Z]{1,3}\d{0,2}(?:\([0-9a-z]+\))*(?:[,/][A-Z]{0,3}\d{1,2}(?:\([0-9a-z]+\))*)*"
_HEADER_PREFIX = re.compile(rf"^\s*(?:{_CODE})?\s*$")
_GLUED_CODE = re.compile(rf"^{_CODE}(?=(?:Table|Diagram|Figure)\s)")
_GLUED_CAPTION = re.compile(r"(?<=[a-z)])(?=(?:Table|Diagram|Figure) [A-Z]?\.?\d)")
_JUNK_LINE = re.compile(r"^(?:\d{1,3}|[ivxl]{1,6}|Building Regulations 2010)$")


def _is_header_prefix(prefix: str) -> bool:
    p = prefix.strip()
    if _HEADER_PREFIX.match(p) or p == "Building Regulations 2010":
        return True
    return (
        "Approved Document" in p
        and len(p) < 120
        and not p.endswith(".")
        and ("Table" not in p and "Diagram" not in p)
    )


def clean_text(text: str) -> str:
    """Remove extraction noise from an Approved Document's plain text.

    Removes ``O N L I N E   V E R S I O N`` / ``ONLINE VERSION`` runs and the
    running header glued before them (requirement codes such as ``B1``,
    ``F1(1)``, document titles), running page headers (``Building Regulations
    2010  Approved Document B Volume 1, 2019 edition 43`` and the mirrored
    left-page form), lone page-number lines, and un-glues captions from the
    codes or words before them (``B2Table 4.1`` -> ``Table 4.1``). Everything
    else (spacing within lines, ligatures, punctuation) is kept as given.
    Blank-line runs collapse to one blank line.
    """
    out: list[str] = []
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        parts = _ONLINE.split(raw)
        if len(parts) > 1 and _is_header_prefix(parts[0]):
            parts = parts[1:]
        for part in parts:
            part = _PAGE_HEADER.sub("\n", part)
            part = _GLUED_CAPTION.sub("\n", part)
            for line in part.split("\n"):
                line = _GLUED_CODE.sub("", line.strip())
                if _JUNK_LINE.match(line):
                    continue
                if line or (out and out[-1]):
                    out.append(line)
    return "\n".join(out).strip()


# --------------------------------------------------------------------------- locators

_NUM = r"\d{1,2}\.\d{1,3}|\d[A-H]\d{1,2}|[A-H]\d{1,2}\.\d{1,3}|[A-H]\.\d{1,3}|[A-H]\d{1,2}"
_PARA_LINE = re.compile(rf"^(?P<num>{_NUM})(?P<sp>[ \t]+)(?=[A-Z\u2018\u201c'\"])", re.M)
# A paragraph whose first words were displaced by extraction starts lower-case ("5.5
# requirement if it is built as follows") or with a figure ("3.15  75mm and 100mm
# rainwater drains"); table cells start the same way ("7.5 m", "1.25 l/place setting",
# "12.00  9.60 25.40"), so such a line counts only when it reads as prose: _PROSE_WORDS
# words of two or more letters on the line, and it does not open with another number of
# a paragraph's form. Never strong: off the number sequence it is dropped.
_PARA_LINE_LOW = re.compile(rf"^(?P<num>{_NUM})(?P<sp>[ \t]+)(?=[a-z]|\d)", re.M)
_PROSE_WORDS = 4
_WORD = re.compile(r"[A-Za-z]{2,}")
_OPENS_WITH_NUMBER = re.compile(rf"(?:{_NUM})\s")
_PARA_MID = re.compile(
    r"(?<=\S)[ \t]+(?P<num>\d{1,2}\.\d{1,3})(?P<sp>[ \t]{2,})(?=[A-Z][a-z]|[A-Z] )"
)
_CAPTION = re.compile(
    r"(?P<kind>Table|Diagram|Figure)[ \t]+(?P<num>[A-Z]?\.?\d{1,2}(?:\.\d{1,2})?[a-z]?)"
    r"(?P<sp>[ \t]+)(?=[A-Z\u2018\u201c])"
)
_REF_WORDS = set(
    "table tables diagram diagrams figure para paras paragraph paragraphs and to or section"
    " appendix clause see of in bs en iso with than by at is be from between under".split()
)
_KINDS = {
    "table": "Table",
    "tbl": "Table",
    "diagram": "Diagram",
    "diag": "Diagram",
    "figure": "Figure",
    "fig": "Figure",
}
_LOC_SPLIT = re.compile(r"^(?:(?P<kind>Table|Diagram|Figure) )?(?P<num>\S+)$")
_NUM_PARTS = re.compile(
    r"^(?P<app>[A-Z])?\.?(?P<major>\d+)?(?P<sub>[A-Z])?\.?(?P<minor>\d+)?(?P<suf>[a-z])?$"
)


def _key(num: str) -> tuple[int, int, int, int] | None:
    """Return the sort key (appendix, major, sub-letter, minor) of a number, or None."""
    m = _NUM_PARTS.match(num)
    if not m or not (m["major"] or m["minor"]):
        return None
    app = ord(m["app"]) - 64 if m["app"] else 0
    major, minor = int(m["major"] or 0), int(m["minor"] or 0)
    return app, major, ord(m["sub"]) - 64 if m["sub"] else 0, minor


_KIND_RANK = {"": 0, "Table": 1, "Diagram": 2, "Figure": 3}


def locator_sort_key(locator: str) -> tuple:
    """Return a key that sorts a document's locators in reading order (issue 18).

    Numbers compare as numbers: ``3.59 < 3.60 < 5.13`` and ``2.9 < 2.10`` (a file may
    list them in any order). The key is (0, appendix, chapter, sub-letter, number,
    kind, part letter) for a parseable locator: appendix A after the main text, a
    paragraph before a Table, Diagram or Figure of the same number, ``Diagram 2.1a``
    after ``Diagram 2.1``. A locator that does not parse (blank, free text) sorts after
    all of those, by its text: (1, text). Never raises.
    """
    try:
        norm = normalise_locator(locator)
    except ValueError:
        return (1, locator or "")
    m = _LOC_SPLIT.match(norm)
    kind, num = (m["kind"] or "", m["num"]) if m else ("", norm)
    key = _key(num)
    if key is None:
        return (1, norm)
    parts = _NUM_PARTS.match(num)
    app, major, sub, minor = key
    # an appendix (A1.1) comes after every numbered chapter of the main text
    return (0, app, major, sub, minor, _KIND_RANK.get(kind, 4), parts["suf"] or "")


def normalise_locator(s: str) -> str:
    """Return the canonical form of a cited locator.

    ``"table 4.1"``, ``"Table 4.1."``, ``"tbl 4.1"`` -> ``"Table 4.1"``;
    ``"para 2.1"``, ``"paragraph 2.1"``, ``"§2.1"`` -> ``"2.1"``;
    ``"a1.1"`` -> ``"A1.1"``, ``"2c12"`` -> ``"2C12"``; diagram part letters stay
    lower case (``"Diagram 2.1a"``). Raises ValueError for a blank locator.
    """
    t = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", s)).strip().strip(".,;:")
    t = re.sub(r"(?i)^(?:paragraphs?|paras?|§+)\.?\s*", "", t).strip().strip(".,;:")
    kind = ""
    m = re.match(r"(?i)^(table|tbl|diagram|diag|figure|fig)\.?\s*(.*)$", t)
    if m:
        kind, t = _KINDS[m[1].lower()] + " ", m[2].strip().strip(".,;:")
    t = t.replace(" ", "")
    if not t:
        raise ValueError(f"blank locator: {s!r}")
    t = re.sub(r"[A-Za-z](?=[\d.])", lambda mm: mm[0].upper(), t)
    return kind + t


def nearest_locators(locator: str, available: list[str], n: int = 5) -> list[str]:
    """Return up to ``n`` locators from ``available`` that ``locator`` probably meant.

    Order: same kind first (paragraph / Table / Diagram / Figure), then same
    appendix and chapter, then fewest character edits of the number (typos:
    ``4.99`` -> ``4.9``), then numeric closeness, then document order. An
    exact match is excluded. Unparseable locators fall back to string
    similarity. Never raises.
    """
    try:
        target = normalise_locator(locator)
    except ValueError:
        return list(available[:n])
    tm = _LOC_SPLIT.match(target)
    tkind, tnum = (tm["kind"] or "", tm["num"]) if tm else ("", target)
    tkey = _key(tnum)
    scored = []
    for idx, loc in enumerate(available):
        if loc == target:
            continue
        m = _LOC_SPLIT.match(loc)
        kind, num = (m["kind"] or "", m["num"]) if m else ("", loc)
        key = _key(num)
        ratio = difflib.SequenceMatcher(None, tnum, num).ratio()
        if tkey is None or key is None:
            scored.append(((kind != tkind, 9, 9, 1 - ratio, 0, idx), loc))
            continue
        edits = len(tnum) + len(num) - 2 * round(ratio * (len(tnum) + len(num)) / 2)
        dist = abs(key[3] - tkey[3]) + 1000 * abs(key[2] - tkey[2])
        scored.append(
            ((kind != tkind, key[0] != tkey[0], abs(key[1] - tkey[1]), edits, dist, idx), loc)
        )
    return [loc for _, loc in sorted(scored)[:n]]


# --------------------------------------------------------------------------- parsing


@dataclass
class _Cand:
    start: int  # where the section (label included) starts in the cleaned text
    body: int  # where the text after the label starts
    locator: str
    kind: str  # "para" or the caption kind
    strong: bool
    key: tuple[int, int, int, int]
    length: int = 0
    toc: bool = False
    prose: bool = False  # starts lower-case or with a figure (_PARA_LINE_LOW)


def _candidates(clean: str) -> list[_Cand]:
    cands: dict[int, _Cand] = {}
    for m in _PARA_LINE.finditer(clean):
        num, key = m["num"], _key(m["num"])
        if key is None or not _plausible(num, key):
            continue
        after = clean[m.end() : m.end() + 2]
        strong = len(m["sp"]) >= 2 or "\t" in m["sp"]
        strong = strong and (after[:1].isupper() and (after[1:2].islower() or after[1:2] == " "))
        cands[m.start()] = _Cand(m.start(), m.end(), num, "para", strong, key)
    for m in _PARA_LINE_LOW.finditer(clean):
        num, key = m["num"], _key(m["num"])
        line_end = clean.find("\n", m.end())
        line = clean[m.end() : line_end if line_end >= 0 else len(clean)]
        if key is None or not _plausible(num, key) or _OPENS_WITH_NUMBER.match(line):
            continue
        if len(_WORD.findall(line)) >= _PROSE_WORDS:
            cands[m.start()] = _Cand(m.start(), m.end(), num, "para", False, key, prose=True)
    for m in _PARA_MID.finditer(clean):
        num, key = m["num"], _key(m["num"])
        prev = re.findall(r"[\w§]+", clean[max(0, m.start() - 30) : m.start()])
        if key is None or not _plausible(num, key) or (prev and prev[-1].lower() in _REF_WORDS):
            continue
        cands.setdefault(m.start("num"), _Cand(m.start("num"), m.end(), num, "para", False, key))
    for m in _CAPTION.finditer(clean):
        key = _key(m["num"].rstrip("abcdefgh") or m["num"])
        at_line_start = m.start() == 0 or clean[m.start() - 1] == "\n"
        if key is None or not (at_line_start or len(m["sp"].expandtabs(2)) >= 2):
            continue
        if re.match(r"(?i)\(?cont(?:inued|'d|\.)?\b", clean[m.end() : m.end() + 12]):
            continue
        loc = f"{m['kind']} {m['num']}"
        cands[m.start()] = _Cand(m.start(), m.end(), loc, m["kind"], at_line_start, key)
    return [cands[k] for k in sorted(cands)]


def _plausible(num: str, key: tuple[int, int, int, int]) -> bool:
    """Reject numbers that cannot be paragraph numbers (x.0, huge chapters)."""
    app, major, sub, minor = key
    if app == 0 and sub == 0 and (major > 30 or (minor == 0 and major > 0) or minor > 400):
        return False
    return not (app and (major > 60 or minor > 99))


def _lis(keys: list[tuple]) -> set[int]:
    """Return indices of one longest strictly increasing subsequence of ``keys``."""
    tails: list[tuple] = []
    tail_idx: list[int] = []
    parent = [-1] * len(keys)
    for i, k in enumerate(keys):
        pos = bisect.bisect_left(tails, k)
        if pos == len(tails):
            tails.append(k)
            tail_idx.append(i)
        else:
            tails[pos], tail_idx[pos] = k, i
        parent[i] = tail_idx[pos - 1] if pos else -1
    out, i = set(), tail_idx[-1] if tail_idx else -1
    while i >= 0:
        out.add(i)
        i = parent[i]
    return out


def _sequence_filter(paras: list[_Cand]) -> list[_Cand]:
    """Keep paragraph candidates that fit the document's number sequence.

    Candidates that open with a capital are filtered by ``_capital_filter``; one that
    opens lower-case or with a figure (``_PARA_LINE_LOW``) is then kept only when it
    fits between the kept paragraphs either side of it: its number is greater than
    the one before and less than the one after, it shares the appendix and chapter
    of one of them, and it has some text (20 characters). So "5.5 requirement if
    ..." between 5.4 and 5.6 is a paragraph, and the capitalised paragraphs are
    found exactly as before.
    """
    kept = _capital_filter([c for c in paras if not c.prose])
    starts = [c.start for c in kept]
    extra = []
    for c in (c for c in paras if c.prose and c.length >= 20):
        i = bisect.bisect_left(starts, c.start)
        before = kept[i - 1] if i > 0 else None
        after = kept[i] if i < len(kept) else None
        if before is not None and before.key >= c.key or after is not None and after.key <= c.key:
            continue
        if any(nb is not None and nb.key[:3] == c.key[:3] for nb in (before, after)):
            extra.append(c)
    return sorted(kept + extra, key=lambda c: c.start)


def _capital_filter(paras: list[_Cand]) -> list[_Cand]:
    """Keep the capital-opening paragraph candidates that fit the number sequence.

    The backbone is the longest strictly increasing run of numbers (document
    order). A candidate off the backbone survives only if it is strong (line
    start, two spaces, capitalised word, some text) and either belongs to the
    same appendix and chapter as its nearest backbone neighbour (extraction
    sometimes swaps neighbouring paragraphs) or has a close sequence neighbour
    nearby (n.m-1..n.m-3 just before or n.m+1..n.m+3 just after: numbering
    restarted, e.g. in the next Part of Approved Document H). Isolated numbers
    out of sequence ("1.5 m" cells in chapter 4) are dropped.
    """
    spine = _lis([c.key for c in paras])
    kept = []
    for i, c in enumerate(paras):
        if i in spine:
            kept.append(c)
            continue
        if not c.strong or c.length < 20:
            continue
        before = next((paras[j] for j in range(i - 1, -1, -1) if j in spine), None)
        after = next((paras[j] for j in range(i + 1, len(paras)) if j in spine), None)
        if any(nb is not None and nb.key[:3] == c.key[:3] for nb in (before, after)):
            kept.append(c)
            continue
        window = paras[max(0, i - _WINDOW) : i] + paras[i + 1 : i + 1 + _WINDOW]
        for d in window:
            if d.key[:3] != c.key[:3] or not d.strong:
                continue
            gap = (c.key[3] - d.key[3]) * (1 if d.start < c.start else -1)
            if 0 < gap <= 3:
                kept.append(c)
                break
    return kept


_WINDOW = 4
_TOC_LINE = re.compile(r"^.{0,100}?(?:\.{2,}|\u2026|[ \t]{2,})\s*\d{1,3}$")


def _summary(body: str, limit: int = 100, cut: bool = True) -> str:
    """Return the first line of ``body`` (first sentence if ``cut``), at most ``limit`` chars."""
    line = body.strip().split("\n", 1)[0].strip()
    m = re.search(r"(?<=[a-z0-9)\]])[.:](?=\s|$)", line) if cut else None
    if m and m.start() < limit:
        line = line[: m.start() + 1]
    if len(line) > limit:
        line = line[:limit].rsplit(" ", 1)[0].rstrip(",;:") + "\u2026"
    return line


def parse_sections(text: str) -> list[ParsedSection]:
    """Split a document's plain text into located sections.

    Input: the raw text of one Approved Document. Output: sections in document
    order, ``position`` 0..n-1, locators unique. Rules applied:

    * the text is first passed through :func:`clean_text`;
    * a paragraph starts where a line begins with a number (``2.1``, ``2C12``,
      ``A1.1``, ``B.2``, ``B11``) followed by whitespace and a capital or an
      opening quote, or by a lower-case word or a figure when the line reads as
      prose (at least four words, not opening with another paragraph number:
      "5.5 requirement if it is built as follows", "3.15  75mm and 100mm
      rainwater drains"), or mid-line where such a number follows a word (not a
      reference word like "paragraph"/"Table"/"and") and is followed by two
      spaces and a capitalised word; ``x.0`` (x > 0) and absurd chapters are
      rejected; candidates must then fit the monotonic number sequence
      (see ``_sequence_filter``) — this is what rejects "1.5 m" style cells;
    * a caption starts at ``Table|Diagram|Figure <number>`` followed by a
      capitalised title, at a line start (or glued to a running header) or
      mid-line with two spaces; "(continued)" captions are not new sections;
    * contents-list entries (short line ending in leaders/spaces + page number)
      are ignored; for a repeated paragraph number the occurrence with the
      longest text wins (ties: first) but one opening with a capital beats one
      opening lower-case or with a figure, for a repeated caption the first wins;
    * a section's text runs from after its label to the next kept start.
      ``heading`` is the caption line for tables/diagrams, the first sentence
      (<= 100 chars) for paragraphs.

    Raises nothing for ``str`` input; returns ``[]`` when nothing is located.
    """
    clean = clean_text(text)
    cands = _candidates(clean)
    for i, c in enumerate(cands):
        end = cands[i + 1].start if i + 1 < len(cands) else len(clean)
        c.length = len(clean[c.body : end].strip())
        line_end = clean.find("\n", c.start)
        line = clean[c.start : line_end if line_end >= 0 else len(clean)]
        c.toc = c.length < 120 and bool(_TOC_LINE.match(line))
    cands = [c for c in cands if not c.toc]
    paras = _sequence_filter([c for c in cands if c.kind == "para"])
    best: dict[str, _Cand] = {}
    for c in paras + [c for c in cands if c.kind != "para"]:
        cur = best.get(c.locator)
        if cur is None or (
            c.kind == "para" and (not c.prose, c.length) > (not cur.prose, cur.length)
        ):
            best[c.locator] = c
    kept = sorted(best.values(), key=lambda c: c.start)
    sections = []
    for i, c in enumerate(kept):
        end = kept[i + 1].start if i + 1 < len(kept) else len(clean)
        body = clean[c.body : end].strip()
        if c.kind == "para":
            heading = _summary(body)
        else:
            cap_end = next((k.start for k in cands if c.start < k.start < end), end)
            heading = _summary(clean[c.body : cap_end].split("\n", 1)[0], limit=200, cut=False)
        sections.append(ParsedSection(c.locator, heading, body, i))
    return sections


# --------------------------------------------------------------------------- documents

_FILE_ID = re.compile(
    r"(?i)(?:approved[\s_-]*document|\bad)[\s_-]*(?P<part>[a-z]|\d{1,2})(?![a-z])"
    r"(?:[\s_-]*(?:vol(?:ume)?|v)[\s_.-]*(?P<vol>\d))?"
)


def guess_document_meta(filename: str, text: str) -> dict:
    """Guess a document's identity from its file name and text.

    Returns ``{"doc_id": "ADB-V1", "title": "Approved Document B Volume 1",
    "part": "B", "volume": 1, "edition": 2019 | None, "kind":
    "approved_document", "filename": <basename>}``. The part/volume come from
    the file name (``Text-Approved_Document_B_vol_1-Content.txt``, ``ADF-V2.txt``)
    or else the first "Approved Document X" in the text; the edition is the
    most frequent year in "Approved Document X[ Volume N], YYYY edition" for
    that document. Raises ValueError if no part letter can be found.
    """
    name = Path(filename).name
    m = _FILE_ID.search(Path(filename).stem)
    if m is None:
        m = re.search(
            r"Approved Document (?P<part>[A-Z]|\d{1,2})\b(?:,? Volume (?P<vol>\d))?", text
        )
    if m is None:
        raise ValueError(f"cannot tell which Approved Document {filename!r} is")
    part = m["part"].upper()
    vol = int(m["vol"]) if m["vol"] else None
    title = f"Approved Document {part}" + (f" Volume {vol}" if vol else "")
    vol_re = rf"\s+Volume\s+{vol}" if vol else r"(?:\s+Volume\s+\d)?"
    years = re.findall(rf"Approved\s+Document\s+{part}{vol_re},\s+((?:19|20)\d\d)\s+edition", text)
    edition = int(Counter(years).most_common(1)[0][0]) if years else None
    return {
        "doc_id": f"AD{part}" + (f"-V{vol}" if vol else ""),
        "title": title,
        "part": part,
        "volume": vol,
        "edition": edition,
        "kind": "approved_document",
        "filename": name,
    }


def index_files(paths) -> dict[str, tuple[dict, list[ParsedSection]]]:
    """Read and index documents: ``{doc_id: (meta, sections)}``.

    ``paths``: iterable of text-file paths (UTF-8). Raises ValueError when two
    files map to the same doc_id or a file's document cannot be identified;
    OSError/UnicodeDecodeError propagate.
    """
    out: dict[str, tuple[dict, list[ParsedSection]]] = {}
    for path in sorted(Path(p) for p in paths):
        text = path.read_text(encoding="utf-8")
        meta = guess_document_meta(path.name, text)
        if meta["doc_id"] in out:
            raise ValueError(
                f"{path} and {out[meta['doc_id']][0]['filename']} are both {meta['doc_id']}"
            )
        out[meta["doc_id"]] = (meta, parse_sections(text))
    return out
