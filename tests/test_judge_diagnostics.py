"""Judge diagnostics in the report (issue 21 item 4): length-grade rank correlation with
an interval, and the grade difference a judge gives its own vendor's models.

Checked against scipy.stats.spearmanr computed here, on hand-made arrays and on the
shared WildBench bundle read straight from its files.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm, spearmanr

from engine import GradeTable
from engine.diagnostics import length_grade_correlation, own_vendor_difference
from tests.test_agreement_real_data import (  # noqa: F401
    MTBENCH,
    WILDBENCH,
    _grades,
    _json,
    mtbench,
    wildbench,
)


def test_length_correlation_matches_scipy_and_the_bonett_wright_interval():
    rng = np.random.default_rng(3)
    lengths = rng.integers(50, 3000, 400).astype(float)
    grades = np.clip(np.round(lengths / 1500 + rng.normal(0, 0.8, 400)), 0, 2)
    got = length_grade_correlation(lengths, grades)
    rho = spearmanr(lengths, grades).statistic
    se = np.sqrt((1 + rho**2 / 2) / (400 - 3))
    z = np.arctanh(rho)
    assert got["n"] == 400 and got["spearman"] == pytest.approx(rho, abs=1e-4)
    assert got["ci_low"] == pytest.approx(np.tanh(z - norm.ppf(0.975) * se), abs=1e-4)
    assert got["ci_high"] == pytest.approx(np.tanh(z + norm.ppf(0.975) * se), abs=1e-4)
    assert got["cannot_compute"] is None


def test_length_correlation_says_why_it_cannot_compute():
    assert length_grade_correlation(np.arange(5.0), np.ones(5))["cannot_compute"] == (
        "5 graded responses, fewer than 10"
    )
    constant = length_grade_correlation(np.arange(20.0), np.full(20, 2.0))
    assert constant["spearman"] is None
    assert constant["cannot_compute"] == "every one of the 20 grades is the same"


def _table(rows: list[tuple[str, str, str, int]]) -> GradeTable:
    frame = pd.DataFrame(rows, columns=["question_id", "model_id", "judge_id", "grade"])
    return GradeTable.from_frame(frame, scale=[0, 1, 2])


def test_own_vendor_difference_by_hand():
    # jA (vendor a) gives a's model mA 2 where jB gives 1; on mB both give 1.
    rows = []
    for q in ("q1", "q2"):
        rows += [(q, "mA", "jA", 2), (q, "mA", "jB", 1), (q, "mB", "jA", 1), (q, "mB", "jB", 1)]
    out = own_vendor_difference(_table(rows), {"mA": "a", "mB": "b"}, {"jA": "a", "jB": "b"})
    by = {r["judge"]: r for r in out}
    # jA: own (mA) 2-1 = +1 on 2 responses; other (mB) 0; excess +1
    assert (by["jA"]["own_vendor_difference"], by["jA"]["other_vendor_difference"]) == (1, 0)
    assert (by["jA"]["excess"], by["jA"]["n_own"], by["jA"]["n_other"]) == (1, 2, 2)
    # jB: own (mB) 0; other (mA) 1-2 = -1; excess +1 (it is not harsher on its own family)
    assert (by["jB"]["own_vendor_difference"], by["jB"]["excess"]) == (0, 1)


def test_own_vendor_difference_says_why_it_cannot_compute():
    rows = [("q1", "mA", "jA", 2), ("q1", "mA", "jB", 1)]
    out = own_vendor_difference(_table(rows), {"mA": "a"}, {"jA": "", "jB": "b"})
    assert out[0]["cannot_compute"] == "judge jA has no vendor (judges.csv)"
    assert out[1]["cannot_compute"].startswith("every other judge is also from b or has no")
    out = own_vendor_difference(_table(rows), {"mA": "a"}, {"jA": "a", "jB": "b"})
    assert out[1]["cannot_compute"] == "no model under test is from b (models.csv)"
    one = own_vendor_difference(_table(rows[:1]), {"mA": "a"}, {"jA": "a"})
    assert one[0]["cannot_compute"] == "one judge only: no other judge graded the same responses"


@pytest.mark.django_db
def test_wildbench_report_gives_judge_diagnostics_matching_the_files(wildbench):  # noqa: F811
    doc = _json("report", "--benchmark", wildbench)
    diag = {d["judge"]: d for d in doc["judge_diagnostics"]}
    grades = _grades(WILDBENCH)
    lengths = {}
    with open(WILDBENCH / "responses.jsonl", encoding="utf-8-sig") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                lengths[(row["question_id"], row["model_id"])] = len(row["text"])
    judges = sorted(diag)
    assert judges == ["gpt-4-turbo-2024-04-09", "gpt-4o-2024-05-13"]
    for judge in judges:
        pairs = [(lengths[k], g[judge]) for k, g in grades.items() if g.get(judge) is not None]
        rho = spearmanr([p[0] for p in pairs], [p[1] for p in pairs]).statistic
        got = diag[judge]["length_grade"]
        assert got["n"] == len(pairs) and got["spearman"] == pytest.approx(rho, abs=1e-4)
        assert got["ci_low"] < got["spearman"] < got["ci_high"]
    # Both judges are openai: neither has an outside judge to be compared with.
    for judge in judges:
        own = diag[judge]["own_vendor"]
        assert own["own_vendor_models"] == ["gpt-3.5-turbo-0125"]
        assert own["excess"] is None
        assert own["cannot_compute"] == (
            "every other judge is also from openai or has no vendor: no outside judge to "
            "compare with"
        )


@pytest.mark.django_db
def test_mtbench_one_judge_cannot_compute_own_vendor(mtbench):  # noqa: F811
    doc = _json("report", "--benchmark", mtbench)
    [d] = doc["judge_diagnostics"]
    assert d["own_vendor"]["cannot_compute"] == (
        "one judge only: no other judge graded the same responses"
    )
    assert d["length_grade"]["spearman"] is not None
