"""Write a validated bundle into the database: all or nothing, in one transaction.

Re-import policy (bundle-format.md: "importing the same bundle twice changes nothing"):
a re-import is compared with what is stored, row by row, on each file's natural key.

- The ORIGINAL key (questions and their answers/citations) must be identical; any
  difference, a new question or a missing one refuses the whole bundle: the original key
  is immutable and changes only through review (methodology rules 5-7).
- Key editions after `original` must be identical where they already exist; new ones are
  added on top of the chain.
- Every other row (categories, documents, models, judges, responses, grades, audit
  verdicts) is ADDED when its key is new and must be IDENTICAL when its key exists;
  a stored row is never changed. So a later bundle may bring new models, responses or
  grades, but never edits. Judges' configuration (`backend`, `model`, `prompt_version`)
  may have been changed in the product since, and passages (`sections.jsonl`) may have
  been re-indexed by `import_sources`; a difference there is a warning only.
- History (docs/bundle-format.md, "History files"): a new edition takes its publication
  from `publications.jsonl` (a stored one keeps its own, with a warning); judge settings
  are set on new judges only; audit log entries and review items already stored are
  skipped, the others added (the log is append-only); users named are created inactive.

Speed: every lookup is a pre-built dict from one query per table, every insert one
`COPY ... FROM STDIN` per table on PostgreSQL (pks taken first from the table's sequence)
or a batched `bulk_create` on SQLite (import_base.ImportBase._bulk), all in the import's
one transaction; no query per row (a 36,036-grade bundle imports in seconds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction

from core import content_cache
from interchange.bundles.data import BundleData
from interchange.bundles.import_content import ContentSteps
from interchange.bundles.import_editions import EditionSteps
from interchange.bundles.import_judging import JudgingSteps
from interchange.bundles.problems import BundleError, Problems
from interchange.bundles.reader import read_bundle
from interchange.bundles.source import open_source


@dataclass
class ImportResult:
    """What an import did: rows `created` and rows `in_bundle` per table name, warnings."""

    benchmark: str
    dry_run: bool
    created: dict[str, int]
    in_bundle: dict[str, int]
    warnings: list[str] = field(default_factory=list)

    @property
    def already_imported(self) -> bool:
        return not any(self.created.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "dry_run": self.dry_run,
            "already_imported": self.already_imported,
            "created": self.created,
            "in_bundle": self.in_bundle,
            "warnings": self.warnings,
        }


class _Rollback(Exception):
    pass


def import_bundle(
    path: str | Path, *, dry_run: bool = False, show_progress: bool = False, user: Any = None
) -> ImportResult:
    """Validate and import the bundle at `path` (folder or .zip); return what was created.

    Raises BundleError (with every problem as `FILE:LINE: FIELD: message`) and writes
    nothing when the bundle is invalid or conflicts with stored data. With `dry_run` the
    whole import runs and is rolled back, so the counts are exactly those of a real run.
    """
    data = read_bundle(open_source(path), show_progress=show_progress)
    return import_data(data, dry_run=dry_run, show_progress=show_progress, user=user)


def import_data(
    data: BundleData, *, dry_run: bool = False, show_progress: bool = False, user: Any = None
) -> ImportResult:
    """Write an already read bundle (`read_bundle`) in one transaction; see import_bundle.

    `user` is the importing user (None: the system), named in the audit log of the
    exclusions rule 4 makes. Raises BundleError and writes nothing on a conflict.
    """
    problems = Problems()
    result: ImportResult | None = None
    try:
        with transaction.atomic():
            result = _Importer(data, problems, show_progress, user).run(dry_run)
            problems.raise_if_any()
            if dry_run:
                raise _Rollback
    except _Rollback:
        pass
    assert result is not None
    return result


class _Importer(ContentSteps, EditionSteps, JudgingSteps):
    """One import: the steps of each concern, run in the order the rows depend on."""

    def run(self, dry_run: bool) -> ImportResult:
        self.bench = self._benchmark()
        self._users()
        self._categories()
        self._documents()
        self._sections()
        self._questions()
        self._editions()
        self._models()
        self._judges()
        self._judge_settings()
        self._responses()
        self._grades()
        self._audits()
        self._exclusions()
        self._audit_log()
        self._parts()
        # COPY and bulk_create send no model signals: drop the review pages' cached
        # editions, passages and panel of this benchmark (core.content_cache).
        content_cache.bump(self.bench.pk)
        return ImportResult(self.d.name, dry_run, self.created, self.d.counts(), self.warnings)


__all__ = ["BundleError", "ImportResult", "import_bundle", "import_data"]
