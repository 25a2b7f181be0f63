"""Seeded generator of realistic benchmark bundles, up to full scale.

`write_bundle(path)` writes the shape of the real benchmark (methodology.md): 1,001
questions in 20 categories citing clauses, tables and diagrams of a dozen source
documents, 18 models, 18,018 responses, two judges from different vendors (36,036 grades,
~20% disagreement, a few unparsed (null) grades, some flags) and two auditors (2,002
verdicts). The same seed gives byte-identical files. Reused by benchmarks and tests of
other parts (scoring engine, review, leaderboard).
"""

from __future__ import annotations

import csv
import io
import json
import random
import zipfile
from pathlib import Path
from typing import Any

CATEGORY_NAMES = [
    "Building Regulations",
    "British Standards",
    "Waterproofing",
    "Demolition",
    "Contracts",
    "Fire safety",
    "Structure",
    "Ventilation",
    "Drainage",
    "Energy efficiency",
    "Accessibility",
    "Acoustics",
    "Glazing",
    "Stairs and guarding",
    "Electrical safety",
    "Planning (GPDO)",
    "Health and safety (CDM)",
    "Timber frame",
    "Masonry",
    "Roofing",
]
DOC_PARTS = "ABCDEFGHJKMOPQRS"
UNITS = ["mm", "m", "m²", "W/(m²·K)", "°C", "kN/m²", "l/s", "dB"]
SNIPPETS = [
    "The minimum is {n} {u} measured at the finished floor level.",
    "A value ≤ {n} {u} applies where the storey height ≥ {m} m.",
    "Use {n} × {m} {u} unless Table {t} gives otherwise.",
    "The limit was raised to {n}\u00a0{u} in the {y} edition.",
    "Provide ½ of the clear width, i.e. {n} {u}, and not less than {m} {u}.",
]


def _sentence(rng: random.Random) -> str:
    return rng.choice(SNIPPETS).format(
        n=rng.randint(1, 900),
        m=rng.randint(1, 30),
        u=rng.choice(UNITS),
        t=f"{rng.randint(1, 9)}.{rng.randint(1, 9)}",
        y=rng.choice([2010, 2013, 2019, 2021]),
    )


def _text(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng) for _ in range(sentences))


