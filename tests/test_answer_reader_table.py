"""The answer reader against a table of response endings (issue 27 item 1).

tests/data/answer_endings.jsonl: one row per ending, each reading checked by hand.
Rows "gsm8k-dev/...", "cruxeval-dev/..." and "mtbench-reference/..." are real endings
(at most the last 700 characters of a response in ../shared/data/detect/*/bundle or
../shared/data/bundles/*; "source" names corpus, question and model), read for the kind
and unit of that question's key, as the responses-agree detector reads them. Rows
"hand/..." are written here for conventions those corpora lack: lettered options in every
style up to J, option text matched back to its letter, minus signs and dashes, thousands
separated by thin and no-break spaces, scientific notation, units of one dimension, JSON
objects, \\boxed{}, and endings that must stay unread. Rows "hand/conventions-NN" (issue 27,
conventions none of the corpora uses): <answer>/<final_answer> tags, "Final answer:" and
"ANSWER:" lines, numbered ("Option 3", "(3)") and roman ("(iii)") options closing the
question, true/false, yes/no in tags, \\frac and \\dfrac, Unicode vulgar fractions and the
fraction slash, "×10^" and "· 10^", units of one dimension, a bold answer in a markdown
table, and counts for "how many" ("zero brothers", "not ... any", "none", an echo of the
question led by its subject).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judges.answers import final_answer

TABLE = Path(__file__).resolve().parent / "data" / "answer_endings.jsonl"
ROWS = [json.loads(line) for line in TABLE.read_text(encoding="utf-8").splitlines()]


def test_the_table_is_large_and_mixed():
    assert len(ROWS) >= 150
    corpora = {r["source"].split("/")[0] for r in ROWS}
    assert {"gsm8k-dev", "cruxeval-dev", "mtbench-reference", "hand"} <= corpora
    kinds = {r["expected_kind"] for r in ROWS}
    assert {"choice", "number", "literal", "yes_no", "true_false", "count", "unread"} <= kinds


@pytest.mark.parametrize("row", ROWS, ids=[r["source"] for r in ROWS])
def test_reading(row):
    a = final_answer(
        row["text"],
        question=row["question"],
        kind=row["kind"],
        unit=row["unit"],
        key_is_str=row["key_is_str"],
    )
    assert (a.kind, a.label, a.ambiguous) == (
        row["expected_kind"],
        row["expected_label"],
        row["expected_ambiguous"],
    )
    assert a.is_read == (row["expected_kind"] != "unread")


def test_a_question_that_asks_no_how_many_reads_no_count():
    """crux-151's planted key "000 this is ..." was read as the count "0 thi": "697 this" in
    the question's code made "this" a counted noun. Counts are read only for "how many"."""
    from judges.answers import answer_kinds

    question = (
        "Complete the assertion with a literal.\n[PYTHON]\ndef f(text):\n    return text\n"
        "assert f('697 this is the ultimate 7 address to attack') == ??\n[/PYTHON]"
    )
    assert "count" not in answer_kinds(question)
    key = final_answer(
        "000 this is the ultimate 0 address to attack", question=question, strict=True
    )
    assert key.kind != "count"
    asked = "David has three sisters. How many brothers does David have?"
    assert "count" in answer_kinds(asked)
    assert final_answer("David has no brothers.", question=asked).label == "0 brothers"
