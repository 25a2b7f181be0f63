"""Import steps for the key editions after `original`: identical where stored, new ones
published on top of the chain."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from interchange.bundles.data import KeyRow
from interchange.bundles.import_base import KEY_FIELDS, REVIEW_HINT
from interchange.bundles.import_history import HistorySteps
from interchange.bundles.rows import ORIGINAL
from questions.models import (
    KeyEdition,
    KeyEntry,
)
from questions.selectors import key_entries_for_edition


class EditionSteps(HistorySteps):
    """The steps that check stored key editions and publish the new ones."""

    def _entry(self, edition: KeyEdition, row: KeyRow) -> KeyEntry:
        c = row.citation
        return KeyEntry(
            edition=edition,
            question_id=self.question_pk[row.question_id],
            answer=row.answer,
            citation_document_id=self.document_pk.get(c.doc_id) if c.has else None,
            citation_doc_id=c.doc_id,
            citation_locator=c.locator,
            citation_quote=c.quote,
            has_citation=c.has,
            removed=row.removed,
            reason=row.reason,
            note=row.note,
        )

    def _stored_entries(self, edition: KeyEdition) -> dict[str, tuple[Any, ...]]:
        return {
            r[0]: r[1:]
            for r in KeyEntry.objects.filter(edition=edition).values_list(
                "question__question_id",
                "answer",
                "has_citation",
                "citation_doc_id",
                "citation_locator",
                "citation_quote",
                "removed",
                "reason",
                "note",
            )
        }

    def _publish_new(
        self,
        name: str,
        parent: KeyEdition | None,
        rows: dict[str, KeyRow],
        file: str,
        note: str = "",
    ) -> KeyEdition | None:
        draft = KeyEdition.objects.filter(
            benchmark=self.bench, status=KeyEdition.Status.DRAFT
        ).first()
        if draft is not None:
            self.p.add(
                file,
                0,
                "edition",
                f"cannot add key edition {name!r}: the database has "
                f"a draft edition {draft.name!r}; publish it first",
            )
            return None
        edition = KeyEdition.objects.create(
            benchmark=self.bench, name=name, parent=parent, note=note
        )
        self._bulk(
            KeyEntry,
            [
                self._entry(edition, row)
                for row in rows.values()
                if row.question_id in self.question_pk
            ],
            "key_entries",
        )
        # Published in the same transaction: from here the triggers forbid any change.
        # Who published it and when come from publications.jsonl where the bundle says.
        at, by = self._publication(name)
        if name in self.d.publications:
            self.created["publications"] += 1
        KeyEdition.objects.filter(pk=edition.pk, status=KeyEdition.Status.DRAFT).update(
            status=KeyEdition.Status.PUBLISHED, published_at=at or timezone.now(), published_by=by
        )
        edition.refresh_from_db()
        self.created["editions"] += 1
        return edition

    def _check_edition(
        self,
        edition: KeyEdition,
        rows: dict[str, KeyRow],
        file: str,
        parent: KeyEdition | None,
        hint: str,
    ) -> None:
        if (edition.parent_id or None) != (parent.pk if parent else None):
            self.p.add(
                file,
                0,
                "edition",
                f"stored edition {edition.name!r} has another parent than in this bundle; {hint}",
            )
        self._check_publication(edition)
        if not edition.is_published():
            self.p.add(
                file,
                0,
                "edition",
                f"edition {edition.name!r} is a draft in the database; publish or discard it first",
            )
        stored = self._stored_entries(edition)
        for qid, row in rows.items():
            if qid not in stored:
                self.p.add(
                    file,
                    row.line,
                    "question_id",
                    f"{qid!r} has no entry in the stored edition {edition.name!r}; {hint}",
                )
            else:
                old = stored[qid]
                given = (
                    row.answer,
                    row.citation.has,
                    row.citation.doc_id,
                    row.citation.locator,
                    row.citation.quote,
                    row.removed,
                    row.reason,
                    row.note,
                )
                self._compare(file, row.line, KEY_FIELDS, old, given, hint)
        extra = sorted(set(stored) - set(rows))
        if extra:
            self.p.add(
                file,
                0,
                "question_id",
                f"stored edition {edition.name!r} has entries "
                f"missing from this bundle (e.g. {', '.join(extra[:5])}); {hint}",
            )

    def _editions(self) -> None:
        d = self.d
        if self.original is None:
            self.original = self._publish_new(ORIGINAL, None, d.original, "questions.jsonl")
        else:
            self._check_edition(self.original, d.original, "questions.jsonl", None, REVIEW_HINT)
        self.editions: dict[str, KeyEdition] = {}
        if self.original is not None:
            self.editions[ORIGINAL] = self.original
        parent = self.original
        for name, spec in d.editions.items():
            if parent is None:
                break
            stored = KeyEdition.objects.filter(benchmark=self.bench, name=name).first()
            if stored is None:
                edition = self._publish_new(
                    name, parent, spec["entries"], "corrections.jsonl", spec["note"]
                )
            else:
                self._check_edition(
                    stored,
                    spec["entries"],
                    "corrections.jsonl",
                    parent,
                    "corrections to a stored edition go through review",
                )
                edition = stored
            if edition is None:
                break
            self.editions[name] = edition
            parent = edition
        self.effective = {
            name: {q: e.pk for q, e in key_entries_for_edition(ed).items()}
            for name, ed in self.editions.items()
        }
