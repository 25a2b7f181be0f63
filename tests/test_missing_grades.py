"""Missing grades are counted, never silent (issue 21 item 2, methodology rule 12).

The `tiny` fixture of test_leaderboard, with j1/j2 as the judge panel. corrected-1
corrects Q2 (new entry, graded 2,2 for mA and 1,1 for mB) and removes Q3; Q5 is excluded
by audit. Scored in corrected-1: Q1, Q2, Q4 x mA, mB = 6 responses.

Deleting the corrected Q2 grades (the "judge with imported grades only" case) leaves the
two Q2 responses with no grade at all: by hand, mA counts Q1 (2,2) and Q4 (1,1) =
3 / (2 x 2) = 75.0 % on 2, mB counts Q4 (2,2) only = 100.0 % on 1 (Q1 is a disagreement).
"""

from __future__ import annotations

import pytest

from scoring.board.report import build_report, report_markdown
from scoring.models import Grade
from scoring.runs.services.panel import judge_panel_set
from tests.test_leaderboard import _private_cache, build_tiny, run, run_json  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def tiny(db):
    data = build_tiny()
    judge_panel_set(benchmark=data["benchmark"], members=[("j1", None), ("j2", None)])
    return data


def _drop_corrected_q2_grades(tiny, judge_ids=("j1", "j2"), models=("mA", "mB")) -> int:
    deleted, _ = Grade.objects.filter(
        key_entry__edition=tiny["corrected"],
        judge__judge_id__in=judge_ids,
        response__model__model_id__in=models,
    ).delete()
    return deleted


def test_a_fully_graded_edition_is_complete(tiny):
    doc = run_json("leaderboard", "--edition", "original")
    assert doc["complete"] is True and doc["responses_missing_grade"] == 0
    assert doc["missing_grade_by_question"] == []
    assert {m["model_id"]: m["n_missing_grade"] for m in doc["models"]} == {"mA": 0, "mB": 0}


def test_ungraded_corrections_are_counted_per_model_and_question_and_said(tiny):
    assert _drop_corrected_q2_grades(tiny) == 4
    doc = run_json("leaderboard", "--edition", "corrected-1", "--no-cache")
    assert doc["complete"] is False
    assert doc["responses_missing_grade"] == 2
    assert doc["missing_grade_by_question"] == [{"question_id": "Q2", "n_missing_grade": 2}]
    models = {m["model_id"]: m for m in doc["models"]}
    assert models["mA"]["n_missing_grade"] == 1 and models["mB"]["n_missing_grade"] == 1
    assert (models["mA"]["score"], models["mA"]["n_counted"]) == (75.0, 2)
    assert (models["mB"]["score"], models["mB"]["n_counted"]) == (100.0, 1)
    assert (
        "2 responses of 1 question have no grade from j2 against corrected-1: it has no "
        "backend; re-score with another panel or import grades; these responses are not in "
        "the scores"
    ) in doc["notes"]
    table, _ = run("leaderboard", "--edition", "corrected-1")
    assert "INCOMPLETE: 2 responses of 1 scored question lack a grade from judge panel" in table


def test_a_judge_with_a_backend_is_told_to_re_score(tiny):
    j1 = tiny["judges"]["j1"]
    j1.backend = "reference"
    j1.save()
    _drop_corrected_q2_grades(tiny, judge_ids=("j1",), models=("mA",))
    doc = run_json("leaderboard", "--edition", "corrected-1", "--no-cache")
    # mA's Q2 still has j2's grade: the engine saw it, and it is counted once, not twice.
    assert doc["responses_missing_grade"] == 1
    assert {m["model_id"]: m["n_missing_grade"] for m in doc["models"]} == {"mA": 1, "mB": 0}
    assert (
        "1 response of 1 question has no grade from j1 against corrected-1: re-score them "
        "(manage.py rescore --edition corrected-1); these responses are not in the scores"
    ) in doc["notes"]


def test_report_says_not_re_graded_instead_of_zero_changes(tiny, client):
    _drop_corrected_q2_grades(tiny)
    doc = build_report(tiny["corrected"], compare=tiny["original"])
    assert doc["complete"] is False and doc["responses_missing_grade"] == 2
    q2 = next(g for g in doc["grade_changes"] if g["question_id"] == "Q2")
    assert q2["re_graded"] is False and q2["n_missing_grade"] == 2
    md = report_markdown(doc)
    assert "| Q2 | factually_wrong | not re-graded: 2 responses lack a grade |" in md
    assert "**INCOMPLETE: 2 responses of 1 scored question" in md
    from tests.factories import UserFactory

    client.force_login(UserFactory(username="reader"))
    page = client.get("/report/tiny/?edition=corrected-1&compare=original").content.decode()
    assert "Not re-graded: 2 responses lack a grade against the corrected entry" in page
    assert 'id="incomplete-note"' in page


def test_report_of_a_re_graded_correction_keeps_its_counts(tiny):
    doc = build_report(tiny["corrected"], compare=tiny["original"])
    q2 = next(g for g in doc["grade_changes"] if g["question_id"] == "Q2")
    # mA 0,0 -> 2,2 (up); mB 1,1 -> 1,1 (same)
    assert (q2["up"], q2["down"], q2["same"], q2["re_graded"]) == (1, 0, 1, True)
    assert doc["complete"] is True


def test_report_states_the_corrections_margin_against_the_band_gap(tiny):
    # original -> corrected-1: mA 62.5 -> 83.33 (moved 20.83), mB 75.0 -> 75.0 (0).
    doc = build_report(tiny["corrected"], compare=tiny["original"])
    margin = doc["correction_margin"]
    assert margin["max_move"] == pytest.approx(125 / 6, abs=1e-3)
    assert margin["median_move"] == pytest.approx(125 / 12, abs=1e-3)
    assert (margin["band_gap"], margin["band_gap_covers"]) == (1.5, False)
    assert margin["complete"] is True
    _drop_corrected_q2_grades(tiny)
    incomplete = build_report(tiny["corrected"], compare=tiny["original"])
    assert incomplete["correction_margin"]["complete"] is False
    assert "Not the corrections' effect alone" in report_markdown(incomplete)
    md = report_markdown(doc)
    assert "the band gap of 1.5 points does not cover that margin" in md
    assert doc["top3_flip_count"]["cannot_compute"] == (
        "2 scored models: no model outside the top 3"
    )


def test_a_new_ungraded_response_shows_through_the_cache(tiny):
    from questions.models import ModelUnderTest, Response

    first = run_json("leaderboard", "--edition", "original")  # cached from here on
    assert first["complete"] is True
    mC = ModelUnderTest.objects.create(benchmark=tiny["benchmark"], model_id="mC", name="C")
    Response.objects.create(question=tiny["questions"]["Q1"], model=mC, text="new")
    again = run_json("leaderboard", "--edition", "original")
    assert again["complete"] is False and again["responses_missing_grade"] == 1
    assert (
        "model mC has no row: none of its 1 responses has a grade from these judges"
        in (again["notes"])
    )
