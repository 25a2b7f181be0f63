"""The errata register: every correction and removal of each published key edition (issue 22).

An *erratum* is a key entry of a published edition that has a parent (every edition after
the original): the edition's own row for a question, against the question's effective
entry in the parent (`questions.selectors.key_entries_for_edition`, the one rule of
inheritance). It is a *removal* when the new entry takes the question out of scoring
(`removed=True`), a *correction* otherwise. It took effect when its edition was published.
Its stable id is `<benchmark>/<edition>/<question>`. Draft editions have no errata: a
draft is not public and may still change.

The entry's free-text `note` is a reviewer's working note and is not part of an erratum;
the reason is the error taxonomy's code (`KeyEntry.Reason`) and its label.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime

from questions.errors import NotFoundError
from questions.models import Benchmark, KeyEdition, KeyEntry
from questions.selectors import key_entries_for_edition


@dataclass(frozen=True)
class Erratum:
    """One correction or removal, with the key entry before and after it."""

    id: str  # "<benchmark>/<edition>/<question>"
    benchmark: str
    edition: str
    parent_edition: str
    kind: str  # "correction" | "removal"
    question_id: str
    question_text: str
    old_answer: str
    new_answer: str
    old_citation: str
    new_citation: str
    old_quote: str
    new_quote: str
    reason: str  # KeyEntry.Reason code, "" when none was given
    reason_label: str
    took_effect: datetime  # the edition's published_at (timezone-aware)

    def to_dict(self) -> dict:
        """Return the erratum as JSON-ready values (`took_effect` as ISO 8601)."""
        doc = asdict(self)
        doc["took_effect"] = self.took_effect.isoformat()
        return doc


_REASONS = dict(KeyEntry.Reason.choices)


def _citation(entry: KeyEntry | None) -> str:
    if entry is None or entry.removed:
        return ""
    return entry.citation_label()


def errata_for_edition(edition: KeyEdition) -> list[Erratum]:
    """Return the errata of one published edition, ordered by question id.

    Empty for a draft edition and for an edition without a parent (the original key has
    nothing to correct). Four queries: the edition's entries, the parent's tree and its
    effective entries for those questions.
    """
    if not edition.is_published() or edition.parent_id is None:
        return []
    own = list(
        KeyEntry.objects.filter(edition=edition)
        .select_related("question", "citation_document")
        .order_by("question__question_id")
    )
    parent = edition.parent
    before = key_entries_for_edition(
        parent, question_ids=[e.question_id for e in own], select_related=("citation_document",)
    )
    errata = []
    for entry in own:
        old = before.get(entry.question_id)
        errata.append(
            Erratum(
                id=f"{edition.benchmark.name}/{edition.name}/{entry.question.question_id}",
                benchmark=edition.benchmark.name,
                edition=edition.name,
                parent_edition=parent.name,
                kind="removal" if entry.removed else "correction",
                question_id=entry.question.question_id,
                question_text=entry.question.text,
                old_answer="" if old is None else old.answer,
                new_answer="" if entry.removed else entry.answer,
                old_citation=_citation(old),
                new_citation=_citation(entry),
                old_quote="" if old is None else old.citation_quote,
                new_quote="" if entry.removed else entry.citation_quote,
                reason=entry.reason,
                reason_label=_REASONS.get(entry.reason, entry.reason),
                took_effect=edition.published_at,
            )
        )
    return errata


def errata_register(benchmark: Benchmark) -> list[Erratum]:
    """Return every erratum of `benchmark`'s published editions, newest edition first."""
    editions = (
        KeyEdition.objects.filter(
            benchmark=benchmark, status=KeyEdition.Status.PUBLISHED, parent__isnull=False
        )
        .select_related("benchmark", "parent")
        .order_by("-published_at", "-id")
    )
    return [e for edition in editions for e in errata_for_edition(edition)]


def erratum_get(benchmark: Benchmark, edition_name: str, question_id: str) -> Erratum:
    """Return the erratum `<benchmark>/<edition_name>/<question_id>`.

    Raises NotFoundError when the edition is unknown or unpublished, or has no entry of
    its own for that question.
    """
    edition = (
        KeyEdition.objects.filter(
            benchmark=benchmark, name=edition_name, status=KeyEdition.Status.PUBLISHED
        )
        .select_related("benchmark", "parent")
        .first()
    )
    if edition is None:
        raise NotFoundError(f"{benchmark.name} has no published key edition {edition_name!r}")
    for erratum in errata_for_edition(edition):
        if erratum.question_id == question_id:
            return erratum
    raise NotFoundError(
        f"key edition {edition_name!r} of {benchmark.name} has no erratum for {question_id!r}"
    )
