"""Citation checks: does each key entry's citation say what the key says? (issue 17 item 3)

Methodology rule 5 lists what a reviewer checks against the cited source; triage runs
the checks a machine can make on every key entry whose cited document has indexed text
(Section rows, from a bundle's sections.jsonl or `import_sources`):

- ``unknown_document``: the cited document is not among the benchmark's documents;
- ``superseded`` / ``withdrawn``: the cited edition is not in force
  (SourceDocument.is_in_force; names the edition that supersedes it);
- ``locator_not_found``: the locator is not among the document's passages (exact or
  questions.sources.normalise_locator); names the nearest locators
  (questions.sources.nearest_locators) and the passages that hold the quote;
- ``quote_not_in_passage``: the quote is not in the cited passage
  (questions.passages.locate_quote, the function the item page uses); names the
  passages that hold it, if any;
- ``figure_not_in_passage``: a figure of the key answer (a number with a unit, parsed
  by judges.figures, units converted: "1.1 m" is "1100 mm") is stated nowhere
  in the cited passage; names the passage's figures of the same dimension, if any;
  (when the stored passage stops mid-sentence or mid-list, :func:`excerpt_cut_off`, the
  finding carries "excerpt_ends" and says "not found in the stored excerpt, which ends
  at ...", since the figure may be in the part not stored; likewise a quote);
- ``figure_limit_reversed``: a figure of the key answer is stated in the passage, but
  as the opposite limit (the key says "a maximum of 1200mm", the passage "at least
  1200mm"; limit directions by judges.figures).

No threshold is involved: every check is a yes/no fact about the text (a figure matches
when it equals a passage figure after unit conversion, within float rounding:
Figure.matches). Bare numbers are not compared (a "2" may be a class, a count or a
list item). An entry whose document has no indexed text is counted "not checked";
a document's status is checked whether or not its text is indexed.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from judges.figures import Figure, extract_figures
from questions.models import KeyEntry, Section
from questions.passages import locate_quote
from questions.sources import nearest_locators, normalise_locator

QUOTE_SHOWN = 120  # characters of the quote repeated in evidence (the item page shows it all)


def _normalised(locator: str) -> str:
    try:
        return normalise_locator(locator)
    except ValueError:
        return locator


class IndexedDocument:
    """One document's passages: (locator, text) in document order and a locator lookup."""

    def __init__(self) -> None:
        self.passages: list[tuple[str, str]] = []
        self.by_locator: dict[str, int] = {}

    def add(self, locator: str, text: str) -> None:
        self.by_locator.setdefault(locator, len(self.passages))
        self.by_locator.setdefault(_normalised(locator), len(self.passages))
        self.passages.append((locator, text))

    def find(self, locator: str) -> int | None:
        """Return the index of the passage at ``locator`` (exact, then normalised), or None."""
        hit = self.by_locator.get(locator)
        return hit if hit is not None else self.by_locator.get(_normalised(locator))

    def others(self, index: int | None):
        return ((loc, text) for i, (loc, text) in enumerate(self.passages) if i != index)


def load_documents(doc_pks: set[int]) -> dict[int, IndexedDocument]:
    """Return {document pk: IndexedDocument} of the documents' indexed passages (one query)."""
    docs: dict[int, IndexedDocument] = defaultdict(IndexedDocument)
    for doc_pk, locator, text in (
        Section.objects.filter(document_id__in=doc_pks)
        .order_by("document_id", "position", "id")
        .values_list("document_id", "locator", "text")
    ):
        docs[doc_pk].add(locator, text)
    return dict(docs)


