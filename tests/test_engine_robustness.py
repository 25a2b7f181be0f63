"""Scoring engine: robustness between two key editions and direction of grade changes."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from engine import compare_leaderboards, compute_leaderboard, grade_changes

from .test_engine import agreed_table, hand_table

pytestmark: list = []


def board(points_out_of_ten: dict[str, int], **kwargs):
    """A leaderboard where model m scores points_out_of_ten[m] x 10 %."""
    grades = {m: [1] * p + [0] * (10 - p) for m, p in points_out_of_ten.items()}
    return compute_leaderboard(agreed_table(grades, scale=(0, 1)), n_bootstrap=50, **kwargs)


EIGHT = {f"m{i}": 10 - i for i in range(1, 9)}  # m1 90 %, m2 80 %, ..., m8 20 %


def test_same_key_is_fully_stable():
    result = compare_leaderboards(board(EIGHT), board(EIGHT))
    assert result.top3_unchanged is True and result.bottom5_unchanged is True
    assert result.kendall_tau == pytest.approx(1.0)
    assert result.band_changes == []
    assert all(m.rank_move == 0 for m in result.models)


def test_swap_in_the_middle_moves_bottom_five_but_not_top_three():
    corrected = dict(EIGHT, m4=5, m5=6)  # m4 and m5 swap places 4 and 5
    result = compare_leaderboards(board(EIGHT), board(corrected))
    assert result.top3_unchanged is True
    assert result.bottom5_unchanged is False  # same set, different ranks
    moves = {m.model_id: m.rank_move for m in result.models}
    assert moves["m5"] == 1 and moves["m4"] == -1 and moves["m1"] == 0
    # One discordant pair out of 28: tau = (27 - 1)/28.
    assert result.kendall_tau == pytest.approx(26 / 28)
    assert result.band_changes == [
        {"model_id": "m5", "band_original": 5, "band_corrected": 4},
        {"model_id": "m4", "band_original": 4, "band_corrected": 5},
    ]
    json.dumps(result.to_dict(), allow_nan=False)


def test_a_new_tie_at_the_top_changes_top_three():
    corrected = dict(EIGHT, m2=9)  # m1 and m2 now "=1"
    result = compare_leaderboards(board(EIGHT), board(corrected))
    assert result.top3_unchanged is False
    ranks = {m.model_id: m.rank_corrected for m in result.models}
    assert ranks["m1"] == ranks["m2"] == "=1" and ranks["m3"] == "3"


def test_constant_scores_give_no_kendall_tau():
    flat = {"a": 5, "b": 5}
    result = compare_leaderboards(board(flat), board(flat))
    assert result.kendall_tau is None
    assert result.notes


def test_different_bandings_are_noted():
    result = compare_leaderboards(board(EIGHT), board(EIGHT, banding="ci_overlap"))
    assert (result.banding_original, result.banding_corrected) == ("gap", "ci_overlap")
    assert any("bandings differ" in note for note in result.notes)


def test_grade_changes_count_direction_per_question():
    before = {("q1", "A"): 0, ("q1", "B"): 2, ("q1", "C"): None, ("q2", "A"): 1}
    after = {("q1", "A"): 2, ("q1", "B"): 1, ("q1", "C"): 2, ("q2", "A"): 1}
    changes = grade_changes(before, after)
    # q1/C had no agreed grade before and has one now: newly counted.
    zero = {"no_longer_counted": 0, "neither_counted": 0}
    assert [c.to_dict() for c in changes] == [
        {"question_id": "q1", "up": 1, "down": 1, "same": 0, "not_comparable": 1}
        | {"newly_counted": 1}
        | zero,
        {"question_id": "q2", "up": 0, "down": 0, "same": 1, "not_comparable": 0}
        | {"newly_counted": 0}
        | zero,
    ]


def test_grade_changes_split_what_is_not_comparable():
    """Before (j1, j2 agreed grade) -> after: A 1 -> none (no longer counted), B none -> 2
    (newly counted), C none -> none (neither), D missing before -> 0 (newly counted)."""
    before = {("q", "A"): 1, ("q", "B"): None, ("q", "C"): float("nan")}
    after = {("q", "A"): None, ("q", "B"): 2, ("q", "C"): None, ("q", "D"): 0}
    (change,) = grade_changes(before, after)
    assert change.to_dict() == {
        "question_id": "q",
        "up": 0,
        "down": 0,
        "same": 0,
        "not_comparable": 4,
        "newly_counted": 2,
        "no_longer_counted": 1,
        "neither_counted": 1,
    }


def test_grade_changes_accept_frames_tables_and_a_question_list():
    before = pd.DataFrame(
        {"question_id": ["q1", "q1"], "model_id": ["A", "B"], "grade": [0.0, float("nan")]}
    )
    after = pd.DataFrame({"question_id": ["q1", "q1"], "model_id": ["A", "B"], "grade": [1, 1]})
    changes = grade_changes(before, after, question_ids=["q1", "q9"])
    assert [(c.question_id, c.up, c.not_comparable) for c in changes] == [
        ("q1", 1, 1),
        ("q9", 0, 0),
    ]
    # A table against itself: every agreed grade is "same".
    same = grade_changes(hand_table(), hand_table())
    assert sum(c.up + c.down for c in same) == 0
    assert sum(c.same for c in same) == 11  # 8 counted + 3 on excluded q5
