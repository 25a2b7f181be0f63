"""Cited passages for the decision and approval pages (issue 18 items 2 and 4).

- :func:`highlight` splits a passage into segments, marking the quote (found by
  questions.passages.locate_quote, the rule the item page and triage use) and the key
  answer's figures (judges.figures: a passage figure equal to one of the
  answer's after unit conversion, Figure.matches).
- :func:`successor_passage`: for a key entry citing a superseded or withdrawn edition,
  the passage of the edition in force at the same locator, or the nearest locator
  (questions.sources.nearest_locators) when that one does not exist.
- :func:`cited_passages`: the passages of several citations (the approvals page's
  proposals and the key entries they change) in three queries whatever their number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from judges.figures import extract_figures
from questions.models import KeyEntry, Section, SourceDocument
from questions.passages import locate_quote
from questions.selectors import section_for_locator
from questions.sources import nearest_locators
from review.citation_checks import load_documents

__all__ = [
    "Citation",
    "CitedPassage",
    "Segment",
    "SuccessorPassage",
    "cited_passages",
    "highlight",
    "successor_passage",
]

MAX_SUCCESSOR_HOPS = 10  # editions followed along superseded_by before giving up (a cycle)


class Segment(NamedTuple):
    """A run of passage text; `mark` is "" (plain), "quote" or "figure"."""

    text: str
    mark: str = ""


def highlight(text: str, *, quote: str = "", answer: str = "") -> list[Segment]:
    """Split `text` into segments with the quote and the answer's figures marked.

    The quote is located by questions.passages.locate_quote (folded matching; an elided
    quote spans from its first part to its last). A figure of `text` is marked when it
    states a figure of `answer` (numbers with units, units converted: "1.1 m" marks
    "1100 mm"; bare numbers are never marked, as in review.citation_checks); figures
    inside the quote are left to the quote's mark. Returns [] for an empty text, else
    segments whose texts join to `text`. Never raises for strings.
    """
    if not text:
        return []
    spans: list[tuple[int, int, str]] = []
    located = locate_quote(quote, text) if quote else None
    if located is not None and located.span:
        spans.append((*located.span, "quote"))
    wanted = [f for f in extract_figures(answer or "") if f.dim is not None]
    if wanted:
        for fig in extract_figures(text):
            if fig.dim is None or not any(fig.matches(w) for w in wanted):
                continue
            if not any(s < fig.end and fig.start < e for s, e, _ in spans):
                spans.append((fig.start, fig.end, "figure"))
    spans.sort()
    segments: list[Segment] = []
    at = 0
    for start, end, mark in spans:
        if start > at:
            segments.append(Segment(text[at:start]))
        segments.append(Segment(text[start:end], mark))
        at = end
    if at < len(text):
        segments.append(Segment(text[at:]))
    return segments


def _marks(segments: list[Segment], mark: str) -> bool:
    return any(s.mark == mark for s in segments)


@dataclass
class SuccessorPassage:
    """The edition in force's passage beside a superseded or withdrawn citation.

    `cited`: the cited document (not in force); `successor`: the edition in force it
    leads to along SourceDocument.superseded_by, or None when none is in the database;
    `locator`: the cited locator; `section`: the successor's passage at that locator
    (`same_locator` True) or at the nearest one (False), None when the successor has no
    indexed passages (`indexed` False); `segments`: its text, quote and figures marked.
    """

    cited: SourceDocument
    successor: SourceDocument | None = None
    locator: str = ""
    section: Section | None = None
    same_locator: bool = False
    indexed: bool = True
    segments: list[Segment] = field(default_factory=list)

    @property
    def quote_found(self) -> bool:
        return _marks(self.segments, "quote")

    @property
    def figure_found(self) -> bool:
        return _marks(self.segments, "figure")


def _in_force_successor(document: SourceDocument) -> SourceDocument | None:
    """Follow superseded_by to an edition in force; None when the chain ends before one."""
    seen = {document.pk}
    doc = document.superseded_by if document.superseded_by_id else None
    for _ in range(MAX_SUCCESSOR_HOPS):
        if doc is None or doc.pk in seen:
            return None
        if doc.is_in_force():
            return doc
        seen.add(doc.pk)
        doc = doc.superseded_by if doc.superseded_by_id else None
    return None


def successor_passage(entry: KeyEntry | None) -> SuccessorPassage | None:
    """Return the successor edition's passage for an entry citing an edition not in force.

    None when the entry cites nothing, an unknown document or an edition in force. The
    successor is the first edition in force along superseded_by (a chain of superseded
    editions is followed; a withdrawn edition usually has none). The passage is the
    successor's at the cited locator (exact, then normalised: section_for_locator), else
    at the first of questions.sources.nearest_locators. Its quote and the key answer's
    figures are marked (:func:`highlight`). Two to five queries.
    """
    if entry is None or not entry.has_citation or entry.citation_document is None:
        return None
    cited = entry.citation_document
    if cited.is_in_force():
        return None
    found = SuccessorPassage(cited=cited, locator=entry.citation_locator or "")
    found.successor = _in_force_successor(cited)
    if found.successor is None:
        return found
    section = section_for_locator(found.successor, found.locator) if found.locator else None
    found.same_locator = section is not None
    if section is None:
        available = list(
            Section.objects.filter(document=found.successor)
            .order_by("position", "id")
            .values_list("locator", flat=True)
        )
        found.indexed = bool(available)
        nearest = nearest_locators(found.locator, available, n=1) if available else []
        if nearest:
            section = Section.objects.get(document=found.successor, locator=nearest[0])
    found.section = section
    if section is not None:
        found.segments = highlight(
            section.text, quote=entry.citation_quote or "", answer=entry.answer or ""
        )
    return found


class Citation(NamedTuple):
    """A citation to show: document id, locator, quote and the answer whose figures to mark."""

    benchmark_id: int
    doc_id: str
    locator: str
    quote: str = ""
    answer: str = ""


@dataclass
class CitedPassage:
    """One citation's passage. `status`: "found", "not_found" (the locator is not in the
    document's index), "not_indexed" (the document has no passages) or
    "unknown_document"; `locator` is the passage's own spelling when found."""

    citation: Citation
    status: str
    document: SourceDocument | None = None
    locator: str = ""
    segments: list[Segment] = field(default_factory=list)

    @property
    def quote_found(self) -> bool:
        return _marks(self.segments, "quote")


