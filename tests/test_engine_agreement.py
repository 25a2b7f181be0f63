"""Scoring engine: inter-rater statistics per judge pair (pure numpy, no database)."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from engine import GradeTable, compute_agreement, pair_statistics
from engine.agreement import _alpha_ordinal_from_confusion

from .test_engine import hand_table, read_bundle, rows_from

pytestmark: list = []

SHARED = Path(__file__).resolve().parents[2] / "shared"


def test_hand_table_pair_statistics():
    # The 11 responses of tests/test_engine.py's HAND table graded by both judges
    # (B q3 has a null grade: n_missing = 1; q5 is excluded from scoring).
    # Confusion, rows j1, columns j2, labels 0 1 2:
    #   [[1, 1, 0], [0, 2, 0], [1, 1, 5]]     margins j1 [2, 2, 7], j2 [2, 4, 5]
    # exact = 8/11.  Cohen: p_o = 8/11, p_e = (2*2 + 2*4 + 7*5)/121 = 47/121,
    #   kappa = (88 - 47)/(121 - 47) = 41/74.
    # Quadratic weights w = (i-j)^2/4: sum w*O = .25 + .25 + 1 = 1.5;
    #   sum w*E = (.25*2*4 + 1*2*5 + .25*2*2 + .25*2*5 + 1*7*2 + .25*7*4)/11 = 36.5/11,
    #   kappa_q = 1 - 1.5*11/36.5 = 40/73.
    # Krippendorff ordinal: o = C + C^T = [[2,1,1],[1,4,1],[1,1,10]], n_v = [4, 6, 12], n = 22;
    #   delta01 = (4+6-5)^2 = 25, delta12 = (6+12-9)^2 = 81, delta02 = (4+6+12-8)^2 = 196;
    #   sum o*delta = 2*(25 + 196 + 81) = 604; sum n_c n_k delta = 2*(600 + 9408 + 5832) = 31680;
    #   alpha = 1 - 21*604/31680 = 1583/2640.
    report = compute_agreement(hand_table())
    (pair,) = report.pairs
    assert pair.judges == ("j1", "j2")
    assert (pair.n, pair.n_missing) == (11, 1)
    assert pair.confusion == [[1, 1, 0], [0, 2, 0], [1, 1, 5]]
    assert pair.exact_agreement == pytest.approx(8 / 11)
    assert pair.cohen_kappa == pytest.approx(41 / 74)
    assert pair.cohen_kappa_quadratic == pytest.approx(40 / 73)
    assert pair.krippendorff_alpha_ordinal == pytest.approx(1583 / 2640)


def test_all_identical_grades_give_none_not_nan():
    table = GradeTable.from_frame(rows_from({"m": [(2, 2)] * 5}), scale=[0, 1, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the engine must not leak warnings either
        (pair,) = compute_agreement(table).pairs
    assert pair.exact_agreement == 1.0
    assert pair.cohen_kappa is None
    assert pair.cohen_kappa_quadratic is None
    assert pair.krippendorff_alpha_ordinal is None
    assert any("single category" in note for note in pair.notes)
    text = json.dumps(compute_agreement(table).to_dict(), allow_nan=False)
    assert "NaN" not in text


def test_no_common_responses_give_none_with_a_note():
    frame = rows_from({"m": [(None, 2), (1, None)]})
    (pair,) = compute_agreement(GradeTable.from_frame(frame, scale=[0, 1, 2])).pairs
    assert (pair.n, pair.n_missing) == (0, 2)
    assert pair.exact_agreement is None and pair.cohen_kappa is None
    assert pair.confusion == [[0, 0, 0], [0, 0, 0], [0, 0, 0]]
    assert any("no response graded by both" in note for note in pair.notes)


def test_one_judge_has_no_pairs_and_says_why():
    frame = pd.DataFrame([{"question_id": "q1", "model_id": "m", "judge_id": "only", "grade": 1}])
    report = compute_agreement(GradeTable.from_frame(frame, scale=[0, 1, 2]))
    assert report.pairs == []
    assert any("agreement needs two judges" in note for note in report.notes)


def test_three_judges_give_three_pairs():
    frame = rows_from({"m": [(0, 0, 1), (2, 2, 2), (1, 2, 1)]}, judges=("a", "b", "c"))
    report = compute_agreement(GradeTable.from_frame(frame, scale=[0, 1, 2]))
    assert [p.judges for p in report.pairs] == [("a", "b"), ("a", "c"), ("b", "c")]
    assert [p.exact_agreement for p in report.pairs] == pytest.approx([2 / 3, 2 / 3, 1 / 3])


def test_confusion_matrix_covers_the_full_scale():
    pair = pair_statistics([3, 4, 4], [3, 4, 5], scale=range(1, 11))
    assert len(pair.confusion) == 10 and all(len(r) == 10 for r in pair.confusion)
    assert pair.confusion[2][2] == 1 and pair.confusion[3][4] == 1


def test_alpha_from_confusion_matches_krippendorff_on_random_data():
    rng = np.random.default_rng(0)
    for scale in ([0, 1, 2], list(range(1, 11))):
        a = rng.choice(scale, 500)
        b = np.where(rng.random(500) < 0.6, a, rng.choice(scale, 500))
        expected = krippendorff.alpha(
            reliability_data=np.vstack([a, b]).astype(float),
            level_of_measurement="ordinal",
            value_domain=scale,
        )
        confusion = confusion_matrix(a, b, labels=scale)
        assert _alpha_ordinal_from_confusion(confusion) == pytest.approx(expected, rel=1e-9)


def wildbench_vectors():
    manifest, grades, _ = read_bundle("wildbench-2judges")
    frame = pd.DataFrame(grades)
    wide = frame.pivot_table(
        index=["question_id", "model_id"], columns="judge_id", values="grade", aggfunc="first"
    ).dropna()
    judges = sorted(frame.judge_id.unique())
    return manifest["grade_scale"], grades, wide[judges[0]].to_numpy(), wide[judges[1]].to_numpy()


def test_wildbench_statistics_match_sklearn_and_krippendorff():
    scale, grades, a, b = wildbench_vectors()
    table = GradeTable.from_records(grades, scale=scale)
    (pair,) = compute_agreement(table).pairs
    assert pair.judges == ("gpt-4-turbo-2024-04-09", "gpt-4o-2024-05-13")
    assert (pair.n, pair.n_missing) == (len(a), 0) == (2047, 0)
    assert pair.exact_agreement == pytest.approx(np.mean(a == b))
    assert pair.cohen_kappa == pytest.approx(cohen_kappa_score(a, b, labels=scale))
    assert pair.cohen_kappa_quadratic == pytest.approx(
        cohen_kappa_score(a, b, labels=scale, weights="quadratic")
    )
    # All ten grades occur, so the labels argument changes nothing here.
    assert pair.cohen_kappa_quadratic == pytest.approx(cohen_kappa_score(a, b, weights="quadratic"))
    alpha = krippendorff.alpha(
        reliability_data=np.vstack([a, b]).astype(float),
        level_of_measurement="ordinal",
        value_domain=scale,
    )
    assert pair.krippendorff_alpha_ordinal == pytest.approx(alpha)
    assert pair.confusion == confusion_matrix(a, b, labels=scale).tolist()
    assert _alpha_ordinal_from_confusion(np.asarray(pair.confusion)) == pytest.approx(alpha)
    for value in (pair.cohen_kappa, pair.cohen_kappa_quadratic, pair.krippendorff_alpha_ordinal):
        assert value is not None and math.isfinite(value)
    assert pair.notes == []
