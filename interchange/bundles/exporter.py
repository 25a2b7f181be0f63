"""Write a benchmark back out as a bundle (folder, or .zip when the path ends in .zip).

What is written (bundle-format.md, plus these documented extensions that import reads):
- `questions.jsonl` always carries the ORIGINAL key;
- the published editions after `original` on the chain up to the chosen edition (default:
  the latest published) go to `corrections.jsonl`, one row per entry, each row naming its
  `edition`; the manifest gets `corrected_edition` (the first of them) and `editions`
  (`[{name, note}]` in chain order), so any depth of history re-imports;
- grades and audit verdicts given against any edition of that chain, with `edition` where
  their key entry is not in `original`, and `prompt_version` where it differs from the
  judge's; judges carry `backend`, `model` and `prompt_version` (never secrets);
- the history (interchange.bundles.history_export): `publications.jsonl`,
  `judge_settings.jsonl` and `audit_log.jsonl`, which import restores.
- `errata.jsonl`: the errata register of those editions (`questions.errata`, one erratum
  per line as on the public site: id, old and new answer and citation, reason, took_effect;
  informational: import ignores it, `corrections.jsonl` carries the history).

- the manifest's `counts`: rows per file written (`rows.count_rows`), which import checks.

CSV cells are formula-neutralised (scoring.spreadsheet); import undoes it exactly.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from interchange.bundles.history_export import add_history
from interchange.bundles.parts import BUNDLE_PARTS
from interchange.bundles.rows import ORIGINAL, count_rows
from questions.errata import errata_for_edition
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
from questions.selectors import edition_chain, get_edition
from scoring.models import AuditVerdict, Grade, Judge
from scoring.spreadsheet import csv_text


def _jsonl(rows: Iterable[dict[str, Any]]) -> bytes:
    return "".join(
        json.dumps(r, ensure_ascii=False, cls=DjangoJSONEncoder) + "\n" for r in rows
    ).encode("utf-8")


def _csv(header: list[str], rows: Iterable[Iterable[Any]]) -> bytes:
    return csv_text(header, rows).encode("utf-8")


def _citation(entry: KeyEntry) -> dict[str, str] | None:
    if not entry.has_citation:
        return None
    citation = {"doc_id": entry.citation_doc_id, "locator": entry.citation_locator}
    if entry.citation_quote:
        citation["quote"] = entry.citation_quote
    return citation


def build_files(benchmark: Benchmark, edition_name: str | None = None) -> dict[str, bytes]:
    """Return {file name: bytes} of the bundle for `benchmark` up to `edition_name`.

    `edition_name` None: the latest published edition. Files in bundle-format.md's order;
    the optional ones only when they would have rows.
    """
    edition = get_edition(benchmark, edition_name)
    chain = [e for e in edition_chain(edition) if e.is_published()]
    original = chain[0]
    later = chain[1:]
    files: dict[str, bytes] = {"manifest.json": _manifest(benchmark, later)}
    _add_sources(files, benchmark)
    _add_questions_and_responses(files, benchmark, original)
    judges = Judge.objects.filter(benchmark=benchmark).order_by("role", "judge_id")
    judge_pv = {j.pk: j.prompt_version for j in judges}
    if judges.exists():
        files["judges.csv"] = _csv(
            ["judge_id", "name", "vendor", "role", "backend", "model", "prompt_version"],
            (
                (j.judge_id, j.name, j.vendor, j.role, j.backend, j.model, j.prompt_version)
                for j in judges
            ),
        )
    if later:
        files["corrections.jsonl"] = _corrections(later)
        files["errata.jsonl"] = _jsonl(
            erratum.to_dict() for ed in later for erratum in errata_for_edition(ed)
        )
    _add_verdicts(files, chain, judge_pv)
    add_history(files, benchmark, chain, _jsonl)
    for part in BUNDLE_PARTS:
        for name, rows in part.export(benchmark, chain).items():
            if rows:
                files[name] = _jsonl(rows)
    # Written last, over the files above: import checks each file against its count.
    counts = {n: v for n, v in row_counts(files).items() if n != "manifest.json"}
    files["manifest.json"] = _manifest(benchmark, later, counts)
    return files


def _manifest(
    benchmark: Benchmark, later: list[KeyEdition], counts: dict[str, int] | None = None
) -> bytes:
    manifest = dict(benchmark.manifest or {})
    manifest.pop("counts", None)
    manifest.update(
        name=benchmark.name,
        version=benchmark.version,
        description=benchmark.description,
        license=benchmark.license,
        grade_scale=benchmark.grade_scale,
    )
    manifest.pop("corrected_edition", None)
    manifest.pop("editions", None)
    if later:
        manifest["corrected_edition"] = later[0].name
        manifest["editions"] = [{"name": e.name, "note": e.note} for e in later]
    if counts is not None:
        manifest["counts"] = counts
    return (json.dumps(manifest, ensure_ascii=False, indent=2) + "\n").encode()


def _add_sources(files: dict[str, bytes], benchmark: Benchmark) -> None:
    """Add categories.csv, documents.csv and sections.jsonl (each when it has rows)."""
    categories = Category.objects.filter(benchmark=benchmark).order_by("category_id")
    if categories.exists():
        files["categories.csv"] = _csv(
            ["category_id", "name"], ((c.category_id, c.name) for c in categories)
        )
    docs = (
        SourceDocument.objects.filter(benchmark=benchmark)
        .select_related("superseded_by")
        .order_by("doc_id")
    )
    if docs.exists():
        files["documents.csv"] = _csv(
            [
                "doc_id",
                "title",
                "short_title",
                "kind",
                "edition",
                "published",
                "status",
                "superseded_by",
                "url",
            ],
            (
                (
                    d.doc_id,
                    d.title,
                    d.short_title,
                    d.kind,
                    d.edition,
                    d.published.isoformat() if d.published else "",
                    d.status,
                    d.superseded_by.doc_id if d.superseded_by else "",
                    d.url,
                )
                for d in docs
            ),
        )
    sections = (
        Section.objects.filter(document__benchmark=benchmark)
        .select_related("document")
        .order_by("document__doc_id", "position", "id")
    )
    if sections.exists():
        files["sections.jsonl"] = _jsonl(
            {
                "doc_id": s.document.doc_id,
                "locator": s.locator,
                "heading": s.heading,
                "text": s.text,
            }
            for s in sections
        )


def _add_questions_and_responses(
    files: dict[str, bytes], benchmark: Benchmark, original: KeyEdition
) -> None:
    """Add questions.jsonl (with the ORIGINAL key), models.csv and responses.jsonl."""
    entries = {e.question_id: e for e in KeyEntry.objects.filter(edition=original)}
    questions = (
        Question.objects.filter(benchmark=benchmark)
        .select_related("category")
        .order_by("question_id")
    )
    files["questions.jsonl"] = _jsonl(
        {
            "question_id": q.question_id,
            "category_id": q.category.category_id if q.category else None,
            "text": q.text,
            "answer": entries[q.pk].answer,
            "citation": _citation(entries[q.pk]),
        }
        for q in questions
        if q.pk in entries
    )

    model_rows = ModelUnderTest.objects.filter(benchmark=benchmark).order_by("model_id")
    if model_rows.exists():
        files["models.csv"] = _csv(
            ["model_id", "name", "vendor"], ((m.model_id, m.name, m.vendor) for m in model_rows)
        )
    responses = (
        Response.objects.filter(question__benchmark=benchmark)
        .order_by("question__question_id", "model__model_id")
        .values_list("question__question_id", "model__model_id", "text")
    )
    if responses.exists():
        files["responses.jsonl"] = _jsonl(
            {"question_id": q, "model_id": m, "text": t} for q, m, t in responses.iterator()
        )


def _corrections(later: list[KeyEdition]) -> bytes:
    """Return corrections.jsonl: every entry of the editions after original, in order."""
    rows = []
    for ed in later:
        for e in (
            KeyEntry.objects.filter(edition=ed)
            .select_related("question")
            .order_by("question__question_id")
        ):
            rows.append(
                {
                    "question_id": e.question.question_id,
                    "action": "remove" if e.removed else "correct",
                    "answer": e.answer,
                    "citation": _citation(e),
                    "reason": e.reason,
                    "note": e.note,
                    "edition": ed.name,
                }
            )
    return _jsonl(rows)


def _add_verdicts(
    files: dict[str, bytes], chain: list[KeyEdition], judge_pv: dict[int, str]
) -> None:
    """Add grades.jsonl and audits.jsonl: those given against any edition of `chain`."""
    names = {e.pk: e.name for e in chain}
    grades = (
        Grade.objects.filter(key_entry__edition__in=chain)
        .order_by(
            "response__question__question_id",
            "response__model__model_id",
            "judge__judge_id",
            "key_entry__edition_id",
            "prompt_version",
        )
        .values_list(
            "response__question__question_id",
            "response__model__model_id",
            "judge__judge_id",
            "judge_id",
            "key_entry__edition_id",
            "prompt_version",
            "grade",
            "rationale",
            "flag",
            "flag_reason",
            "raw_output",
            "stop_reason",
        )
    )
    if grades.exists():
        files["grades.jsonl"] = _jsonl(
            _grade_rows(grades.iterator(chunk_size=5000), names, judge_pv)
        )
    audits = (
        AuditVerdict.objects.filter(key_entry__edition__in=chain)
        .order_by(
            "key_entry__question__question_id",
            "auditor__judge_id",
            "key_entry__edition_id",
            "prompt_version",
        )
        .values_list(
            "key_entry__question__question_id",
            "auditor__judge_id",
            "auditor_id",
            "key_entry__edition_id",
            "prompt_version",
            "verdict",
            "rationale",
            "raw_output",
        )
    )
    if audits.exists():
        files["audits.jsonl"] = _jsonl(_audit_rows(audits, names, judge_pv))


def _extras(row: dict[str, Any], edition: str, pv: str, judge_pv: str) -> dict[str, Any]:
    if edition != ORIGINAL:
        row["edition"] = edition
    if pv != judge_pv:
        row["prompt_version"] = pv
    return row


def _grade_rows(
    rows: Iterable[tuple[Any, ...]], names: dict[int, str], judge_pv: dict[int, str]
) -> Iterable[dict[str, Any]]:
    for q, m, j, jpk, ed, pv, grade, rationale, flag, flag_reason, raw, stop in rows:
        row = {
            "question_id": q,
            "model_id": m,
            "judge_id": j,
            "grade": grade,
            "rationale": rationale,
            "flag": flag,
            "flag_reason": flag_reason,
        }
        if raw:
            row["raw_output"] = raw
        if stop:
            row["stop_reason"] = stop
        yield _extras(row, names[ed], pv, judge_pv[jpk])


def _audit_rows(
    rows: Iterable[tuple[Any, ...]], names: dict[int, str], judge_pv: dict[int, str]
) -> Iterable[dict[str, Any]]:
    for q, j, jpk, ed, pv, verdict, rationale, raw in rows:
        row = {"question_id": q, "judge_id": j, "verdict": verdict, "rationale": rationale}
        if raw:
            row["raw_output"] = raw
        yield _extras(row, names[ed], pv, judge_pv[jpk])


def export_bundle(
    benchmark: Benchmark, path: str | Path, edition_name: str | None = None
) -> dict[str, int]:
    """Write the bundle to `path` (a new or empty folder, or a .zip); return rows per file.

    Raises FileExistsError when the folder exists and is not empty, NotFoundError
    (questions.errors) for an unknown edition.
    """
    files = build_files(benchmark, edition_name)
    path = Path(path)
    if path.suffix.lower() == ".zip":
        path.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, data in files.items():
                archive.writestr(name, data)
    else:
        if path.exists() and any(path.iterdir()):
            raise FileExistsError(f"{path} exists and is not empty")
        path.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (path / name).write_bytes(data)
    return row_counts(files)


def row_counts(files: dict[str, bytes]) -> dict[str, int]:
    """Return {file name: rows} (CSV without its header; the manifest counts as 1)."""
    return {name: count_rows(name, data) or 0 for name, data in files.items()}


__all__ = ["build_files", "export_bundle"]
