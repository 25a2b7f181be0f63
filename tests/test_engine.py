"""Scoring engine: scores, counts, intervals, ranks and bands (pure numpy, no database)."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine import (
    GradeTable,
    assign_bands,
    assign_bands_ci_overlap,
    compute_agreement,
    compute_leaderboard,
    wilson_interval,
)

pytestmark: list = []

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).resolve().parents[2] / "shared"
BUNDLES = SHARED / "data" / "bundles"


# ---------------------------------------------------------------- fixtures
# The hand-computed table.  Scale [0, 1, 2]; judges j1, j2; grades (j1, j2):
#
#            q1 regs   q2 regs   q3 standards  q4 standards  q5 (excluded)
#   model A  (2, 2)    (1, 1)    (2, 1)        (0, 0)        (0, 0)
#   model B  (2, 2)    (2, 2)    (null, 2)     (1, 1)        (0, 0)
#   model C  (0, 1)    (2, 2)    (2, 2)        (2, 0)        (0, 0)
#
# q5 is excluded from scoring, so it must change nothing (it would lower every score).
# A: counted q1 q2 q4 = 3, points 2+1+0 = 3, score 3 / (2 x 3) = 50.0 %;
#    disagreement q3 = 1; agreement 3/4.  regs: 2 counted, 3 points -> 75 %;
#    standards: 1 counted (0 points) -> 0 %, 1 disagreement.
# B: counted q1 q2 q4 = 3, points 2+2+1 = 5, score 5/6 = 83.333.. %; unparsed q3 = 1
#    (a null grade, not a 0 — as a 0 it would be a disagreement); agreement 3/3.
#    standards: q4 only -> 1/2 = 50 %, 1 unparsed.
# C: counted q2 q3 = 2, points 4, score 4/4 = 100 %; disagreement q1 q4 = 2; agreement 2/4.
# Overall agreement = counted / graded by both = (3+3+2) / (3+3+2 + 1+0+2) = 8/11.
# Bands (gap 1.5): 100 | 83.33 | 50 -> 3 bands, ranks "1", "2", "3".
HAND = {
    "A": [(2, 2), (1, 1), (2, 1), (0, 0), (0, 0)],
    "B": [(2, 2), (2, 2), (None, 2), (1, 1), (0, 0)],
    "C": [(0, 1), (2, 2), (2, 2), (2, 0), (0, 0)],
}
HAND_QUESTIONS = pd.DataFrame(
    {
        "question_id": ["q1", "q2", "q3", "q4", "q5"],
        "category_id": ["regs", "regs", "standards", "standards", "standards"],
        "status": ["scored", "scored", "scored", "scored", "excluded"],
    }
)


def rows_from(grid: dict[str, list[tuple]], judges=("j1", "j2")) -> pd.DataFrame:
    rows = []
    for model, cells in grid.items():
        for qi, grades in enumerate(cells, start=1):
            for judge, grade in zip(judges, grades, strict=True):
                rows.append(
                    {"question_id": f"q{qi}", "model_id": model, "judge_id": judge, "grade": grade}
                )
    return pd.DataFrame(rows)


def hand_table() -> GradeTable:
    return GradeTable.from_frame(rows_from(HAND), scale=[0, 1, 2], questions=HAND_QUESTIONS)


def agreed_table(per_model: dict[str, list[int]], scale=(0, 1, 2)) -> GradeTable:
    """Two judges that always agree: per_model[m][i] is the grade of question i."""
    return GradeTable.from_frame(
        rows_from({m: [(g, g) for g in grades] for m, grades in per_model.items()}),
        scale=list(scale),
    )


# ---------------------------------------------------------------- scores and counts
def test_hand_table_counts_and_scores():
    board = compute_leaderboard(hand_table(), n_bootstrap=200, seed=1)
    a, b, c = board.model("A"), board.model("B"), board.model("C")
    assert (a.n_counted, a.n_excluded_disagreement, a.n_unparsed) == (3, 1, 0)
    assert (b.n_counted, b.n_excluded_disagreement, b.n_unparsed) == (3, 0, 1)
    assert (c.n_counted, c.n_excluded_disagreement, c.n_unparsed) == (2, 2, 0)
    assert a.score == pytest.approx(50.0)
    assert b.score == pytest.approx(500 / 6)
    assert c.score == pytest.approx(100.0)
    assert (a.agreement_rate, b.agreement_rate, c.agreement_rate) == (0.75, 1.0, 0.5)
    assert board.agreement_rate == pytest.approx(8 / 11)
    assert board.questions_scored == 4
    assert (board.responses_total, board.responses_counted) == (12, 8)
    assert (board.responses_excluded_disagreement, board.responses_unparsed) == (3, 1)


def test_hand_table_ranks_and_bands():
    board = compute_leaderboard(hand_table(), n_bootstrap=200, seed=1)
    assert [(m.model_id, m.rank, m.band) for m in board.models] == [
        ("C", "1", 1),
        ("B", "2", 2),
        ("A", "3", 3),
    ]
    assert board.n_bands == 3
    assert board.banding == "gap"


def test_hand_table_categories():
    board = compute_leaderboard(hand_table(), n_bootstrap=0)
    cats = {m.model_id: {c.category: c for c in m.categories} for m in board.models}
    assert cats["A"]["regs"].score == pytest.approx(75.0)
    assert (cats["A"]["standards"].n_counted, cats["A"]["standards"].score) == (1, 0.0)
    assert cats["A"]["standards"].n_excluded_disagreement == 1
    assert cats["B"]["standards"].score == pytest.approx(50.0)
    assert cats["B"]["standards"].n_unparsed == 1
    assert cats["C"]["regs"].score == cats["C"]["standards"].score == pytest.approx(100.0)
    assert cats["C"]["regs"].n_excluded_disagreement == 1


def test_excluded_question_changes_nothing():
    with_q5 = compute_leaderboard(hand_table(), n_bootstrap=100, seed=3).to_dict()
    only_scored = GradeTable.from_frame(
        rows_from({m: cells[:4] for m, cells in HAND.items()}),
        scale=[0, 1, 2],
        questions=HAND_QUESTIONS.iloc[:4],
    )
    without = compute_leaderboard(only_scored, n_bootstrap=100, seed=3).to_dict()
    assert with_q5 == without


def test_null_grade_is_unparsed_never_zero():
    table = GradeTable.from_frame(rows_from({"m": [(2, 2), (None, None)]}), scale=[0, 1, 2])
    row = compute_leaderboard(table, n_bootstrap=0).model("m")
    assert (row.n_counted, row.n_unparsed, row.n_excluded_disagreement) == (1, 1, 0)
    assert row.score == 100.0  # as a 0 it would be 50.0


def test_null_grade_from_one_judge_is_unparsed_not_disagreement():
    table = GradeTable.from_frame(rows_from({"m": [(2, 2), (0, None)]}), scale=[0, 1, 2])
    row = compute_leaderboard(table, n_bootstrap=0).model("m")
    assert (row.n_counted, row.n_unparsed, row.n_excluded_disagreement) == (1, 1, 0)


def test_missing_grade_row_is_neither_counted_nor_unparsed():
    frame = rows_from({"m": [(2, 2), (1, 1)]})
    frame = frame[~((frame.question_id == "q2") & (frame.judge_id == "j2"))]
    table = GradeTable.from_frame(frame, scale=[0, 1, 2])
    row = compute_leaderboard(table, n_bootstrap=0).model("m")
    assert (row.n_counted, row.n_unparsed, row.n_missing_grade) == (1, 0, 1)


def test_nullable_int_and_float_nan_grades_are_the_same_table():
    frame = rows_from(HAND)
    as_float = frame.assign(grade=frame.grade.astype(float))
    as_int = frame.assign(grade=pd.array(frame.grade.tolist(), dtype="Int64"))
    a = compute_leaderboard(GradeTable.from_frame(as_float, scale=[0, 1, 2]), seed=5)
    b = compute_leaderboard(GradeTable.from_frame(as_int, scale=[0, 1, 2]), seed=5)
    assert a.to_dict() == b.to_dict()


def test_scale_one_to_ten_maps_min_to_zero_and_max_to_hundred():
    # (10 - 1) + (1 - 1) = 9 points out of 2 x (10 - 1) = 18 -> 50 %.
    table = agreed_table({"half": [10, 1], "top": [10, 10], "bottom": [1, 1]}, scale=range(1, 11))
    board = compute_leaderboard(table, n_bootstrap=100)
    assert board.model("half").score == pytest.approx(50.0)
    assert board.model("top").score == 100.0
    assert board.model("bottom").score == 0.0


def test_scale_zero_one_two_matches_rule_2_formula():
    # methodology.md rule 2: sum / (2 x counted) = (2 + 1 + 1) / 6.
    table = agreed_table({"m": [2, 1, 1]})
    assert compute_leaderboard(table, n_bootstrap=0).model("m").score == pytest.approx(400 / 6)


def test_model_without_counted_responses_has_no_score_band_or_rank():
    table = GradeTable.from_frame(rows_from({"good": [(2, 2)], "split": [(0, 2)]}), scale=[0, 1, 2])
    board = compute_leaderboard(table)
    last = board.models[-1]
    assert last.model_id == "split"
    assert {last.score, last.band, last.rank, last.ci_low, last.ci_method} == {None}
    assert board.n_bands == 1
    assert any("split" in note for note in board.notes)
    json.dumps(board.to_dict(), allow_nan=False)


def test_off_scale_grade_is_refused():
    with pytest.raises(ValueError, match="not on the scale"):
        GradeTable.from_frame(rows_from({"m": [(3, 2)]}), scale=[0, 1, 2])
    with pytest.raises(ValueError, match="not on the scale"):
        GradeTable.from_frame(rows_from({"m": [(1.5, 2)]}), scale=[0, 1, 2])


def test_duplicate_grade_row_is_refused():
    frame = rows_from({"m": [(2, 2)]})
    with pytest.raises(ValueError, match="duplicate grade"):
        GradeTable.from_frame(pd.concat([frame, frame.iloc[:1]]), scale=[0, 1, 2])


def test_graded_question_missing_from_questions_frame_is_refused():
    with pytest.raises(ValueError, match="not in the questions frame"):
        GradeTable.from_frame(rows_from(HAND), scale=[0, 1, 2], questions=HAND_QUESTIONS.iloc[:3])


# ---------------------------------------------------------------- bands and ranks
def test_gap_of_exactly_the_threshold_starts_a_new_band():
    bands = {p.model_id: p.band for p in assign_bands({"a": 80.0, "b": 78.5}, 1.5)}
    assert bands == {"a": 1, "b": 2}


def test_gap_just_under_the_threshold_keeps_one_band():
    bands = {p.model_id: p.band for p in assign_bands({"a": 80.0, "b": 78.51}, 1.5)}
    assert bands == {"a": 1, "b": 1}


def test_floating_error_cannot_tip_an_exact_threshold_gap():
    # 2.3 - 0.8 is 1.4999999999999998 in binary floating point, although the
    # decimal gap is exactly the threshold.
    assert 2.3 - 0.8 < 1.5  # a naive comparison would keep one band
    bands = {p.model_id: p.band for p in assign_bands({"a": 2.3, "b": 0.8}, 1.5)}
    assert bands == {"a": 1, "b": 2}
    # ... and equal-in-decimal scores computed differently are still a tie.
    placed = assign_bands({"x": 0.1 + 0.2, "y": 0.3}, 1.5)
    assert [p.rank for p in placed] == ["=1", "=1"]


def test_ties_share_rank_and_band_with_competition_ranking():
    placed = assign_bands({"a": 90.0, "b": 90.0, "c": 80.0, "d": 79.9, "e": 79.9}, 1.5)
    assert [(p.model_id, p.rank, p.band) for p in placed] == [
        ("a", "=1", 1),
        ("b", "=1", 1),
        ("c", "3", 2),
        ("d", "=4", 2),
        ("e", "=4", 2),
    ]


def test_ties_share_a_band_even_with_zero_gap_threshold():
    placed = assign_bands({"a": 90.0, "b": 90.0, "c": 89.0}, 0.0)
    assert [p.band for p in placed] == [1, 1, 2]


def test_bands_do_not_depend_on_input_order():
    scores = {"m1": 71.2, "m2": 70.0, "m3": 70.0, "m4": 68.5, "m5": 68.49, "m6": 60.0, "m7": None}
    expected = assign_bands(scores, 1.5)
    rng = random.Random(7)
    items = list(scores.items())
    for _ in range(20):
        rng.shuffle(items)
        assert assign_bands(dict(items), 1.5) == expected
    assert [p.band for p in expected] == [1, 1, 1, 2, 2, 3, None]


def test_leaderboard_does_not_depend_on_row_order():
    rng = np.random.default_rng(11)
    frame = synthetic_frame(rng, n_models=6, n_questions=60)
    first = compute_leaderboard(GradeTable.from_frame(frame, scale=[0, 1, 2]), seed=4).to_dict()
    shuffled = frame.sample(frac=1.0, random_state=3).reset_index(drop=True)
    second = compute_leaderboard(GradeTable.from_frame(shuffled, scale=[0, 1, 2]), seed=4).to_dict()
    assert first == second


def test_negative_band_gap_is_refused():
    with pytest.raises(ValueError):
        assign_bands({"a": 1.0}, -1.0)


def test_ci_overlap_banding_compares_with_the_band_leader():
    scores = {"a": 90.0, "b": 86.0, "c": 80.0, "d": 78.0}
    intervals = {"a": (85.0, 95.0), "b": (80.0, 88.0), "c": (76.0, 84.0), "d": (70.0, 81.0)}
    # c overlaps b but not the leader a, so it starts band 2; d overlaps c.
    placed = assign_bands_ci_overlap(scores, intervals)
    assert [(p.model_id, p.band) for p in placed] == [("a", 1), ("b", 1), ("c", 2), ("d", 2)]


def test_leaderboard_says_which_banding_it_uses():
    board = compute_leaderboard(hand_table(), n_bootstrap=200, banding="ci_overlap")
    assert board.to_dict()["banding"] == "ci_overlap"
    rebanded = compute_leaderboard(hand_table(), n_bootstrap=200).with_banding("ci_overlap")
    assert [(m.model_id, m.band) for m in rebanded.models] == [
        (m.model_id, m.band) for m in board.models
    ]
    with pytest.raises(ValueError):
        compute_leaderboard(hand_table(), banding="rank")


# ---------------------------------------------------------------- intervals
def test_wilson_interval_matches_the_formula():
    z, n = 1.96, 10
    # p = 1: centre (1 + z^2/2n)/(1 + z^2/n), half z/(1 + z^2/n) * sqrt(z^2/4n^2)
    # -> low = n / (n + z^2) = 10 / 13.8416 = 0.722460, high = 1.
    low, high = wilson_interval(10, 10, z)
    assert low == pytest.approx(n / (n + z * z)) == pytest.approx(0.722460, abs=1e-6)
    assert high == pytest.approx(1.0)
    # p = 0.5, n = 20: centre 0.5, half = z/(1 + z^2/20) * sqrt(0.25/20 + z^2/1600).
    half = z / (1 + z * z / 20) * math.sqrt(0.25 / 20 + z * z / 1600)
    assert wilson_interval(10, 20) == pytest.approx((0.5 - half, 0.5 + half))
    with pytest.raises(ValueError):
        wilson_interval(1, 0)


def test_two_sided_z_equals_scipys_normal_quantile():
    from scipy.stats import norm

    from engine.intervals import two_sided_z

    for confidence in (0.5, 0.8, 0.9, 0.95, 0.99, 0.999):
        assert two_sided_z(confidence) == pytest.approx(norm.ppf(0.5 + confidence / 2), abs=1e-9)
    assert two_sided_z(0.95) == pytest.approx(1.959964, abs=1e-6)  # printed tables
    for bad in (0, 1, 1.5):
        with pytest.raises(ValueError):
            two_sided_z(bad)


def test_degenerate_bootstrap_interval_falls_back_to_wilson():
    table = agreed_table({"perfect": [2] * 10, "mixed": [2, 1, 0, 2, 1, 0, 2, 2, 1, 0]})
    board = compute_leaderboard(table, n_bootstrap=500, seed=0)
    perfect = board.model("perfect")
    assert perfect.ci_method == "wilson"
    assert perfect.ci_high - perfect.ci_low > 0
    assert perfect.ci_low == pytest.approx(100 * 10 / (10 + 1.96**2), rel=1e-4)
    assert perfect.ci_high == pytest.approx(100.0)
    assert board.model("mixed").ci_method == "bootstrap"
    assert any("Wilson" in note for note in board.notes)


def test_bootstrap_is_deterministic_with_a_seed():
    rng = np.random.default_rng(2)
    table = GradeTable.from_frame(synthetic_frame(rng, n_models=5, n_questions=80), scale=[0, 1, 2])
    a = compute_leaderboard(table, seed=42)
    b = compute_leaderboard(table, seed=42)
    c = compute_leaderboard(table, seed=43)
    assert [(m.ci_low, m.ci_high) for m in a.models] == [(m.ci_low, m.ci_high) for m in b.models]
    assert [(m.ci_low, m.ci_high) for m in a.models] != [(m.ci_low, m.ci_high) for m in c.models]
    for m in a.models:
        assert m.ci_low <= m.score <= m.ci_high


def test_to_dict_is_json_safe_and_has_the_cli_keys():
    data = compute_leaderboard(hand_table(), n_bootstrap=100).to_dict()
    text = json.dumps(data, allow_nan=False)
    assert "NaN" not in text
    assert {"agreement_rate", "n_bands", "band_gap", "models", "banding"} <= set(data)
    assert {
        "model_id",
        "score",
        "n_counted",
        "n_excluded_disagreement",
        "n_unparsed",
        "ci_low",
        "ci_high",
        "band",
        "rank",
        "ci_method",
    } <= set(data["models"][0])


def test_engine_imports_no_django():
    code = (
        "import sys, engine; "
        "bad = [m for m in sys.modules if m == 'django' or m.startswith('django.')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=PROJECT_ROOT)
    for path in (PROJECT_ROOT / "scoring" / "engine").glob("*.py"):
        assert "import django" not in path.read_text() and "from django" not in path.read_text()


# ---------------------------------------------------------------- real bundles
def read_bundle(name: str):
    folder = BUNDLES / name
    manifest = json.loads((folder / "manifest.json").read_text())
    with (folder / "grades.jsonl").open() as fh:
        grades = [json.loads(line) for line in fh if line.strip()]
    with (folder / "questions.jsonl").open() as fh:
        questions = [json.loads(line) for line in fh if line.strip()]
    return manifest, grades, questions


def test_wildbench_scores_match_a_direct_pandas_computation():
    manifest, grades, questions = read_bundle("wildbench-2judges")
    table = GradeTable.from_records(
        grades,
        scale=manifest["grade_scale"],
        questions=[
            {"question_id": q["question_id"], "category_id": q["category_id"]} for q in questions
        ],
    )
    board = compute_leaderboard(table, seed=0)

    frame = pd.DataFrame(grades)
    wide = frame.pivot_table(
        index=["question_id", "model_id"], columns="judge_id", values="grade", aggfunc="first"
    )
    assert wide.notna().all().all()  # the bundle has no null grades
    agreed = wide[wide.iloc[:, 0] == wide.iloc[:, 1]].iloc[:, 0].rename("grade").reset_index()
    for model_id, group in agreed.groupby("model_id"):
        expected = ((group.grade - 1) / 9).mean() * 100
        row = board.model(model_id)
        assert row.score == pytest.approx(expected)
        assert row.n_counted == len(group)
        total = (wide.reset_index().model_id == model_id).sum()
        assert row.n_excluded_disagreement == total - len(group)
        assert row.ci_low < row.score < row.ci_high
    assert board.agreement_rate == pytest.approx(len(agreed) / len(wide))
    assert board.responses_total == 2047


def test_mtbench_one_judge_counts_every_grade_and_notes_agreement():
    manifest, grades, questions = read_bundle("mtbench-reference")
    table = GradeTable.from_records(
        grades,
        scale=manifest["grade_scale"],
        questions=[
            {"question_id": q["question_id"], "category_id": q["category_id"]} for q in questions
        ],
    )
    board = compute_leaderboard(table, seed=0)
    assert board.agreement_rate is None
    assert any("agreement needs two judges" in n for n in board.notes)
    frame = pd.DataFrame(grades)
    for model_id, group in frame.groupby("model_id"):
        row = board.model(model_id)
        assert row.n_counted == group.grade.notna().sum()
        assert row.score == pytest.approx(((group.grade.dropna() - 1) / 9).mean() * 100)
        assert {c.category for c in row.categories} == {"coding", "math", "reasoning"}
    report = compute_agreement(table)
    assert report.pairs == []
    assert any("agreement needs two judges" in n for n in report.notes)


# ---------------------------------------------------------------- helpers
def synthetic_frame(rng: np.random.Generator, *, n_models: int, n_questions: int) -> pd.DataFrame:
    """Seeded two-judge grades on [0, 1, 2] with some disagreement and a few nulls."""
    q = np.repeat(np.arange(n_questions), n_models)
    m = np.tile(np.arange(n_models), n_questions)
    skill = np.linspace(0.3, 0.9, n_models)[m]
    truth = (rng.random(q.size) < skill).astype(int) + (rng.random(q.size) < skill).astype(int)
    other = np.where(rng.random(q.size) < 0.2, rng.integers(0, 3, q.size), truth).astype(float)
    other[rng.random(q.size) < 0.01] = np.nan
    frame = pd.DataFrame(
        {
            "question_id": np.concatenate([q, q]),
            "model_id": [f"m{i:02d}" for i in np.concatenate([m, m])],
            "judge_id": ["j1"] * q.size + ["j2"] * q.size,
            "grade": np.concatenate([truth.astype(float), other]),
        }
    )
    return frame


def test_model_scores_are_the_leaderboards_scores_and_without_questions_unscores():
    """Hand-checked on 1..3: mA grades 3 and 1 (agreed) -> 100 * (2 + 0) / (2 * 2) = 50.0;
    mB agreed 2 on q1, judges differ on q2 -> 100 * 1 / (2 * 1) = 50.0 from one response."""
    from engine import GradeTable, compute_leaderboard, model_scores

    rows = [
        {"question_id": "q1", "model_id": "mA", "judge_id": "j1", "grade": 3},
        {"question_id": "q1", "model_id": "mA", "judge_id": "j2", "grade": 3},
        {"question_id": "q2", "model_id": "mA", "judge_id": "j1", "grade": 1},
        {"question_id": "q2", "model_id": "mA", "judge_id": "j2", "grade": 1},
        {"question_id": "q1", "model_id": "mB", "judge_id": "j1", "grade": 2},
        {"question_id": "q1", "model_id": "mB", "judge_id": "j2", "grade": 2},
        {"question_id": "q2", "model_id": "mB", "judge_id": "j1", "grade": 1},
        {"question_id": "q2", "model_id": "mB", "judge_id": "j2", "grade": 3},
    ]
    table = GradeTable.from_records(rows, scale=[1, 2, 3])
    scores = model_scores(table)
    assert scores == {"mA": 50.0, "mB": 50.0}
    board = compute_leaderboard(table, n_bootstrap=0)
    assert {m.model_id: m.score for m in board.models} == scores
    # q1 no longer scored: mA keeps q2 (grade 1 -> 0 %), mB has nothing counted.
    assert model_scores(table.without_questions(["q1"])) == {"mA": 0.0}
    assert table.scored.all()  # the original table is unchanged