def _csv(rows: list[list[Any]]) -> str:
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def build_bundle(
    *,
    n_questions: int = 1001,
    n_models: int = 18,
    n_categories: int = 20,
    n_documents: int = 12,
    sections_per_document: int = 20,
    seed: int = 0,
    name: str = "uk-construction-synthetic",
    corrections: int = 0,
    disagreement: float = 0.2,
    null_rate: float = 0.002,
    flag_rate: float = 0.02,
    response_sentences: int = 4,
) -> dict[str, str]:
    """Return {file name: text} of a bundle (see module docstring); deterministic in seed."""
    rng = random.Random(seed)
    files: dict[str, str] = {}
    files["manifest.json"] = (
        json.dumps(
            {
                "name": name,
                "version": "1.0",
                "grade_scale": [0, 1, 2],
                "description": f"Synthetic benchmark (seed {seed}) in the shape of the real one.",
                "license": "CC0-1.0 (synthetic)",
            },
            indent=2,
        )
        + "\n"
    )
    categories = [
        (
            f"C{i + 1:02d}",
            CATEGORY_NAMES[i % len(CATEGORY_NAMES)]
            + ("" if i < len(CATEGORY_NAMES) else f" {i // len(CATEGORY_NAMES) + 1}"),
        )
        for i in range(n_categories)
    ]
    files["categories.csv"] = _csv([["category_id", "name"], *map(list, categories)])
    docs = []
    for i in range(n_documents):
        part = DOC_PARTS[i % len(DOC_PARTS)] + ("" if i < len(DOC_PARTS) else str(i))
        superseded = i == 1 and n_documents > 2
        docs.append(
            [
                f"AD{part}",
                f"Approved Document {part}",
                f"AD {part}",
                "approved_document",
                "2013" if superseded else "2019",
                "2013-10-01" if superseded else "2019-07-01",
                "superseded" if superseded else "current",
                "ADA" if superseded else "",
                f"https://example.org/ad-{part.lower()}",
            ]
        )
    files["documents.csv"] = _csv(
        [
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
            *docs,
        ]
    )
    sections: list[dict[str, Any]] = []
    locators: dict[str, list[str]] = {}
    for doc in docs:
        locs = []
        for j in range(sections_per_document):
            kind = j % 5
            loc = (
                f"Table {j // 5 + 1}.{j % 5}"
                if kind == 3
                else f"Diagram {j // 5 + 1}.{j % 5}"
                if kind == 4
                else f"{j // 5 + 1}.{j + 1}"
            )
            locs.append(loc)
            sections.append(
                {
                    "doc_id": doc[0],
                    "locator": loc,
                    "heading": _sentence(rng)[:80],
                    "text": _text(rng, 3),
                }
            )
        locators[doc[0]] = locs
    files["sections.jsonl"] = _jsonl(sections)
    questions = []
    for i in range(n_questions):
        doc = rng.choice(docs)[0]
        citation = {"doc_id": doc, "locator": rng.choice(locators[doc])}
        if rng.random() < 0.5:
            citation["quote"] = _sentence(rng)
        questions.append(
            {
                "question_id": f"Q{i + 1:04d}",
                "category_id": categories[i % n_categories][0],
                "text": f"What does {doc} require? {_sentence(rng)}",
                "answer": _text(rng, 2),
                "citation": citation,
            }
        )
    files["questions.jsonl"] = _jsonl(questions)
    vendors = ["openai", "anthropic", "google", "meta", "mistral", "xai", "deepseek", "alibaba"]
    models = [
        [f"model-{i + 1:02d}", f"Model {i + 1:02d}", vendors[i % len(vendors)]]
        for i in range(n_models)
    ]
    files["models.csv"] = _csv([["model_id", "name", "vendor"], *models])
    files["judges.csv"] = _csv(
        [
            ["judge_id", "name", "vendor", "role", "backend", "model", "prompt_version"],
            ["j-openai", "Judge (OpenAI)", "openai", "judge", "", "gpt-4o", "v1"],
            ["j-anthropic", "Judge (Anthropic)", "anthropic", "judge", "", "claude-sonnet", "v1"],
            ["a-openai", "Auditor (OpenAI)", "openai", "auditor", "", "gpt-4o", "v1"],
            ["a-google", "Auditor (Google)", "google", "auditor", "", "gemini-pro", "v1"],
        ]
    )
    skill = {m[0]: 0.35 + 0.6 * (i + 0.5) / max(n_models, 1) for i, m in enumerate(models)}
    responses, grades = [], []
    for q in questions:
        for m in models:
            mid = m[0]
            text = "" if rng.random() < 0.001 else _text(rng, response_sentences)
            responses.append({"question_id": q["question_id"], "model_id": mid, "text": text})
            r = rng.random()
            truth = 2 if r < skill[mid] else (1 if r < skill[mid] + 0.15 else 0)
            second = (
                truth
                if rng.random() >= disagreement
                else rng.choice([g for g in (0, 1, 2) if g != truth])
            )
            for jid, grade in (("j-openai", truth), ("j-anthropic", second)):
                if rng.random() < null_rate:
                    grade = None
                flag = rng.random() < flag_rate
                grades.append(
                    {
                        "question_id": q["question_id"],
                        "model_id": mid,
                        "judge_id": jid,
                        "grade": grade,
                        "rationale": f"Grade {grade}: {_sentence(rng)}",
                        "flag": flag,
                        "flag_reason": "The key cites a superseded table." if flag else None,
                    }
                )
    files["responses.jsonl"] = _jsonl(responses)
    files["grades.jsonl"] = _jsonl(grades)
    audits = []
    for q in questions:
        for aid in ("a-openai", "a-google"):
            r = rng.random()
            verdict = "correct" if r < 0.85 else ("wrong" if r < 0.95 else "ungradeable")
            audits.append(
                {
                    "question_id": q["question_id"],
                    "judge_id": aid,
                    "verdict": verdict,
                    "rationale": _sentence(rng),
                }
            )
    files["audits.jsonl"] = _jsonl(audits)
    if corrections:
        rows = []
        for q in rng.sample(questions, min(corrections, len(questions))):
            if rng.random() < 0.73:
                rows.append(
                    {
                        "question_id": q["question_id"],
                        "action": "correct",
                        "answer": _text(rng, 2),
                        "citation": q["citation"],
                        "reason": rng.choice(
                            ["factually_wrong", "amended_or_repealed", "superseded_edition"]
                        ),
                        "note": "Checked against the current edition.",
                    }
                )
            else:
                rows.append(
                    {
                        "question_id": q["question_id"],
                        "action": "remove",
                        "answer": q["answer"],
                        "citation": q["citation"],
                        "reason": "ungradeable",
                        "note": "Ambiguous question.",
                    }
                )
        files["corrections.jsonl"] = _jsonl(rows)
    return files


