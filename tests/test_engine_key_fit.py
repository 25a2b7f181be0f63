"""scoring.engine.key_fit: the models-against-the-key statistic, values worked by hand."""

from __future__ import annotations

import math

import pytest

from scoring.engine import GradeTable
from scoring.engine.key_fit import models_against_key, normalised_grades


def table(rows, scale=(0, 1, 2)):
    return GradeTable.from_records(
        [{"question_id": q, "model_id": m, "judge_id": j, "grade": g} for q, m, j, g in rows],
        scale=scale,
    )


# q1, q2: A and B right, C wrong; q3: all right; q4: the key is wrong (A, B marked down).
ONE_JUDGE = [
    ("q1", "A", "j", 2), ("q1", "B", "j", 2), ("q1", "C", "j", 0),
    ("q2", "A", "j", 2), ("q2", "B", "j", 2), ("q2", "C", "j", 0),
    ("q3", "A", "j", 2), ("q3", "B", "j", 2), ("q3", "C", "j", 2),
    ("q4", "A", "j", 0), ("q4", "B", "j", 0), ("q4", "C", "j", 2),
]  # fmt: skip


def test_strong_models_marked_down_fire_with_their_grade_and_record():
    fits = models_against_key(table(ONE_JUDGE))
    q4 = fits["q4"]
    # Records leave q4 out: A and B scored 1, 1, 1 elsewhere -> expected 1.0; got 0.
    # The strongest half is ceil(3/2) = 2 models (A, B: overall 0.75 each; C 0.5).
    assert q4.n_models == 3 and q4.n_strongest == 2
    assert q4.shortfall == pytest.approx(1.0)
    assert [(m.model_id, m.grade, m.expected, m.overall_score) for m in q4.marked_down] == [
        ("A", 0.0, 1.0, 75.0),
        ("B", 0.0, 1.0, 75.0),
    ]
    assert q4.fires


def test_sound_questions_do_not_fire():
    fits = models_against_key(table(ONE_JUDGE))
    for qid in ("q1", "q2", "q3"):
        assert not fits[qid].fires
        assert fits[qid].shortfall == 0.0  # A and B got the top grade: nothing below record


def test_one_model_alone_is_not_evidence():
    rows = [r for r in ONE_JUDGE if not (r[0] == "q4" and r[1] == "B")]
    rows.append(("q4", "B", "j", 2))
    q4 = models_against_key(table(rows))["q4"]
    assert [m.model_id for m in q4.marked_down] == ["A"]
    assert not q4.fires
    # weights e = 1 (A), 1 (B): (1*1 + 1*0) / 2
    assert q4.shortfall == pytest.approx(0.5)


def test_two_judges_use_agreed_grades_and_each_judge_otherwise():
    rows = [
        ("q1", "A", "j1", 2), ("q1", "A", "j2", 2),
        ("q1", "B", "j1", 2), ("q1", "B", "j2", 0),
    ]  # fmt: skip
    g = normalised_grades(table(rows))
    assert g.tolist() == [[1.0, 0.5]]


def test_any_scale_one_to_ten():
    # 1..10: a 10 is 1.0, a 1 is 0.0, a 4 is 1/3.
    rows = [("q1", "A", "j", 10), ("q2", "A", "j", 1), ("q3", "A", "j", 4)]
    g = normalised_grades(table(rows, scale=range(1, 11)))
    assert g[:, 0].tolist() == pytest.approx([1.0, 0.0, 1 / 3])


def test_weights_favour_the_strongest_model():
    # Four models; on q9 the strongest (S, record 1.0) is marked down fully and the
    # second (T, record 0.5) is not: shortfall = (1.0*1.0 + 0.5*0) / 1.5.
    rows = []
    for i in range(4):
        rows += [(f"q{i}", "S", "j", 2), (f"q{i}", "T", "j", 2 if i % 2 else 0)]
        rows += [(f"q{i}", "U", "j", 0), (f"q{i}", "V", "j", 0)]
    rows += [("q9", "S", "j", 0), ("q9", "T", "j", 1), ("q9", "U", "j", 0), ("q9", "V", "j", 0)]
    q9 = models_against_key(table(rows))["q9"]
    assert q9.n_strongest == 2
    assert q9.shortfall == pytest.approx(1.0 / 1.5)
    assert not q9.fires  # only S is marked down


def test_too_few_models_are_not_scored_and_bad_settings_raise():
    rows = [("q1", "A", "j", 2), ("q2", "A", "j", 0), ("q1", "B", "j", 2), ("q2", "B", "j", 0)]
    assert models_against_key(table(rows)) == {}
    with pytest.raises(ValueError, match="drop"):
        models_against_key(table(ONE_JUDGE), drop=0)
    with pytest.raises(ValueError, match="at least 1"):
        models_against_key(table(ONE_JUDGE), min_models=0)
    assert not math.isnan(models_against_key(table(ONE_JUDGE))["q1"].shortfall)