def figure_findings(answer: str, passage: str) -> list[dict[str, Any]]:
    """Return one finding per figure of ``answer`` that ``passage`` does not state as the key does.

    Figures are numbers with units (judges.figures.extract_figures; bare numbers
    are skipped); a figure is stated when it equals one of the passage's figures after
    unit conversion (Figure.matches). Findings, each distinct answer figure once:

    - {"problem": "figure_not_in_passage", "figure": "900 mm", "passage_figures":
      ["800 mm", ...]}: not stated; the passage's distinct figures of the same
      dimension, in reading order (empty when it gives none);
    - {"problem": "figure_limit_reversed", "figure": "1200 mm", "key_limit": "max",
      "passage_limit": "min"}: stated, but the key gives it as a maximum ("not more
      than", "a maximum of") where every statement of it in the passage is a minimum, or
      the reverse (the parser's limit direction; a figure with no direction on either
      side is never reversed).
    """
    stated = extract_figures(passage)
    found: list[dict[str, Any]] = []
    seen: list[Figure] = []
    for fig in extract_figures(answer):
        if fig.dim is None or any(fig.matches(s) for s in seen):
            continue
        seen.append(fig)
        same_value = [s for s in stated if fig.matches(s)]
        if not same_value:
            same: list[str] = []
            for s in stated:
                if s.dim == fig.dim and s.label() not in same:
                    same.append(s.label())
            found.append(
                {"problem": "figure_not_in_passage", "figure": fig.label(), "passage_figures": same}
            )
        elif fig.direction and all(
            s.direction and s.direction != fig.direction for s in same_value
        ):
            found.append(
                {
                    "problem": "figure_limit_reversed",
                    "figure": fig.label(),
                    "key_limit": fig.direction,
                    "passage_limit": same_value[0].direction,
                }
            )
    return found


EXCERPT_END_SHOWN = 60  # characters of a cut-off excerpt's end quoted in evidence
_CUT_OFF_WORD_RE = re.compile(
    r"(?:\b(?:or|and|nor|but|then|of|the|a|an|to|with)|[;,:\-–—])\s*$", re.I
)
_ENDS_SENTENCE_RE = re.compile(r"[.!?][)\]\"'”’]*\s*$")


def excerpt_cut_off(passage: str) -> str | None:
    """Return the end of a stored passage that stops mid-sentence or mid-list, else None.

    A passage whose text ends without sentence-final punctuation (. ! ?, optionally
    closed by a bracket or quote), or ends on a joining word or mark ("; or", "and",
    ",", ":"), is an excerpt cut short: what is absent from it may be in the part not
    stored. The result is its last EXCERPT_END_SHOWN characters, whitespace collapsed,
    with "…" in front when shortened.
    """
    text = re.sub(r"\s+", " ", passage or "").strip()
    if not text or (_ENDS_SENTENCE_RE.search(text) and not _CUT_OFF_WORD_RE.search(text)):
        return None
    tail = text[-EXCERPT_END_SHOWN:]
    return tail if len(text) <= EXCERPT_END_SHOWN else "…" + tail.lstrip()


def check_entry(entry: KeyEntry, document: IndexedDocument | None) -> list[dict[str, Any]]:
    """Return the failed checks of one key entry whose cited document is indexed.

    ``document``: the cited document's passages, or None when it has none indexed (then
    only the edition's status is checked). Each failure is a dict with "doc_id",
    "problem" and what was found (see the module docstring); [] when every check passes.
    """
    doc = entry.citation_document
    failures: list[dict[str, Any]] = []
    if not doc.is_in_force():
        failures.append(
            {
                "doc_id": doc.doc_id,
                "document_edition": doc.edition,
                "problem": doc.status,
                "superseded_by": doc.superseded_by.doc_id if doc.superseded_by_id else None,
            }
        )
    if document is None or not entry.citation_locator:
        return failures
    index = document.find(entry.citation_locator)
    quote = entry.citation_quote or ""
    where = locate_quote(quote, document.passages[index][1] if index is not None else None, ())
    if index is None or not where.found:
        where = locate_quote(quote, None, document.others(index))
    if index is None:
        failures.append(
            {
                "doc_id": doc.doc_id,
                "locator": entry.citation_locator,
                "problem": "locator_not_found",
                "nearest": nearest_locators(
                    entry.citation_locator, [loc for loc, _ in document.passages]
                ),
                "quote_found_in": list(where.elsewhere),
            }
        )
        return failures
    locator, passage = document.passages[index]
    # Absent from a cut-off excerpt is not absent from the document: say where it ends.
    cut = excerpt_cut_off(passage)
    cut_off = {"excerpt_ends": cut} if cut else {}
    if quote and not where.found:
        failures.append(
            {
                "doc_id": doc.doc_id,
                "locator": locator,
                "problem": "quote_not_in_passage",
                "quote": quote[:QUOTE_SHOWN],
                "found_in": list(where.elsewhere),
            }
            | cut_off
        )
    for finding in figure_findings(entry.answer or "", passage):
        if finding["problem"] == "figure_not_in_passage":
            finding |= cut_off
        failures.append({"doc_id": doc.doc_id, "locator": locator} | finding)
    return failures