def write_bundle(path: str | Path, **options: Any) -> dict[str, int]:
    """Write `build_bundle(**options)` to a folder, or a .zip when `path` ends in .zip.

    Returns {file name: rows} (CSV rows without the header).
    """
    files = build_bundle(**options)
    path = Path(path)
    if path.suffix == ".zip":
        path.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, text in files.items():
                archive.writestr(name, text.encode("utf-8"))
    else:
        path.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (path / name).write_bytes(text.encode("utf-8"))
    return {
        name: text.count("\n") - (1 if name.endswith(".csv") else 0) for name, text in files.items()
    }


def db_counts() -> dict[str, int]:
    """Return the row count of every table an import writes (to prove nothing was)."""
    from questions import models as q
    from scoring import models as s

    return {
        model.__name__: model.objects.count()
        for model in (
            q.Benchmark,
            q.Category,
            q.SourceDocument,
            q.Section,
            q.Question,
            q.KeyEdition,
            q.KeyEntry,
            q.ModelUnderTest,
            q.Response,
            s.Judge,
            s.Grade,
            s.AuditVerdict,
        )
    }


def snapshot(benchmark: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Return every row of `benchmark` by natural keys (no pks, no timestamps), sorted.

    Two benchmarks with equal snapshots hold the same data, whatever their names.
    """
    from questions import models as q
    from scoring import models as s

    b = benchmark
    data = {
        "benchmark": [(b.version, b.description, b.license, tuple(b.grade_scale))],
        "categories": list(
            q.Category.objects.filter(benchmark=b).values_list("category_id", "name")
        ),
        "documents": list(
            q.SourceDocument.objects.filter(benchmark=b).values_list(
                "doc_id",
                "title",
                "short_title",
                "kind",
                "edition",
                "published",
                "status",
                "superseded_by__doc_id",
                "url",
            )
        ),
        "sections": list(
            q.Section.objects.filter(document__benchmark=b).values_list(
                "document__doc_id", "locator", "heading", "text", "position"
            )
        ),
        "questions": list(
            q.Question.objects.filter(benchmark=b).values_list(
                "question_id", "category__category_id", "text"
            )
        ),
        "exclusions": list(
            q.AuditExclusion.objects.filter(key_entry__edition__benchmark=b).values_list(
                "key_entry__edition__name", "key_entry__question__question_id", "reason"
            )
        ),
        "editions": list(
            q.KeyEdition.objects.filter(benchmark=b).values_list(
                "name", "parent__name", "status", "note"
            )
        ),
        "entries": list(
            q.KeyEntry.objects.filter(edition__benchmark=b).values_list(
                "edition__name",
                "question__question_id",
                "answer",
                "has_citation",
                "citation_doc_id",
                "citation_document__doc_id",
                "citation_locator",
                "citation_quote",
                "removed",
                "reason",
                "note",
            )
        ),
        "models": list(
            q.ModelUnderTest.objects.filter(benchmark=b).values_list("model_id", "name", "vendor")
        ),
        "responses": list(
            q.Response.objects.filter(question__benchmark=b).values_list(
                "question__question_id", "model__model_id", "text"
            )
        ),
        "judges": list(
            s.Judge.objects.filter(benchmark=b).values_list(
                "judge_id", "name", "vendor", "role", "backend", "model", "prompt_version"
            )
        ),
        "grades": list(
            s.Grade.objects.filter(judge__benchmark=b).values_list(
                "response__question__question_id",
                "response__model__model_id",
                "judge__judge_id",
                "key_entry__edition__name",
                "key_entry__question__question_id",
                "prompt_version",
                "grade",
                "rationale",
                "flag",
                "flag_reason",
                "raw_output",
                "stop_reason",
            )
        ),
        "audits": list(
            s.AuditVerdict.objects.filter(auditor__benchmark=b).values_list(
                "key_entry__question__question_id",
                "key_entry__edition__name",
                "auditor__judge_id",
                "prompt_version",
                "verdict",
                "rationale",
                "raw_output",
            )
        ),
    }
    return {k: sorted(v, key=repr) for k, v in data.items()}
