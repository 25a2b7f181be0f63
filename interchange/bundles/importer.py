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

Speed: every lookup is a pre-built dict from one query per table, every insert a
batched `bulk_create`; no query per row (a 36,036-grade bundle imports in seconds).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import models, transaction
from django.utils import timezone

from interchange.bundles.problems import BundleError, Problems
from interchange.bundles.reader import ORIGINAL, BundleData, KeyRow, read_bundle
from interchange.bundles.source import open_source
from questions.cli import progress
from questions.models import (
    Benchmark,
    Category,
    KeyEdition,
    KeyEntry,
    ModelUnderTest,
    Question,
    Response,
    Section,
    SourceDocument,
)
from questions.selectors import key_entries_for_edition
from scoring.audit_rule import exclude_by_audit
from scoring.models import AuditVerdict, Grade, Judge

BATCH = 2000
KEY_FIELDS = (
    "answer",
    "citation",
    "citation.doc_id",
    "citation.locator",
    "citation.quote",
    "action",
    "reason",
    "note",
)
REVIEW_HINT = (
    "the original key is immutable: corrections go through review "
    "(review queue, editor approval, new key edition), not re-import"
)


@dataclass
class ImportResult:
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


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _differing(old: Any, new: Any) -> tuple[str, str]:
    """Return short forms of two differing values that show where they differ.

    Long strings that share a beginning are cut around their first differing character
    (with its position), so the two forms never look the same.
    """
    if not (isinstance(old, str) and isinstance(new, str)):
        return _short(old), _short(new)
    if len(repr(old)) <= 60 and len(repr(new)) <= 60:
        return repr(old), repr(new)
    i = len(os.path.commonprefix([old, new]))
    start = max(0, i - 20)

    def cut(s: str) -> str:
        part = s[start : i + 30]
        return ("..." if start else "") + repr(part) + ("..." if i + 30 < len(s) else "")

    return f"{cut(old)} (from character {i + 1})", cut(new)


