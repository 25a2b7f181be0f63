"""Per-question contributions (engine.impact): a question's effect on each model's
score from the sums alone, checked by hand and against a full leaderboard recomputation."""

from __future__ import annotations

import pytest

from engine import GradeTable, compute_leaderboard
from engine.impact import contributions, question_effects, scores_without

SCALE = [0, 1, 2]


def _table(rows: dict[tuple[str, str], tuple[int | None, int | None]]) -> GradeTable:
    records = [
        {"question_id": q, "model_id": m, "judge_id": j, "grade": g}
        for (q, m), grades in rows.items()
        for j, g in zip(("j1", "j2"), grades, strict=True)
    ]
    return GradeTable.from_records(records, scale=SCALE)


# A: q1 2+2, q2 1+1, q3 2+2 -> 5 points on 3 counted: 100 * 5 / 6 = 83.333...
# B: q1 0+0, q2 2/1 (judges differ: not counted), q3 2+2 -> 2 points on 2 counted: 50.0
CURRENT = {
    ("q1", "A"): (2, 2),
    ("q1", "B"): (0, 0),
    ("q2", "A"): (1, 1),
    ("q2", "B"): (2, 1),
    ("q3", "A"): (2, 2),
    ("q3", "B"): (2, 2),
}


def test_removal_effect_by_hand_and_against_the_full_leaderboard():
    table = _table(CURRENT)
    c = contributions(table)
    assert c.totals()[0].tolist() == [5, 2] and c.totals()[1].tolist() == [3, 2]
    # Without q1: A 3 points on 2 counted = 75.0; B 2 points on 1 counted = 100.0.
    assert scores_without(c, ["q1"]) == {"A": 75.0, "B": 100.0}
    full = compute_leaderboard(table.without_questions(["q1"]), n_bootstrap=0)
    assert {m.model_id: m.score for m in full.models} == {"A": 75.0, "B": 100.0}
    # q1's own effect on the current scores: A 83.33 - 75 = +8.33, B 50 - 100 = -50.
    effects = question_effects(c, ["q1"])["q1"]
    assert effects["A"] == pytest.approx(100 * 5 / 6 - 75.0)
    assert effects["B"] == pytest.approx(-50.0)


def test_swapped_question_effect_against_another_tables_row():
    current = contributions(_table(CURRENT))
    # In the other edition q1 was graded A 0+0, B 2+2.
    other = contributions(_table({**CURRENT, ("q1", "A"): (0, 0), ("q1", "B"): (2, 2)}))
    effects = question_effects(current, ["q1"], other=other)["q1"]
    # A: 83.33 now vs (3 + 0) / (2 * 3) = 50.0 then; B: 50.0 now vs (2 + 2) / (2 * 2) = 100.0.
    assert effects["A"] == pytest.approx(100 * 5 / 6 - 50.0)
    assert effects["B"] == pytest.approx(-50.0)


def test_a_model_left_with_nothing_counted_has_no_score():
    table = _table({("q1", "A"): (2, 2), ("q1", "B"): (1, 2), ("q2", "B"): (2, 2)})
    c = contributions(table)
    assert scores_without(c, ["q1"]) == {"A": None, "B": 100.0}
    assert question_effects(c, ["q1"])["q1"] == {"A": None, "B": 0.0}
    # An unscored question contributes nothing.
    unscored = contributions(table.without_questions(["q2"]))
    assert unscored.totals()[1].tolist() == [1, 0]
