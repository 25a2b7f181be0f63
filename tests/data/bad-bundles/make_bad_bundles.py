"""Regenerate the malformed bundles in this folder: `python make_bad_bundles.py`.

Each case is a small folder: a valid base bundle with one mistake, plus `expected.txt`
holding, one per line, substrings the import error output must contain. The test
(tests/test_bundle_bad.py) imports each and checks the messages and that nothing was
written. Zip traversal, zip bombs and over-long lines are generated inside the test.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent


def jl(*rows: object) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


Q = [
    {
        "question_id": "Q1",
        "category_id": "fire",
        "text": "Minimum stair width?",
        "answer": "800 mm",
        "citation": {"doc_id": "ADK", "locator": "1.1", "quote": "800 mm"},
    },
    {
        "question_id": "Q2",
        "category_id": "struct",
        "text": "U-value of a wall?",
        "answer": "0.18 W/(m²·K)",
        "citation": None,
    },
    {
        "question_id": "Q3",
        "category_id": "fire",
        "text": "Max pitch?",
        "answer": "42°",
        "citation": {"doc_id": "ADK", "locator": "Table 1.1"},
    },
]
R = [
    {"question_id": q["question_id"], "model_id": m, "text": f"{m} says {q['answer']}"}
    for q in Q
    for m in ("m1", "m2")
]
G = [
    {
        "question_id": r["question_id"],
        "model_id": r["model_id"],
        "judge_id": j,
        "grade": 2,
        "rationale": "ok",
        "flag": False,
        "flag_reason": None,
    }
    for r in R
    for j in ("j1", "j2")
]
A = [
    {"question_id": q["question_id"], "judge_id": "a1", "verdict": "correct", "rationale": "fine"}
    for q in Q
]

BASE = {
    "manifest.json": json.dumps({"name": "bad", "version": "1", "grade_scale": [0, 1, 2]}),
    "categories.csv": "category_id,name\nfire,Fire safety\nstruct,Structure\n",
    "documents.csv": "doc_id,title,short_title,kind,edition,published,status,superseded_by,url\n"
    "ADK,Approved Document K,AD K,approved_document,2013,2013-01-01,current,,\n",
    "sections.jsonl": jl(
        {"doc_id": "ADK", "locator": "1.1", "heading": "Width", "text": "800 mm"},
        {"doc_id": "ADK", "locator": "Table 1.1", "heading": "Pitch", "text": "42°"},
    ),
    "questions.jsonl": jl(*Q),
    "models.csv": "model_id,name,vendor\nm1,Model 1,openai\nm2,Model 2,google\n",
    "judges.csv": "judge_id,name,vendor,role\nj1,Judge 1,openai,judge\n"
    "j2,Judge 2,anthropic,judge\na1,Auditor 1,google,auditor\n",
    "responses.jsonl": jl(*R),
    "grades.jsonl": jl(*G),
    "audits.jsonl": jl(*A),
}


def with_row(rows: list[dict], index: int, **changes: object) -> str:
    rows = [dict(r) for r in rows]
    rows[index].update(changes)
    return jl(*rows)


CASES: dict[str, tuple[dict[str, str | bytes | None], str]] = {
    "manifest-missing": ({"manifest.json": None}, "manifest.json:0: file: required file missing"),
    "manifest-broken-json": (
        {"manifest.json": '{"name": "bad",'},
        "manifest.json:1: json: broken JSON",
    ),
    "manifest-name-not-slug": (
        {"manifest.json": '{"name": "bad name!"}'},
        "manifest.json:1: name:",
    ),
    "manifest-grade-scale-type": (
        {"manifest.json": '{"name": "bad", "grade_scale": "0-2"}'},
        "manifest.json:1: grade_scale: must be a list of at least two distinct integers",
    ),
    "questions-missing": (
        {"questions.jsonl": None},
        "questions.jsonl:0: file: required file missing",
    ),
    "questions-broken-json-line-2": (
        {"questions.jsonl": jl(Q[0]) + '{"question_id": "Q2", "text": oops}\n' + jl(Q[2])},
        "questions.jsonl:2: json: broken JSON",
    ),
    "questions-truncated": (
        {"questions.jsonl": jl(*Q)[:-40]},
        "questions.jsonl:3: json: broken JSON",
    ),
    "questions-duplicate-id": (
        {"questions.jsonl": with_row(Q, 2, question_id="Q1")},
        "questions.jsonl:3: question_id: duplicate 'Q1' (first on line 1)",
    ),
    "questions-unknown-category": (
        {"questions.jsonl": with_row(Q, 1, category_id="nope")},
        "questions.jsonl:2: category_id: unknown category 'nope'",
    ),
    "questions-id-wrong-type": (
        {"questions.jsonl": with_row(Q, 0, question_id=101)},
        "questions.jsonl:1: question_id: must be a string, not number",
    ),
    "questions-citation-unknown-doc": (
        {"questions.jsonl": with_row(Q, 1, citation={"doc_id": "ADZ", "locator": "1"})},
        "questions.jsonl:2: citation.doc_id: unknown document 'ADZ'",
    ),
    "questions-citation-wrong-type": (
        {"questions.jsonl": with_row(Q, 0, citation="ADK 1.1")},
        "questions.jsonl:1: citation: must be an object or null",
    ),
    "questions-line-not-object": (
        {"questions.jsonl": jl(Q[0]) + '["Q2"]\n' + jl(Q[2])},
        "questions.jsonl:2: json: each line must be a JSON object",
    ),
    "questions-empty-text": (
        {"questions.jsonl": with_row(Q, 0, text="  ")},
        "questions.jsonl:1: text: must not be empty",
    ),
    "questions-answer-missing": (
        {"questions.jsonl": jl({k: v for k, v in Q[0].items() if k != "answer"}, *Q[1:])},
        "questions.jsonl:1: answer: required field missing",
    ),
    "responses-unknown-model": (
        {"responses.jsonl": with_row(R, 2, model_id="m9")},
        "responses.jsonl:3: model_id: unknown model 'm9'",
    ),
    "responses-unknown-question": (
        {"responses.jsonl": with_row(R, 0, question_id="Q9")},
        "responses.jsonl:1: question_id: unknown question 'Q9'",
    ),
    "responses-duplicate": (
        {"responses.jsonl": jl(*R, R[1])},
        "responses.jsonl:7: model_id: duplicate response of 'm2' to 'Q1'",
    ),
    "responses-text-null": (
        {"responses.jsonl": with_row(R, 1, text=None)},
        "responses.jsonl:2: text: must be a string, not null",
    ),
    "grades-off-scale": (
        {"grades.jsonl": with_row(G, 1, grade=3)},
        "grades.jsonl:2: grade: 3 is not on the grade scale [0, 1, 2]",
    ),
    "grades-grade-string": (
        {"grades.jsonl": with_row(G, 0, grade="2")},
        "grades.jsonl:1: grade: string is not on the grade scale",
    ),
    "grades-grade-float": (
        {"grades.jsonl": with_row(G, 0, grade=1.5)},
        "grades.jsonl:1: grade: 1.5 is not on the grade scale",
    ),
    "grades-flag-wrong-type": (
        {"grades.jsonl": with_row(G, 0, flag="yes")},
        "grades.jsonl:1: flag: must be true or false, not string",
    ),
    "grades-unknown-judge": (
        {"grades.jsonl": with_row(G, 0, judge_id="j9")},
        "grades.jsonl:1: judge_id: unknown judge 'j9'",
    ),
    "grades-by-auditor": (
        {"grades.jsonl": with_row(G, 0, judge_id="a1")},
        "grades.jsonl:1: judge_id: 'a1' is an auditor, not a judge",
    ),
    "grades-duplicate": (
        {"grades.jsonl": jl(*G, G[0])},
        "grades.jsonl:13: judge_id: duplicate grade",
    ),
    "grades-no-response": (
        {"responses.jsonl": jl(*R[:-1])},
        "grades.jsonl:11: model_id: no response of model 'm2' to question 'Q3'",
    ),
    "grades-unknown-edition": (
        {"grades.jsonl": with_row(G, 0, edition="corrected-9")},
        "grades.jsonl:1: edition: unknown key edition 'corrected-9'",
    ),
    "grades-grade-missing": (
        {"grades.jsonl": jl({k: v for k, v in G[0].items() if k != "grade"}, *G[1:])},
        "grades.jsonl:1: grade: required field missing",
    ),
    "judges-missing-role-column": (
        {"judges.csv": "judge_id,name,vendor\nj1,J,openai\n"},
        "judges.csv:1: role: required column missing",
    ),
    "judges-bad-role": (
        {
            "judges.csv": BASE["judges.csv"].replace(
                "j1,Judge 1,openai,judge", "j1,Judge 1,openai,referee"
            )
        },
        "judges.csv:2: role: 'referee' is not one of judge, auditor",
    ),
    "judges-bad-backend": (
        {
            "judges.csv": "judge_id,name,vendor,role,backend\n"
            "j1,J1,openai,judge,gemini\nj2,J2,x,judge,\n"
            "a1,A1,y,auditor,\n"
        },
        "judges.csv:2: backend: 'gemini' is not one of",
    ),
    "models-wrong-field-count": (
        {"models.csv": "model_id,name,vendor\nm1,Model 1,openai\nm2,Model 2,google,extra\n"},
        "models.csv:3: row: expected 3 fields, got 4",
    ),
    "models-duplicate": (
        {
            "models.csv": "model_id,name,vendor\nm1,Model 1,openai\n"
            "m1,Model 1 again,openai\nm2,Model 2,google\n"
        },
        "models.csv:3: model_id: duplicate 'm1' (first on line 2)",
    ),
    "models-unterminated-quote": (
        {"models.csv": 'model_id,name,vendor\nm1,"Model 1,openai\nm2,Model 2,google\n'},
        "models.csv:3: csv: malformed CSV",
    ),
    "categories-missing-name-column": (
        {"categories.csv": "category_id\nfire\nstruct\n"},
        "categories.csv:1: name: required column missing",
    ),
    "documents-bad-date": (
        {"documents.csv": BASE["documents.csv"].replace("2013-01-01", "2013-13-45")},
        "documents.csv:2: published: '2013-13-45' is not an ISO date",
    ),
    "documents-bad-status": (
        {"documents.csv": BASE["documents.csv"].replace(",current,", ",obsolete,")},
        "documents.csv:2: status: 'obsolete' is not one of",
    ),
    "documents-unknown-superseded-by": (
        {"documents.csv": BASE["documents.csv"].replace(",current,,", ",superseded,ADX,")},
        "documents.csv:2: superseded_by: unknown document 'ADX'",
    ),
    "sections-unknown-doc": (
        {"sections.jsonl": jl({"doc_id": "ADQ", "locator": "1.1", "heading": "", "text": "x"})},
        "sections.jsonl:1: doc_id: unknown document 'ADQ'",
    ),
    "sections-duplicate-locator": (
        {
            "sections.jsonl": jl(
                {"doc_id": "ADK", "locator": "1.1", "text": "a"},
                {"doc_id": "ADK", "locator": "1.1", "text": "b"},
            )
        },
        "sections.jsonl:2: locator: duplicate '1.1' of 'ADK'",
    ),
    "audits-verdict-null": (
        {"audits.jsonl": with_row(A, 0, verdict=None)},
        "audits.jsonl:1: verdict:",
    ),
    "audits-bad-verdict": (
        {"audits.jsonl": with_row(A, 1, verdict="dubious")},
        "audits.jsonl:2: verdict: 'dubious' is not one of",
    ),
    "audits-by-judge": (
        {"audits.jsonl": with_row(A, 0, judge_id="j1")},
        "audits.jsonl:1: judge_id: 'j1' is a judge, not an auditor",
    ),
    # Issue 19 item 5: a grade the database cannot hold, ids that differ only in Unicode
    # normalisation, blank key answers.
    "manifest-grade-scale-out-of-range": (
        {"manifest.json": '{"name": "bad", "grade_scale": [0, 1, 2, 99999999999999999999]}'},
        "manifest.json:1: grade_scale: 99999999999999999999 is outside the range a grade can"
        " hold (-32768 to 32767)",
    ),
    "questions-id-nfd-twin": (
        {
            "questions.jsonl": with_row(
                [dict(Q[0], question_id="Q\u00e901"), *Q[1:]], 1, question_id="Qe\u030101"
            )
        },
        "questions.jsonl:2: question_id: 'Qe\u030101' is not in Unicode NFC form (combining"
        " characters U+0301): write it composed, as 'Q\u00e901'",
    ),
    "questions-answer-empty": (
        {"questions.jsonl": with_row(Q, 1, answer="")},
        "questions.jsonl:2: answer: must not be empty",
    ),
    "questions-answer-blank": (
        {"questions.jsonl": with_row(Q, 2, answer=" \t\u00a0 ")},
        "questions.jsonl:3: answer: must not be empty",
    ),
    "corrections-answer-blank": (
        {
            "corrections.jsonl": jl(
                {
                    "question_id": "Q1",
                    "action": "correct",
                    "answer": "   ",
                    "citation": None,
                    "reason": "other",
                }
            )
        },
        "corrections.jsonl:1: answer: must not be empty",
    ),
    "corrections-bad-action": (
        {
            "corrections.jsonl": jl(
                {
                    "question_id": "Q1",
                    "action": "rewrite",
                    "answer": "x",
                    "citation": None,
                    "reason": "other",
                }
            )
        },
        "corrections.jsonl:1: action: 'rewrite' is not one of correct, remove",
    ),
    "corrections-bad-reason": (
        {
            "corrections.jsonl": jl(
                {"question_id": "Q1", "action": "remove", "citation": None, "reason": "because"}
            )
        },
        "corrections.jsonl:1: reason: 'because' is not one of",
    ),
    "corrections-unknown-question": (
        {
            "corrections.jsonl": jl(
                {"question_id": "Q7", "action": "remove", "citation": None, "reason": "other"}
            )
        },
        "corrections.jsonl:1: question_id: unknown question 'Q7'",
    ),
    "wrong-encoding-latin1": (
        {
            "responses.jsonl": (jl(R[0]) + jl({**R[1], "text": "42°"}))
            .encode("utf-8")
            .replace("°".encode(), "°".encode("latin-1"))
            + jl(*R[2:]).encode()
        },
        "responses.jsonl:2: encoding: not valid UTF-8: byte 0xb0",
    ),
    "wrong-encoding-utf16": (
        {"models.csv": BASE["models.csv"].encode("utf-16")},
        "models.csv:1: encoding: not valid UTF-8",
    ),
}


def main() -> None:
    for old in HERE.iterdir():
        if old.is_dir():
            shutil.rmtree(old)
    for name, (changes, expected) in CASES.items():
        folder = HERE / name
        folder.mkdir()
        files = {**BASE, **changes}
        for fname, content in files.items():
            if content is None:
                continue
            data = content if isinstance(content, bytes) else content.encode("utf-8")
            (folder / fname).write_bytes(data)
        (folder / "expected.txt").write_text(expected + "\n", encoding="utf-8")
    print(f"{len(CASES)} bad bundles written")


if __name__ == "__main__":
    main()
