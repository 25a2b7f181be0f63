"""What a valid bundle holds once read: plain Python rows, no database objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from interchange.bundles.rows import DEFAULT_CORRECTED


@dataclass
class Citation:
    has: bool = False
    doc_id: str = ""
    locator: str = ""
    quote: str = ""

    def as_tuple(self) -> tuple[bool, str, str, str]:
        return (self.has, self.doc_id, self.locator, self.quote)


@dataclass
class KeyRow:
    """One key entry: an original (`questions.jsonl`) or a correction/removal."""

    question_id: str
    answer: str
    citation: Citation
    removed: bool = False
    reason: str = ""
    note: str = ""
    line: int = 0

    def as_tuple(self) -> tuple[Any, ...]:
        return (self.answer, *self.citation.as_tuple(), self.removed, self.reason, self.note)


@dataclass
class BundleData:
    name: str = ""
    version: str = ""
    description: str = ""
    license: str = ""
    grade_scale: list[int] = field(default_factory=lambda: [0, 1, 2])
    manifest: dict[str, Any] = field(default_factory=dict)
    # the manifest's `counts` ({file name: rows}), checked against the files, not stored
    declared_counts: dict[str, int] = field(default_factory=dict)
    corrected_edition: str = DEFAULT_CORRECTED
    # id -> (values..., line)
    categories: dict[str, tuple[str, int]] = field(default_factory=dict)
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    sections: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    questions: dict[str, dict[str, Any]] = field(default_factory=dict)
    original: dict[str, KeyRow] = field(default_factory=dict)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    judges: dict[str, dict[str, Any]] = field(default_factory=dict)
    responses: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)
    # editions after original, in chain order: name -> {"note": str, "entries": {qid: KeyRow}}
    editions: dict[str, dict[str, Any]] = field(default_factory=dict)
    grades: list[dict[str, Any]] = field(default_factory=list)
    audits: list[dict[str, Any]] = field(default_factory=list)
    # history (interchange.bundles.history_read): edition name -> {published_at, published_by,
    # line}; judge_id -> {base_url, api_key_env, backend_settings, active, line}; log rows
    publications: dict[str, dict[str, Any]] = field(default_factory=dict)
    judge_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    audit_log: list[dict[str, Any]] = field(default_factory=list)
    # (a part of interchange.bundles.parts.BUNDLE_PARTS, its validated payload); rows per part file
    parts: list[tuple[Any, Any]] = field(default_factory=list)
    part_counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "categories": len(self.categories),
            "documents": len(self.documents),
            "sections": len(self.sections),
            "questions": len(self.questions),
            "editions": 1 + len(self.editions),
            "key_entries": len(self.original)
            + sum(len(e["entries"]) for e in self.editions.values()),
            "models": len(self.models),
            "judges": len(self.judges),
            "responses": len(self.responses),
            "grades": len(self.grades),
            "audits": len(self.audits),
            "publications": len(self.publications),
            "judge_settings": len(self.judge_settings),
            "audit_log": len(self.audit_log),
            **self.part_counts,
        }
