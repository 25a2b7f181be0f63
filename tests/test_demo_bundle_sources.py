"""The demo bundle's citations are checked against the real Approved Documents.

The demo bundle (questions/fixtures/demo-bundle) carries its own short source
excerpts so the product never needs ../shared at run time. These tests check,
with plain json/csv reading and no database, that those excerpts and the key's
quotes are verbatim from the real source text in
../shared/data/approved-documents, that the deliberate defects listed in the
manifest's ``demo_defects`` are the defects they claim to be, and that the
bundle is complete (every model answered every question, every response has two
grades, every question has two audits).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
BUNDLE = PROJECT_ROOT / "questions" / "fixtures" / "demo-bundle"
SOURCES = Path(__file__).resolve().parents[2] / "shared" / "data" / "approved-documents"

# doc_id in the bundle -> plain-text file of that Approved Document
SOURCE_FILES = {
    "ADA": "Text-Approved_Document_A-Content.txt",
    "ADB-V1": "Text-Approved_Document_B_vol_1-Content.txt",
    "ADB-V2": "Text-Approved_Document_B_vol_2-Content.txt",
    "ADC": "Text-Approved_Document_C-Content.txt",
    "ADD": "Text-Approved_Document_D-Content.txt",
    "ADE": "Text-Approved_Document_E-Content.txt",
    "ADF-V1": "Text-Approved_Document_F_V1-Content.txt",
    "ADG": "Text-Approved_Document_G-Content.txt",
    "ADH": "Text-Approved_Document_H-Content.txt",
    "ADJ": "Text-Approved_Document_J-Content.txt",
    "ADK": "Text-Approved_Document_K-Content.txt",
    "ADM-V1": "Text-Approved_Document_M_vol_1-Content.txt",
    "ADO": "Text-Approved_Document_O-Content.txt",
    "ADP": "Text-Approved_Document_P-Content.txt",
    "ADQ": "Text-Approved_Document_Q-Content.txt",
    "ADR-V1": "Text-Approved_Document_R_vol_1-Content.txt",
    "ADS": "Text-Approved_Document_S-Content.txt",
    "AD7": "Text-Approved_Document_7-Content.txt",
}

# Defects whose citation is, by design, not checkable against the real text.
UNCHECKABLE = {"missing_locator", "amended_requirement", "superseded_edition"}

# Running-header noise glued into the extracted text (see the shared README).
HEADER_JUNK = [
    re.compile(r"(?:O ?N ?L ?I ?N ?E\s*V ?E ?R ?S ?I ?O ?N)+"),
    re.compile(r"Approved Document [A-Z0-9]+(?: Volume \d)?, \d{4} edition(?: \d{1,3}\b)?"),
    re.compile(r"Building Regulations 2010"),
]


def _jsonl(name: str) -> list[dict]:
    with open(BUNDLE / name, encoding="utf-8-sig") as f:
        return [json.loads(line) for line in f if line.strip()]


def _csv(name: str) -> list[dict]:
    with open(BUNDLE / name, encoding="utf-8-sig", newline="") as f:
        return list(csv.DictReader(f))


def _strip_junk(text: str) -> str:
    for rx in HEADER_JUNK:
        text = rx.sub(" ", text)
    return text


def _squash(text: str) -> str:
    return " ".join(text.split())


MANIFEST = json.loads((BUNDLE / "manifest.json").read_text(encoding="utf-8-sig"))
QUESTIONS = _jsonl("questions.jsonl")
SECTIONS = {(s["doc_id"], s["locator"]): s for s in _jsonl("sections.jsonl")}
DEFECTS = {d["question_id"]: d for d in MANIFEST.get("demo_defects", [])}

CHECKABLE = [
    q
    for q in QUESTIONS
    if q.get("citation") and DEFECTS.get(q["question_id"], {}).get("defect") not in UNCHECKABLE
]

_source_cache: dict[str, str] = {}


def _source(doc_id: str) -> str:
    if doc_id not in _source_cache:
        path = SOURCES / SOURCE_FILES[doc_id]
        if not path.is_file():
            pytest.fail(
                f"real source text not available at {path} (../shared must sit beside the checkout)"
            )
        _source_cache[doc_id] = path.read_text(encoding="utf-8")
    return _source_cache[doc_id]


def _ids(qs: list[dict]) -> list[str]:
    return [q["question_id"] for q in qs]


# --------------------------------------------------------------------------- quotes and excerpts


@pytest.mark.parametrize("q", CHECKABLE, ids=_ids(CHECKABLE))
def test_quote_is_verbatim_in_bundle_section(q):
    cit = q["citation"]
    section = SECTIONS.get((cit["doc_id"], cit["locator"]))
    assert section is not None, (
        f"{q['question_id']}: no section row for {cit['doc_id']} {cit['locator']}"
    )
    assert cit.get("quote"), f"{q['question_id']}: a checkable citation should carry a quote"
    assert cit["quote"] in section["text"], (
        f"{q['question_id']}: quote not verbatim in the section text"
    )


@pytest.mark.parametrize("q", CHECKABLE, ids=_ids(CHECKABLE))
def test_quote_is_verbatim_in_real_source(q):
    cit = q["citation"]
    assert cit["doc_id"] in SOURCE_FILES, (
        f"{q['question_id']}: no source file mapped for {cit['doc_id']}"
    )
    assert cit["quote"] in _source(cit["doc_id"]), (
        f"{q['question_id']}: quote not in the real source file"
    )


SOURCED_SECTIONS = [s for key, s in SECTIONS.items() if key[0] in SOURCE_FILES]


@pytest.mark.parametrize(
    "section", SOURCED_SECTIONS, ids=[f"{s['doc_id']}:{s['locator']}" for s in SOURCED_SECTIONS]
)
def test_section_text_is_from_real_source(section):
    """Every excerpt of an Approved Document is real text (modulo whitespace and header junk)."""
    text = _squash(_strip_junk(section["text"]))
    assert len(section["text"]) <= 700, "excerpts should stay short"
    assert text, "empty excerpt"
    assert text in _squash(_strip_junk(_source(section["doc_id"]))), (
        f"{section['doc_id']} {section['locator']}: excerpt not found in the real source"
    )


def test_sections_that_are_not_verbatim_say_so():
    for (doc_id, locator), s in SECTIONS.items():
        if doc_id not in SOURCE_FILES:
            assert "not verbatim" in s["heading"], f"{doc_id} {locator}: paraphrase must be marked"
            assert s["text"].startswith("Summary, not verbatim"), f"{doc_id} {locator}"


def test_cited_sections_have_neighbours():
    """The review page shows neighbouring passages: each verbatim cited locator has at least one
    (unless the real document has only one numbered paragraph, as Approved Document D does)."""
    by_doc: dict[str, set[str]] = {}
    for doc_id, locator in SECTIONS:
        by_doc.setdefault(doc_id, set()).add(locator)
    for q in CHECKABLE:
        cit = q["citation"]
        numbered = re.findall(r"(?m)^\d+\.\d+\s", _source(cit["doc_id"]))
        if len(numbered) < 2:
            continue
        assert len(by_doc[cit["doc_id"]]) >= 2, f"{q['question_id']}: no neighbour rows"


# --------------------------------------------------------------------------- deliberate defects


def test_demo_defects_cover_the_four_kinds():
    kinds = {d["defect"] for d in DEFECTS.values()}
    assert kinds >= {"wrong_figure", "missing_locator", "superseded_edition", "amended_requirement"}
    qids = {q["question_id"] for q in QUESTIONS}
    assert set(DEFECTS) <= qids


def test_missing_locator_is_absent_from_bundle_and_real_source():
    for qid, d in DEFECTS.items():
        if d["defect"] != "missing_locator":
            continue
        cit = next(q for q in QUESTIONS if q["question_id"] == qid)["citation"]
        assert (cit["doc_id"], cit["locator"]) not in SECTIONS
        assert cit["locator"] not in _source(cit["doc_id"]), (
            f"{cit['locator']} unexpectedly exists in {cit['doc_id']}"
        )


def test_superseded_edition_defect_cites_a_superseded_document():
    docs = {d["doc_id"]: d for d in _csv("documents.csv")}
    for qid, d in DEFECTS.items():
        if d["defect"] != "superseded_edition":
            continue
        cit = next(q for q in QUESTIONS if q["question_id"] == qid)["citation"]
        doc = docs[cit["doc_id"]]
        assert doc["status"] == "superseded"
        assert doc["superseded_by"] in docs and docs[doc["superseded_by"]]["status"] == "current"


def test_wrong_figure_key_contradicts_its_own_source():
    for qid, d in DEFECTS.items():
        if d["defect"] != "wrong_figure":
            continue
        q = next(q for q in QUESTIONS if q["question_id"] == qid)
        source_figures = set(re.findall(r"\d+(?=\s*mm)", q["citation"]["quote"]))
        key_figures = set(re.findall(r"\d+(?=\s*mm)", q["answer"]))
        assert source_figures and key_figures
        assert not source_figures <= key_figures, "the key should misstate the quoted figure"


def test_amended_requirement_models_mostly_disagree_with_key():
    for qid, d in DEFECTS.items():
        if d["defect"] != "amended_requirement":
            continue
        texts = [r["text"] for r in _jsonl("responses.jsonl") if r["question_id"] == qid]
        removed = [t for t in texts if "removed" in t and "2024" in t]
        assert len(removed) >= 5


# --------------------------------------------------------------------------- counts and completeness


def test_counts_and_completeness():
    categories = _csv("categories.csv")
    documents = _csv("documents.csv")
    models = _csv("models.csv")
    judges = _csv("judges.csv")
    responses = _jsonl("responses.jsonl")
    grades = _jsonl("grades.jsonl")
    audits = _jsonl("audits.jsonl")

    assert MANIFEST["name"] == "uk-construction-demo"
    assert MANIFEST["grade_scale"] == [0, 1, 2]
    assert "Open Government Licence v3.0" in MANIFEST["license"]

    assert len(QUESTIONS) >= 40
    assert len({q["question_id"] for q in QUESTIONS}) == len(QUESTIONS)
    cat_ids = {c["category_id"] for c in categories}
    assert len({q["category_id"] for q in QUESTIONS}) >= 10
    assert {q["category_id"] for q in QUESTIONS} <= cat_ids
    doc_ids = {d["doc_id"] for d in documents}
    assert len(documents) >= 8
    assert len({q["citation"]["doc_id"] for q in QUESTIONS}) >= 8
    assert {q["citation"]["doc_id"] for q in QUESTIONS} <= doc_ids
    assert {s["doc_id"] for s in SECTIONS.values()} <= doc_ids
    assert {d["status"] for d in documents} <= {"current", "superseded", "withdrawn"}
    assert "superseded" in {d["status"] for d in documents}

    model_ids = [m["model_id"] for m in models]
    assert len(model_ids) == 6
    qids = [q["question_id"] for q in QUESTIONS]
    pairs = [(r["question_id"], r["model_id"]) for r in responses]
    assert len(pairs) == len(set(pairs)), "duplicate response"
    assert set(pairs) == {(q, m) for q in qids for m in model_ids}

    judge_ids = {j["judge_id"] for j in judges if j["role"] == "judge"}
    auditor_ids = {j["judge_id"] for j in judges if j["role"] == "auditor"}
    assert len(judge_ids) == 2 and len(auditor_ids) == 2
    per_response: dict[tuple[str, str], set[str]] = {}
    for g in grades:
        assert g["grade"] in (0, 1, 2, None)
        assert g["judge_id"] in judge_ids
        per_response.setdefault((g["question_id"], g["model_id"]), set()).add(g["judge_id"])
    assert len(grades) == 2 * len(pairs)
    assert set(per_response) == set(pairs)
    assert all(js == judge_ids for js in per_response.values())

    per_question: dict[str, set[str]] = {}
    for a in audits:
        assert a["verdict"] in ("correct", "wrong", "ungradeable")
        assert a["judge_id"] in auditor_ids
        per_question.setdefault(a["question_id"], set()).add(a["judge_id"])
    assert len(audits) == 2 * len(qids)
    assert set(per_question) == set(qids)
    assert all(a == auditor_ids for a in per_question.values())


def test_grades_show_disagreement_flags_and_audit_splits():
    grades = _jsonl("grades.jsonl")
    by_pair: dict[tuple[str, str], dict[str, object]] = {}
    for g in grades:
        by_pair.setdefault((g["question_id"], g["model_id"]), {})[g["judge_id"]] = g["grade"]
    both = [p for p in by_pair.values() if None not in p.values()]
    disagree = sum(1 for p in both if len(set(p.values())) > 1)
    assert 0.10 <= disagree / len(both) <= 0.20
    assert sum(1 for g in grades if g["grade"] is None) >= 1

    flagged = {(g["question_id"], g["judge_id"]) for g in grades if g["flag"]}
    amended = next(q for q, d in DEFECTS.items() if d["defect"] == "amended_requirement")
    wrong = next(q for q, d in DEFECTS.items() if d["defect"] == "wrong_figure")
    assert {j for q, j in flagged if q == amended} == {"ref-lenient", "ref-strict"}
    assert {j for q, j in flagged if q == wrong}

    adverse: dict[str, int] = {}
    for a in _jsonl("audits.jsonl"):
        adverse[a["question_id"]] = adverse.get(a["question_id"], 0) + (a["verdict"] != "correct")
    assert sum(1 for n in adverse.values() if n == 2) >= 2
    assert sum(1 for n in adverse.values() if n == 1) >= 4
    missing = next(q for q, d in DEFECTS.items() if d["defect"] == "missing_locator")
    assert adverse[missing] == 2


# --------------------------------------------------------------------------- the source indexer agrees

from questions.sources import parse_sections  # noqa: E402 - indexes the real files


@pytest.mark.parametrize("q", CHECKABLE, ids=_ids(CHECKABLE))
def test_cited_locator_is_found_by_the_source_indexer(q):
    cit = q["citation"]
    locators = {s.locator for s in parse_sections(_source(cit["doc_id"]))}
    assert cit["locator"] in locators, (
        f"{q['question_id']}: parse_sections does not find {cit['locator']}"
    )


def test_missing_locator_is_not_found_by_the_source_indexer():
    for qid, d in DEFECTS.items():
        if d["defect"] == "missing_locator":
            cit = next(q for q in QUESTIONS if q["question_id"] == qid)["citation"]
            locators = {s.locator for s in parse_sections(_source(cit["doc_id"]))}
            assert cit["locator"] not in locators
