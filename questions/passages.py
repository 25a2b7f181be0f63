"""Quotes within located passages: where a key entry's quote lies, and what to keep.

Pure functions (no Django import) on top of questions.sources' folding:
:func:`locate_quote` is the one answer to "is the quote in the cited passage, and if
not, which passages hold it" (the review item page, review.selectors.passage_for_entry,
and triage's citation checks, review.citation_checks); :func:`keep_quoted_passages`
decides which stored passages `import_sources` keeps when it re-indexes a document.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from questions.sources import ParsedSection, fold, normalise_locator, quote_span

__all__ = ["QuoteLocation", "keep_quoted_passages", "locate_quote"]


_ELLIPSIS = re.compile(r"\s*(?:\.\s*\.\s*\.|\u2026|\[\s*\.\.\.\s*\])\s*")


@functools.lru_cache(maxsize=1024)
def _quote_parts(quote: str) -> tuple[str, ...]:
    """Split a quote at its ellipses ("...", "…", "[...]") into the non-blank parts.

    Cached: the item page asks it of one quote against every passage of a document.
    """
    return tuple(p for p in _ELLIPSIS.split(quote) if fold(p))


def _span_in(text: str, quote: str) -> tuple[int, int] | None:
    """Return the [start, end) of ``quote`` in ``text``; an elided quote's parts in order."""
    span = quote_span(text, quote)
    parts = _quote_parts(quote)
    if span is not None or len(parts) < 2:
        return span
    start = end = None
    offset = 0
    for part in parts:
        found = quote_span(text[offset:], part)
        if found is None:
            return None
        start = offset + found[0] if start is None else start
        end = offset + found[1]
        offset = end
    return (start, end) if start is not None and end is not None else None


@dataclass(frozen=True)
class QuoteLocation:
    """Where a key entry's quote lies.

    ``span``: [start, end) in the cited passage's text, or None when the quote is not
    there; ``elsewhere``: the locators of the other passages that contain it (document
    order; searched only when ``span`` is None).
    """

    span: tuple[int, int] | None
    elsewhere: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        return self.span is not None


def locate_quote(quote: str, passage: str | None, others=()) -> QuoteLocation:
    """Find ``quote`` in the cited ``passage`` and, failing that, in the ``others``.

    ``passage``: the cited passage's text, or None when the locator was not found;
    ``others``: an iterable of (locator, text) of the document's other passages, read
    only when the quote is not in ``passage``. Matching is :func:`quote_span`'s
    (folded: case, whitespace, ligatures, quotes and dashes do not matter); a quote
    elided with "...", "…" or "[...]" matches when its parts occur in order. Returns a
    :class:`QuoteLocation`; a blank quote is never found. Never raises for ``str``.
    """
    if not fold(quote):
        return QuoteLocation(None)
    span = _span_in(passage, quote) if passage else None
    if span is not None:
        return QuoteLocation(span)
    return QuoteLocation(None, tuple(loc for loc, text in others if _contains(text, quote)))


@functools.lru_cache(maxsize=4096)
def _folded(text: str, drop_spaces: bool) -> str:
    """Cached :func:`fold`: a document's passages are folded once, not once per quote."""
    return fold(text, drop_spaces=drop_spaces)


def _contains(text: str, quote: str) -> bool:
    """Return ``_span_in(text, quote) is not None``, with the passage's folding cached."""
    for drop in (False, True):
        needle = _folded(quote, drop)  # one quote against many passages: folded once
        if needle and needle in _folded(text, drop):
            return True
    return len(_quote_parts(quote)) > 1 and _span_in(text, quote) is not None


def keep_quoted_passages(
    parsed: list[ParsedSection],
    stored: list[tuple[str, str, str]],
    quotes: list[tuple[str, str, str]],
) -> tuple[list[ParsedSection], list[dict]]:
    """Merge a re-index of a document with its stored passages, never losing a cited quote.

    ``parsed``: the new passages (document order); ``stored``: the stored passages as
    (locator, heading, text) in document order; ``quotes``: the key's citations of this
    document as (locator, quote, label), label naming who cites it (e.g. "Q012 in
    original"). For each cited locator (matched exact or :func:`normalise_locator`)
    whose stored passage holds the quote (:func:`locate_quote`) while the new passage
    does not, or is missing, the stored passage is kept: it replaces the new one, or
    is inserted after the last new passage whose locator preceded it in the stored
    order (first when it was first, last when none of those is in the new text). Returns (passages with ``position``
    renumbered 0..n-1, [{"locator", "cited_by", "why"}] one per passage kept).
    Never raises for well-formed input.
    """

    def norm(loc: str) -> str:
        try:
            return normalise_locator(loc)
        except ValueError:
            return loc

    out = list(parsed)
    kept: list[dict] = []
    stored_at = {norm(loc): i for i, (loc, _h, _t) in enumerate(stored)}
    for locator, quote, label in quotes:
        i = stored_at.get(norm(locator))
        if i is None or not locate_quote(quote, stored[i][2]).found:
            continue
        if any(k["locator"] == stored[i][0] for k in kept):
            kept[[k["locator"] for k in kept].index(stored[i][0])]["cited_by"].append(label)
            continue
        new_at = next((k for k, p in enumerate(out) if norm(p.locator) == norm(locator)), None)
        if new_at is not None and locate_quote(quote, out[new_at].text).found:
            continue
        old = ParsedSection(stored[i][0], stored[i][1], stored[i][2], 0)
        if new_at is not None:
            out[new_at] = old
            why = "the new text's passage does not hold the cited quote"
        else:
            prev = {norm(loc) for loc, _h, _t in stored[:i]}
            after = max((k for k, p in enumerate(out) if norm(p.locator) in prev), default=None)
            out.insert(0 if not prev else len(out) if after is None else after + 1, old)
            why = "the new text has no passage at this locator"
        kept.append({"locator": stored[i][0], "cited_by": [label], "why": why})
    return [ParsedSection(p.locator, p.heading, p.text, n) for n, p in enumerate(out)], kept