def citation_findings(
    entries: dict[int, KeyEntry],
) -> tuple[list[tuple[int, dict[str, Any]]], dict[str, Any]]:
    """Run the citation checks on key entries: ({question pk: entry} -> findings, summary).

    ``entries`` need ``citation_document`` (and its ``superseded_by``) loaded or loadable.
    Returns ([(question pk, failure detail)] in question order, summary) where summary is
    {"checked": entries whose document text is indexed, "not_checked": entries citing a
    document with no indexed text (status still checked), "no_citation": entries citing
    nothing, "failed": {problem: count}}. Two queries plus one per superseded document.
    """
    cited = {e.citation_document_id for e in entries.values() if e.citation_document_id}
    documents = load_documents(cited)
    found: list[tuple[int, dict[str, Any]]] = []
    summary: dict[str, Any] = {"checked": 0, "not_checked": 0, "no_citation": 0, "failed": {}}
    for qpk in sorted(entries):
        entry = entries[qpk]
        if not entry.has_citation or not entry.citation_doc_id:
            summary["no_citation"] += 1
            continue
        if entry.citation_document is None:
            failures = [{"doc_id": entry.citation_doc_id, "problem": "unknown_document"}]
            summary["not_checked"] += 1
        else:
            document = documents.get(entry.citation_document_id)
            summary["checked" if document is not None else "not_checked"] += 1
            failures = check_entry(entry, document)
        for detail in failures:
            found.append((qpk, detail))
            summary["failed"][detail["problem"]] = summary["failed"].get(detail["problem"], 0) + 1
    return found, summary


def _names(locators: list[str]) -> str:
    return ", ".join(locators[:5]) + (f" and {len(locators) - 5} more" if len(locators) > 5 else "")


def describe(detail: dict[str, Any]) -> str:
    """Return one failed check's evidence detail in words (British English), for pages and lists.

    ``detail``: a failure dict from :func:`check_entry` / :func:`citation_findings`.
    Unknown problems are shown as "<doc_id>: <problem>". Never raises for a dict.
    """
    doc, loc, problem = detail.get("doc_id", "?"), detail.get("locator", "?"), detail.get("problem")
    if problem == "unknown_document":
        return f"Cited document {doc} is not among the benchmark's source documents"
    if problem in ("superseded", "withdrawn"):
        text = f"Cited edition of {doc} ({detail.get('document_edition') or 'edition not stated'})"
        text += f" is {problem}"
        return text + (f" by {detail['superseded_by']}" if detail.get("superseded_by") else "")
    if problem == "locator_not_found":
        text = f"Locator {loc} is not in {doc}"
        if detail.get("nearest"):
            text += f"; nearest: {_names(detail['nearest'])}"
        if detail.get("quote_found_in"):
            text += f"; the quoted words are in {_names(detail['quote_found_in'])}"
        return text
    cut = detail.get("excerpt_ends")
    where = f'the stored excerpt of {doc} {loc}, which ends at "{cut}"' if cut else ""
    if problem == "quote_not_in_passage":
        if detail.get("found_in"):
            return f"Quoted words are not in {doc} {loc} but in {_names(detail['found_in'])}"
        if cut:
            return f"Quoted words are not found in {where}, nor anywhere else stored for {doc}"
        return f"Quoted words are not in {doc} {loc}, nor anywhere else in {doc}"
    if problem == "figure_not_in_passage":
        if cut:
            text = f"Key answer's {detail.get('figure')} is not found in {where}"
            if detail.get("passage_figures"):
                text += f"; it gives {_names(detail['passage_figures'])}"
            return text
        text = f"Key answer's {detail.get('figure')} is not stated in {doc} {loc}"
        if detail.get("passage_figures"):
            text += f", which gives {_names(detail['passage_figures'])}"
        return text
    if problem == "figure_limit_reversed":
        words = {"min": "a minimum", "max": "a maximum"}
        key_limit, passage_limit = detail.get("key_limit"), detail.get("passage_limit")
        return (
            f"Key answer gives {detail.get('figure')} as {words.get(key_limit, key_limit)}; "
            f"{doc} {loc} gives it as {words.get(passage_limit, passage_limit)}"
        )
    return f"{doc}: {problem}"
