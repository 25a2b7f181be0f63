"""Bands the data supports (issue 21 item 3): paired neighbour comparisons, the gap
warning and shared ranks for models with few counted responses (engine.support).

Paired intervals are checked against scipy.stats.bootstrap (percentile method, paired
data) on the same per-question differences; the two draw different random numbers, so
they agree within a tolerance, not exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import bootstrap

from engine import GradeTable, compute_leaderboard
from engine.support import gap_warning, paired_neighbour_comparisons, shared_ranks


def _table(grades: dict[str, list[int | None]]) -> GradeTable:
    """One judge; grades[model][q] on 0..2 (None: no grade row)."""
    rows = [
        {"question_id": f"q{q:03d}", "model_id": m, "judge_id": "j", "grade": g}
        for m, gs in grades.items()
        for q, g in enumerate(gs)
        if g is not None
    ]
    return GradeTable.from_frame(pd.DataFrame(rows), scale=[0, 1, 2])


def test_paired_difference_matches_hand_and_scipy_bootstrap():
    rng = np.random.default_rng(7)
    a = rng.integers(0, 3, 200).astype(float) / 2  # fractions of the scale range
    b = np.clip(a - (rng.random(200) < 0.3) * 0.5, 0, 1)  # b loses half a point 30% of the time
    points = np.column_stack([a, b])
    counted = np.ones_like(points, dtype=bool)
    [c] = paired_neighbour_comparisons(
        points, counted, [0, 1], ["A", "B"], n_bootstrap=4000, seed=1, confidence=0.95
    )
    d = 100 * (a - b)
    assert c.n_questions == 200 and c.difference == pytest.approx(d.mean())
    ref = bootstrap(
        (d,), np.mean, n_resamples=4000, method="percentile", random_state=2
    ).confidence_interval
    assert c.ci_low == pytest.approx(ref.low, abs=1.0)
    assert c.ci_high == pytest.approx(ref.high, abs=1.0)
    assert c.supported is True and c.ci_low > 0


def test_only_questions_counted_for_both_are_paired():
    points = np.array([[1.0, 0.0], [1.0, 0.5], [0.0, 1.0]])
    counted = np.array([[1, 1], [1, 1], [1, 0]], dtype=bool)
    [c] = paired_neighbour_comparisons(
        points, counted, [0, 1], ["A", "B"], n_bootstrap=500, seed=0, confidence=0.95
    )
    # q0: 100, q1: 50; q2 is not counted for B
    assert (c.n_questions, c.difference) == (2, 75.0)
    assert c.ci_low >= 50.0 and c.ci_high <= 100.0 and c.supported is True


def test_identical_models_give_an_unsupported_boundary():
    grades = [2, 0, 1, 2, 0, 1, 2, 2, 0, 1] * 4
    board = compute_leaderboard(
        _table({"A": grades, "B": grades[:-1] + [0]}), band_gap=0.5, n_bootstrap=500, seed=3
    )
    [c] = board.neighbours
    assert (c.above, c.below) == ("A", "B") and c.band_boundary is True
    # one question differs by 50 points over 40: mean 1.25, interval reaches 0
    assert c.difference == pytest.approx(1.25) and c.ci_low == 0.0 and c.supported is False
    doc = board.to_dict()
    assert (doc["band_boundaries"], doc["band_boundaries_supported"]) == (1, 0)


def test_gap_warning_when_gap_is_far_below_interval_width():
    assert gap_warning(1.5, [25.0, 20.0, 30.0], 0.95).startswith(
        "The band gap (1.5 points) is far below the width of the models' 95% intervals "
        "(median 25.0 points)"
    )
    assert gap_warning(1.5, [5.0, 6.0], 0.95) is None  # 1.5 >= 0.25 x 5.5


def test_a_model_with_one_counted_response_is_never_ranked_alone_above_overlaps():
    # The demo: L has 1 counted response (scored 100), M and N many.
    order = ["L", "M", "N", "O"]
    ranks = {"L": 1, "M": 2, "N": 3, "O": 4}
    counted = {"L": 1, "M": 40, "N": 40, "O": 40}
    intervals = {"L": (20.7, 100.0), "M": (60.0, 80.0), "N": (50.0, 70.0), "O": (5.0, 15.0)}
    changed, notes = shared_ranks(order, ranks, counted, intervals, 30)
    assert changed == {"L": ("=1", 1), "M": ("=1", 1), "N": ("=1", 1)}
    assert notes == [
        "L: 1 counted response, fewer than 30: shares its rank with M, N "
        "(their intervals overlap its own)"
    ]
    assert shared_ranks(order, ranks, counted, intervals, 0) == ({}, [])


def test_few_counted_flag_and_shared_rank_on_the_leaderboard():
    # L: one counted response (the other nine disagree would need two judges; here they are
    # simply ungraded), M and N 40 each.
    base = [2, 1, 1, 2, 1, 2, 1, 1, 2, 1] * 4
    board = compute_leaderboard(
        _table({"L": [2] + [None] * 39, "M": base, "N": [max(0, g - 1) for g in base]}),
        n_bootstrap=300,
        seed=0,
        min_counted=30,
    )
    rows = {m.model_id: m for m in board.models}
    assert rows["L"].score == 100.0 and rows["L"].few_counted is True
    assert rows["M"].few_counted is False
    assert rows["L"].rank == rows["M"].rank == "=1"
    assert any(n.startswith("L: 1 counted response") for n in board.to_dict()["notes"])


def test_too_few_paired_questions_leave_the_boundary_untested():
    points = np.array([[1.0, 0.5], [1.0, 0.5]])
    counted = np.ones_like(points, dtype=bool)
    [c] = paired_neighbour_comparisons(
        points,
        counted,
        [0, 1],
        ["A", "B"],
        n_bootstrap=500,
        seed=0,
        confidence=0.95,
        min_questions=30,
    )
    assert (c.n_questions, c.difference, c.ci_low, c.supported) == (2, 50.0, None, None)


def _flip(rows: dict[str, list[float]]) -> dict:
    from engine.support import top_k_flip_count

    ids = list(rows)
    points = np.column_stack([rows[m] for m in ids])
    return top_k_flip_count(points, np.ones_like(points, dtype=bool), list(range(len(ids))), ids)


def test_flip_count_by_hand():
    # Scores 100, 87.5, 75, 62.5 on four questions. C vs D: gap 12.5; correcting q1
    # (C 1 -> 0, D 0.5 -> 1) closes 25 * (1 + 0.5) = 37.5 > 12.5: one correction. B vs D
    # (gap 25) also needs one; the closer pair is named.
    one = _flip(
        {"A": [1, 1, 1, 1], "B": [1, 1, 1, 0.5], "C": [1, 1, 0.5, 0.5], "D": [1, 0.5, 0.5, 0.5]}
    )
    assert (one["flip_count"], one["pair"], one["gap"]) == (1, ["C", "D"], 12.5)
    assert one["top"] == ["A", "B", "C"]
    # D at 0: C vs D gap 75, gains 50, 50, 37.5, 37.5 -> two corrections (100 > 75);
    # B vs D (gap 87.5) also two; A vs D needs three (50 + 50 is not more than 100).
    two = _flip({"A": [1, 1, 1, 1], "B": [1, 1, 1, 0.5], "C": [1, 1, 0.5, 0.5], "D": [0, 0, 0, 0]})
    assert (two["flip_count"], two["pair"], two["gap"]) == (2, ["C", "D"], 75.0)
    few = _flip({"A": [1.0], "B": [0.5]})
    assert few["flip_count"] is None
    assert few["cannot_compute"] == "2 scored models: no model outside the top 3"


# ---------------------------------------------------- tiers (issue 30 item 10)
def test_tiers_merge_bands_across_unsupported_shared_and_few_counted_boundaries():
    from engine.bands import established_tiers

    order = ["A", "B", "C", "D", "E", "F"]
    bands = {"A": 1, "B": 2, "C": 3, "D": 3, "E": 4, "F": 5}
    ranks = {"A": 1, "B": 2, "C": 3, "D": 4, "E": 5, "F": 6}
    supported = {
        ("A", "B"): True,  # a supported band boundary: new tier
        ("B", "C"): False,  # not supported: bands 2 and 3 are one tier
        ("C", "D"): True,  # same band: a tier never splits a band
        ("D", "E"): None,  # not tested: merged
        ("E", "F"): True,
    }
    assert established_tiers(order, bands, ranks, supported) == {
        "A": 1,
        "B": 2,
        "C": 2,
        "D": 2,
        "E": 2,
        "F": 3,
    }
    # a shared rank across a supported boundary keeps the two in one tier
    shared = {**ranks, "B": 1}
    assert established_tiers(order, bands, shared, supported)["B"] == 1
    # a few-counted model never stands alone: F joins E's tier, A joins B's
    tiers = established_tiers(order, bands, ranks, supported, {"F", "A"})
    assert tiers == {"A": 1, "B": 1, "C": 1, "D": 1, "E": 1, "F": 1}
    assert established_tiers([], {}, {}, {}) == {}


def test_the_leaderboard_tiers_follow_the_paired_comparison():
    # 40 questions. H answers all right; G the same but one question half right (1.25
    # points lower: a band of its own at gap 1.0, but one question cannot support it);
    # N gets half marks everywhere (50 points below: supported).
    top = [2] * 40
    board = compute_leaderboard(
        _table({"H": top, "G": [1] + [2] * 39, "N": [1] * 40}),
        n_bootstrap=400,
        seed=0,
        min_counted=30,
    )
    rows = {m.model_id: m for m in board.models}
    assert (rows["H"].score, rows["G"].score, rows["N"].score) == (100.0, 98.75, 50.0)
    assert (rows["H"].band, rows["G"].band, rows["N"].band) == (1, 1, 2)
    # the 1.25-point gap is under 1.5: H and G share band 1; N's boundary is supported
    assert (rows["H"].tier, rows["G"].tier, rows["N"].tier) == (1, 1, 2)
    assert board.n_tiers == 2 and board.to_dict()["n_tiers"] == 2
    narrow = board.with_banding("gap", band_gap=1.0)
    rows = {m.model_id: m for m in narrow.models}
    assert (rows["H"].band, rows["G"].band, rows["N"].band) == (1, 2, 3)
    # H-G differ on one question of 40: the paired bootstrap's lower end is 0, not above
    assert [c.supported for c in narrow.neighbours] == [False, True]
    assert (rows["H"].tier, rows["G"].tier, rows["N"].tier) == (1, 1, 2)
    assert narrow.n_tiers == 2 and narrow.n_bands == 3


def test_a_few_counted_leader_does_not_head_a_tier_alone():
    base = [2, 1, 1, 2, 1, 2, 1, 1, 2, 1] * 4
    board = compute_leaderboard(
        _table({"L": [2] + [None] * 39, "M": base, "N": [0] * 40}),
        n_bootstrap=300,
        seed=0,
        min_counted=30,
    )
    rows = {m.model_id: m for m in board.models}
    assert rows["L"].band == 1 and rows["M"].band == 2  # 100 vs 60: rule 9 cuts them
    assert rows["L"].tier == rows["M"].tier == 1
    assert rows["N"].tier == 2
    # every shared rank lies within one tier
    by_rank: dict[str, set] = {}
    for m in board.models:
        by_rank.setdefault(m.rank, set()).add(m.tier)
    assert all(len(t) == 1 for t in by_rank.values()), by_rank