class _Importer:
    def __init__(self, data: BundleData, problems: Problems, show: bool, user: Any) -> None:
        self.d, self.p, self.show, self.user = data, problems, show, user
        self.created: dict[str, int] = dict.fromkeys(
            ("benchmarks", *data.counts().keys(), "exclusions"), 0
        )
        self.warnings = list(data.warnings)

    # --- helpers -------------------------------------------------------------------
    def _bulk(
        self,
        model: type[models.Model],
        objs: Sequence[models.Model],
        label: str,
        batch: int = BATCH,
    ) -> list[models.Model]:
        chunks = [objs[i : i + batch] for i in range(0, len(objs), batch)]
        made: list[models.Model] = []
        for chunk in progress(
            chunks,
            enabled=self.show and len(objs) > 5000,
            total=len(chunks),
            desc=f"writing {label}",
        ):
            made.extend(model.objects.bulk_create(chunk))
        self.created[label] += len(objs)
        return made

    def _compare(
        self,
        file: str,
        line: int,
        names: Sequence[str],
        stored: Sequence[Any],
        given: Sequence[Any],
        hint: str = "re-import adds rows; it never changes stored ones",
    ) -> bool:
        """Report the first field that differs; return True when equal."""
        for name, old, new in zip(names, stored, given, strict=True):
            if old != new:
                self.p.add(
                    file,
                    line,
                    name,
                    "differs from the stored value (stored {}, bundle {}); {}".format(
                        *_differing(old, new), hint
                    ),
                )
                return False
        return True

    def _sync(
        self,
        file: str,
        names: Sequence[str],
        stored: dict[Any, Sequence[Any]],
        incoming: Iterable[tuple[Any, Sequence[Any], int]],
    ) -> list[Any]:
        """Compare rows whose key is stored; return the keys that are new."""
        new = []
        for key, values, line in incoming:
            if key in stored:
                self._compare(file, line, names, stored[key], values)
            else:
                new.append(key)
        return new

    # --- steps ---------------------------------------------------------------------
    def run(self, dry_run: bool) -> ImportResult:
        self.bench = self._benchmark()
        self._categories()
        self._documents()
        self._sections()
        self._questions()
        self._editions()
        self._models()
        self._judges()
        self._responses()
        self._grades()
        self._audits()
        self._exclusions()
        return ImportResult(self.d.name, dry_run, self.created, self.d.counts(), self.warnings)

    def _benchmark(self) -> Benchmark:
        d = self.d
        bench = Benchmark.objects.select_for_update().filter(name=d.name).first()
        if bench is None:
            self.created["benchmarks"] = 1
            return Benchmark.objects.create(
                name=d.name,
                version=d.version,
                description=d.description,
                license=d.license,
                grade_scale=d.grade_scale,
                manifest=d.manifest,
            )
        self._compare(
            "manifest.json",
            1,
            ("version", "description", "license", "grade_scale"),
            (bench.version, bench.description, bench.license, bench.grade_scale),
            (d.version, d.description, d.license, d.grade_scale),
        )
        return bench

    def _categories(self) -> None:
        stored = {
            cid: (pk, name)
            for pk, cid, name in Category.objects.filter(benchmark=self.bench).values_list(
                "pk", "category_id", "name"
            )
        }
        new = self._sync(
            "categories.csv",
            ("name",),
            {k: v[1:] for k, v in stored.items()},
            ((cid, (name,), line) for cid, (name, line) in self.d.categories.items()),
        )
        made = self._bulk(
            Category,
            [
                Category(benchmark=self.bench, category_id=cid, name=self.d.categories[cid][0])
                for cid in new
            ],
            "categories",
        )
        self.category_pk = {cid: v[0] for cid, v in stored.items()}
        self.category_pk.update({c.category_id: c.pk for c in made})

    def _documents(self) -> None:
        names = (
            "title",
            "short_title",
            "kind",
            "edition",
            "published",
            "status",
            "url",
            "superseded_by",
        )
        rows = SourceDocument.objects.filter(benchmark=self.bench).values_list(
            "pk", "doc_id", *names[:-1], "superseded_by__doc_id"
        )
        stored = {r[1]: r for r in rows}
        docs = self.d.documents
        new = self._sync(
            "documents.csv",
            names,
            {k: (*v[2:-1], v[-1] or "") for k, v in stored.items()},
            (
                (doc_id, tuple(v[n] or "" if n != "published" else v[n] for n in names), v["line"])
                for doc_id, v in docs.items()
            ),
        )
        made = self._bulk(
            SourceDocument,
            [
                SourceDocument(
                    benchmark=self.bench,
                    doc_id=doc_id,
                    **{
                        n: docs[doc_id][n] or ("" if n != "published" else None) for n in names[:-1]
                    },
                )
                for doc_id in new
            ],
            "documents",
        )
        self.document_pk = {doc_id: r[0] for doc_id, r in stored.items()}
        self.document_pk.update({doc.doc_id: doc.pk for doc in made})
        linked = []
        for doc in made:
            target = docs[doc.doc_id]["superseded_by"]
            if target:
                doc.superseded_by_id = self.document_pk[target]
                linked.append(doc)
        SourceDocument.objects.bulk_update(linked, ["superseded_by"], batch_size=BATCH)

    def _sections(self) -> None:
        stored = {
            (doc_id, loc): (heading, text)
            for doc_id, loc, heading, text in Section.objects.filter(
                document__benchmark=self.bench
            ).values_list("document__doc_id", "locator", "heading", "text")
        }
        secs = self.d.sections
        # Passages are an index of the source text that `import_sources` may have rebuilt
        # since; a difference keeps the stored passage and is only a warning.
        new = [k for k in secs if k not in stored]
        changed = [
            k for k in secs if k in stored and stored[k] != (secs[k]["heading"], secs[k]["text"])
        ]
        if changed:
            self.warnings.append(
                f"sections.jsonl: warning: {len(changed)} passages differ from the stored "
                f"index (e.g. {changed[0][0]} {changed[0][1]} on line "
                f"{secs[changed[0]]['line']}); the stored passages are kept"
            )
        self._bulk(
            Section,
            [
                Section(
                    document_id=self.document_pk[k[0]],
                    locator=k[1],
                    heading=secs[k]["heading"],
                    text=secs[k]["text"],
                    position=secs[k]["position"],
                )
                for k in new
            ],
            "sections",
        )

    def _questions(self) -> None:
        d = self.d
        self.original = KeyEdition.objects.filter(benchmark=self.bench, name=ORIGINAL).first()
        stored = {
            qid: (pk, cid or "", text)
            for pk, qid, cid, text in Question.objects.filter(benchmark=self.bench).values_list(
                "pk", "question_id", "category__category_id", "text"
            )
        }
        new = self._sync(
            "questions.jsonl",
            ("category_id", "text"),
            {k: v[1:] for k, v in stored.items()},
            ((qid, (q["category_id"], q["text"]), q["line"]) for qid, q in d.questions.items()),
        )
        if self.original is not None:
            for qid in new:
                self.p.add(
                    "questions.jsonl",
                    d.questions[qid]["line"],
                    "question_id",
                    f"{qid!r} is not in the stored original key; {REVIEW_HINT}",
                )
            missing = sorted(set(stored) - set(d.questions))
            if missing:
                self.p.add(
                    "questions.jsonl",
                    0,
                    "question_id",
                    f"{len(missing)} questions of the stored original key are missing "
                    f"from this bundle (e.g. {', '.join(missing[:5])}); {REVIEW_HINT}",
                )
            new = []
        made = self._bulk(
            Question,
            [
                Question(
                    benchmark=self.bench,
                    question_id=qid,
                    text=d.questions[qid]["text"],
                    category_id=self.category_pk.get(d.questions[qid]["category_id"]),
                )
                for qid in new
            ],
            "questions",
        )
        self.question_pk = {qid: v[0] for qid, v in stored.items()}
        self.question_pk.update({q.question_id: q.pk for q in made})

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
        KeyEdition.objects.filter(pk=edition.pk, status=KeyEdition.Status.DRAFT).update(
            status=KeyEdition.Status.PUBLISHED, published_at=timezone.now()
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

    def _models(self) -> None:
        names = ("name", "vendor")
        stored = {
            r[1]: r
            for r in ModelUnderTest.objects.filter(benchmark=self.bench).values_list(
                "pk", "model_id", *names
            )
        }
        ms = self.d.models
        new = self._sync(
            "models.csv",
            names,
            {k: v[2:] for k, v in stored.items()},
            ((k, (v["name"], v["vendor"]), v["line"]) for k, v in ms.items()),
        )
        made = self._bulk(
            ModelUnderTest,
            [
                ModelUnderTest(
                    benchmark=self.bench, model_id=k, name=ms[k]["name"], vendor=ms[k]["vendor"]
                )
                for k in new
            ],
            "models",
        )
        self.model_pk = {k: v[0] for k, v in stored.items()}
        self.model_pk.update({m.model_id: m.pk for m in made})

    def _judges(self) -> None:
        names = ("name", "vendor", "role")
        config = ("backend", "model", "prompt_version")
        stored = {
            r[1]: r
            for r in Judge.objects.filter(benchmark=self.bench).values_list(
                "pk", "judge_id", *names, *config
            )
        }
        js = self.d.judges
        new = self._sync(
            "judges.csv",
            names,
            {k: v[2:5] for k, v in stored.items()},
            ((k, tuple(v[n] for n in names), v["line"]) for k, v in js.items()),
        )
        for jid, row in stored.items():
            if jid in js and tuple(js[jid][n] for n in config) != row[5:]:
                self.warnings.append(
                    f"judges.csv:{js[jid]['line']}: warning: judge {jid!r} is configured "
                    "differently in the database (backend/model/prompt_version); kept as stored"
                )
        made = self._bulk(
            Judge,
            [
                Judge(benchmark=self.bench, judge_id=k, **{n: js[k][n] for n in (*names, *config)})
                for k in new
            ],
            "judges",
        )
        self.judge_pk = {k: v[0] for k, v in stored.items()}
        self.judge_pk.update({j.judge_id: j.pk for j in made})

    def _responses(self) -> None:
        stored = {
            (q, m): (pk, text)
            for pk, q, m, text in Response.objects.filter(
                question__benchmark=self.bench
            ).values_list("pk", "question_id", "model_id", "text")
        }
        qpk, mpk = self.question_pk, self.model_pk
        incoming = []
        for (qid, mid), (text, line) in self.d.responses.items():
            if qid in qpk and mid in mpk:
                incoming.append(((qpk[qid], mpk[mid]), (text,), line))
        texts = {key: values[0] for key, values, _ in incoming}
        new = self._sync(
            "responses.jsonl", ("text",), {k: v[1:] for k, v in stored.items()}, incoming
        )
        made = self._bulk(
            Response,
            [Response(question_id=q, model_id=m, text=texts[(q, m)]) for q, m in new],
            "responses",
        )
        self.response_pk = {k: v[0] for k, v in stored.items()}
        self.response_pk.update({(r.question_id, r.model_id): r.pk for r in made})

    def _key_entry(self, file: str, row: dict[str, Any]) -> int | None:
        entries = self.effective.get(row["edition"])
        qpk = self.question_pk.get(row["question_id"])
        if entries is None or qpk is None:
            return None
        entry = entries.get(qpk)
        if entry is None:
            self.p.add(
                file,
                row["line"],
                "edition",
                f"question {row['question_id']!r} has no key entry in edition {row['edition']!r}",
            )
        return entry

    def _grades(self) -> None:
        file = "grades.jsonl"
        names = ("grade", "rationale", "flag", "flag_reason", "raw_output", "stop_reason")
        stored = {
            r[:4]: r[4:]
            for r in Grade.objects.filter(judge__benchmark=self.bench)
            .values_list("response_id", "judge_id", "key_entry_id", "prompt_version", *names)
            .iterator(chunk_size=5000)
        }
        seen: dict[tuple[Any, ...], int] = {}
        new = []
        for row in self.d.grades:
            rpk = self.response_pk.get(
                (self.question_pk.get(row["question_id"]), self.model_pk.get(row["model_id"]))
            )
            entry = self._key_entry(file, row)
            jpk = self.judge_pk.get(row["judge_id"])
            if rpk is None or entry is None or jpk is None:
                continue
            key = (rpk, jpk, entry, row["prompt_version"])
            if key in seen:
                self.p.add(
                    file,
                    row["line"],
                    "edition",
                    f"same response, judge, key entry and "
                    f"prompt version as line {seen[key]} (edition {row['edition']!r} "
                    "inherits that question's entry)",
                )
                continue
            seen[key] = row["line"]
            values = tuple(row[n] if n in ("grade", "flag") else row[n] or "" for n in names)
            if key in stored:
                self._compare(file, row["line"], names, stored[key], values)
            else:
                new.append(
                    Grade(
                        response_id=rpk,
                        judge_id=jpk,
                        key_entry_id=entry,
                        prompt_version=row["prompt_version"],
                        **dict(zip(names, values, strict=True)),
                    )
                )
        self._bulk(Grade, new, "grades", batch=5000)

    def _audits(self) -> None:
        file = "audits.jsonl"
        names = ("verdict", "rationale", "raw_output")
        stored = {
            r[:3]: r[3:]
            for r in AuditVerdict.objects.filter(auditor__benchmark=self.bench).values_list(
                "key_entry_id", "auditor_id", "prompt_version", *names
            )
        }
        seen: dict[tuple[Any, ...], int] = {}
        new = []
        for row in self.d.audits:
            entry = self._key_entry(file, row)
            jpk = self.judge_pk.get(row["judge_id"])
            if entry is None or jpk is None:
                continue
            key = (entry, jpk, row["prompt_version"])
            if key in seen:
                self.p.add(
                    file,
                    row["line"],
                    "edition",
                    f"same key entry, auditor and prompt version as line {seen[key]}",
                )
                continue
            seen[key] = row["line"]
            values = (row["verdict"], row["rationale"] or "", row["raw_output"] or "")
            if key in stored:
                self._compare(file, row["line"], names, stored[key], values)
            else:
                new.append(
                    AuditVerdict(
                        key_entry_id=entry,
                        auditor_id=jpk,
                        prompt_version=row["prompt_version"],
                        **dict(zip(names, values, strict=True)),
                    )
                )
        self._bulk(AuditVerdict, new, "audits")

    def _exclusions(self) -> None:
        """Rule 4 on the imported verdicts: entries both auditors find adverse are excluded
        and logged (scoring.audit_rule, as triage does), so the benchmark is scored as the
        rule says from the start and an export re-imports to the same exclusions."""
        if self.p:  # the import fails anyway; its verdicts may be incomplete
            return
        entries = KeyEntry.objects.filter(edition__benchmark=self.bench).values_list(
            "pk", flat=True
        )
        new = exclude_by_audit(
            entries,
            user=self.user,
            source="bundle import (both auditors adverse in audits.jsonl)",
        )
        self.created["exclusions"] = len(new)


__all__ = ["BundleError", "ImportResult", "import_bundle", "import_data"]