def cited_passages(citations: list[Citation]) -> dict[Citation, CitedPassage]:
    """Return {citation: CitedPassage} for citations naming a document (others left out).

    Locators match exact, then normalised (review.citation_checks.load_documents, the
    index triage uses). Two queries whatever the number of citations (documents, then
    their passages).
    """
    named = {c for c in citations if c.doc_id}
    if not named:
        return {}
    documents = {
        (d.benchmark_id, d.doc_id): d
        for d in SourceDocument.objects.filter(
            benchmark_id__in={c.benchmark_id for c in named},
            doc_id__in={c.doc_id for c in named},
        )
    }
    indexed = load_documents({d.pk for d in documents.values()})
    out: dict[Citation, CitedPassage] = {}
    for citation in named:
        document = documents.get((citation.benchmark_id, citation.doc_id))
        if document is None:
            out[citation] = CitedPassage(citation, "unknown_document")
            continue
        passages = indexed.get(document.pk)
        at = passages.find(citation.locator) if passages and citation.locator else None
        if passages is None:
            out[citation] = CitedPassage(citation, "not_indexed", document)
        elif at is None:
            out[citation] = CitedPassage(citation, "not_found", document)
        else:
            locator, text = passages.passages[at]
            segments = highlight(text, quote=citation.quote, answer=citation.answer)
            out[citation] = CitedPassage(citation, "found", document, locator, segments)
    return out


@dataclass
class ProposalPassages:
    """The passages beside one proposal on the approvals page.

    `proposed`: the correction's citation (None for a confirmation, a removal or a
    correction citing nothing); `current`: the key entry's citation when it differs from
    the proposed one (doc, locator or quote), or always for a confirmation or removal.
    """

    proposed: CitedPassage | None = None
    current: CitedPassage | None = None


def _entry_citation(entry: KeyEntry | None, benchmark_id: int) -> Citation | None:
    if entry is None or not entry.has_citation or not entry.citation_doc_id:
        return None
    return Citation(
        benchmark_id,
        entry.citation_doc_id,
        entry.citation_locator or "",
        entry.citation_quote or "",
        entry.answer or "",
    )


def _pairs_found(pairs: dict) -> dict:
    """{key: (new Citation | None, old Citation | None)} -> {key: ProposalPassages}, an old
    citation equal to the new one in document, locator and quote shown once (as the new)."""
    for key, (new, old) in list(pairs.items()):
        if new is not None and old is not None and old[1:4] == new[1:4]:
            pairs[key] = (new, None)
    found = cited_passages([c for pair in pairs.values() for c in pair if c is not None])
    return {
        key: ProposalPassages(found.get(new), found.get(old)) for key, (new, old) in pairs.items()
    }


def proposal_passages(proposals) -> dict[int, ProposalPassages]:
    """Return {proposal pk: ProposalPassages} for a page of proposals in two queries.

    Proposals need `item` and `base_entry` loaded (review.selectors.pending_proposals).
    The proposed passage marks the proposal's quote and its answer's figures; the
    current one the key entry's.
    """
    pairs = {}
    for p in proposals:
        proposed = None
        if p.action == "correct" and p.citation_doc_id:
            proposed = Citation(
                p.item.benchmark_id,
                p.citation_doc_id,
                p.citation_locator,
                p.citation_quote,
                p.answer,
            )
        pairs[p.pk] = (proposed, _entry_citation(p.base_entry, p.item.benchmark_id))
    return _pairs_found(pairs)


def change_passages(changes, benchmark_id: int) -> dict[int, ProposalPassages]:
    """Return {question pk: ProposalPassages} for an edition's changes (review.selectors.
    edition_changes): `proposed` the new entry's citation (none for a removal), `current`
    the parent's when it differs. Two queries."""
    pairs = {}
    for c in changes:
        new = None if c.new.removed else _entry_citation(c.new, benchmark_id)
        pairs[c.question.pk] = (new, _entry_citation(c.old, benchmark_id))
    return _pairs_found(pairs)
