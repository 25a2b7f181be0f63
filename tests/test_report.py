"""The methodology report: every figure on the hand-checked `tiny` fixture (see test_leaderboard)."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError

from tests.test_leaderboard import _private_cache, build_tiny, run, run_json  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def tiny(db):
    return build_tiny()


def test_report_original_without_compare_hand_checked(tiny):
    doc = run_json("report", "--edition", "original")
    expected = {
        "edition": "original",
        "compare_edition": None,
        "questions_total": 5,
        "questions_scored": 4,
        "excluded_by_audit": 1,
        "removed_by_review": 0,
        "corrected": 0,
        # Q1: a1 wrong, a2 correct
        "single_auditor_flags": 1,
        # Q4 flagged by j1
        "judge_flagged": 1,
        # both gave a verdict on Q5 (wrong/ungradeable), Q1 (wrong/correct), Q2 (same)
        "auditor_agreement_rate": round(1 / 3, 4),
        "responses_total": 8,
        "responses_counted": 6,
        "responses_excluded_disagreement": 1,
        "responses_unparsed": 1,
        "agreement_rate": round(6 / 7, 4),
        "n_models": 2,
        "n_bands": 2,
        "top3_unchanged": None,
        "bottom5_unchanged": None,
        "grade_changes": [],
    }
    assert {k: doc[k] for k in expected} == expected


def test_report_corrected_against_original_hand_checked(tiny, settings):
    # Ranks as the write-up gives them: with the few-counted rule of issue 21 on (default
    # 30), mA and mB (2-4 counted responses each) would share "=1" in both editions.
    settings.SNAGLIST_MIN_COUNTED = 0
    doc = run_json("report", "--edition", "corrected-1", "--compare", "original")
    assert doc["compare_edition"] == "original"
    assert doc["questions_scored"] == 3
    assert doc["removed_by_review"] == 1
    assert doc["corrected"] == 1
    assert doc["responses_total"] == 6
    assert doc["responses_counted"] == 5
    assert doc["responses_excluded_disagreement"] == 1
    assert doc["responses_unparsed"] == 0
    assert doc["agreement_rate"] == round(5 / 6, 4)
    # Q1 audits still apply (its entry is unchanged); Q2's corrected entry is unaudited
    assert doc["single_auditor_flags"] == 1
    assert doc["auditor_agreement_rate"] == 0.0
    # mB was first under the original, mA is first now: the top 3 moved
    assert doc["top3_unchanged"] is False
    assert doc["bottom5_unchanged"] is False
    assert doc["grade_changes"] == [
        {
            "question_id": "Q2",
            "up": 1,
            "down": 0,
            "same": 1,
            "not_comparable": 0,
            "newly_counted": 0,
            "no_longer_counted": 0,
            "neither_counted": 0,
            "reason": "factually_wrong",
            # issue 21: every response of Q2 has both judges' grades against the new entry
            "n_missing_grade": 0,
            "re_graded": True,
        }
    ]
    moves = {m["model_id"]: m for m in doc["model_moves"]}
    assert moves["mA"]["rank_original"] == "2" and moves["mA"]["rank_corrected"] == "1"


def test_every_figure_names_its_edition_judges_and_data(tiny):
    doc = run_json("report", "--edition", "corrected-1", "--compare", "original")
    for key in (
        "questions_total",
        "questions_scored",
        "excluded_by_audit",
        "removed_by_review",
        "corrected",
        "single_auditor_flags",
        "judge_flagged",
        "auditor_agreement_rate",
        "responses_total",
        "responses_counted",
        "responses_excluded_disagreement",
        "responses_unparsed",
        "agreement_rate",
        "n_models",
        "n_bands",
        "top3_unchanged",
        "bottom5_unchanged",
        "grade_changes",
    ):
        prov = doc["provenance"][key]
        assert "corrected-1" in prov["edition"], key
        assert prov["data"], key
    assert doc["provenance"]["agreement_rate"]["judges"] == ["j1", "j2"]
    assert doc["provenance"]["single_auditor_flags"]["auditors"] == ["a1", "a2"]


def test_report_markdown_names_edition_judges_and_figures(tiny):
    out, _ = run("report", "--edition", "corrected-1", "--compare", "original")
    assert out.startswith("# Methodology report: tiny")
    assert "**corrected-1**" in out and "**original**" in out
    assert "j1, j2" in out
    assert "| Judge agreement rate | 83.3% |" in out
    assert "| Q2 | factually_wrong | 1 | 0 | 1 | 0 |" in out
    assert "gap bands, threshold 1.5 points" in out


def test_report_unknown_compare_edition_exits_1(tiny):
    with pytest.raises(CommandError) as exc:
        run("report", "--compare", "nope")
    assert exc.value.returncode == 1 and "nope" in str(exc.value)


def test_report_ambiguous_benchmark_exits_2(tiny):
    build_tiny("tiny-two")
    with pytest.raises(CommandError) as exc:
        run("report", "--format", "json")
    assert exc.value.returncode == 2 and "tiny-two" in str(exc.value)


def test_grade_changes_count_questions_moving_in_and_out_of_scoring(tiny):
    """Rule 11 with exclusion by audit (rule 4), by hand on `tiny`.

    corrected-2 corrects Q5, whose original entry both auditors rejected: graded mA (2,2),
    mB (1,1) against the new entry, so against the original both responses are newly
    counted. Then both auditors reject corrected-1's new Q2 entry: against the original,
    Q2's two counted responses (mA 0, mB 1) are no longer counted in corrected-1.
    """
    from questions.models import AuditExclusion, KeyEntry
    from questions.services import key_edition_create, key_edition_publish, key_entry_create
    from scoring.models import Grade, Judge

    bench = tiny["benchmark"]
    second = key_edition_create(benchmark=bench, name="corrected-2", parent=tiny["corrected"])
    q5 = key_entry_create(
        edition=second, question=tiny["questions"]["Q5"], answer="Fixed", reason="other"
    )
    key_edition_publish(edition=second)
    for judge in Judge.objects.filter(benchmark=bench, role=Judge.Role.JUDGE):
        for response in q5.question.responses.select_related("model"):
            grade = 2 if response.model.model_id == "mA" else 1
            Grade.objects.create(response=response, judge=judge, key_entry=q5, grade=grade)

    doc = run_json("report", "--edition", "corrected-2", "--compare", "original")
    q5_change = next(g for g in doc["grade_changes"] if g["question_id"] == "Q5")
    assert (q5_change["newly_counted"], q5_change["not_comparable"], q5_change["up"]) == (2, 2, 0)

    q2_new = KeyEntry.objects.get(edition=tiny["corrected"], question__question_id="Q2")
    AuditExclusion.objects.create(key_entry=q2_new, reason="auditors_agree")
    doc = run_json("report", "--edition", "corrected-1", "--compare", "original")
    (q2_change,) = doc["grade_changes"]
    assert q2_change == {
        "question_id": "Q2",
        "up": 0,
        "down": 0,
        "same": 0,
        "not_comparable": 2,
        "newly_counted": 0,
        "no_longer_counted": 2,
        "neither_counted": 0,
        "reason": "factually_wrong",
        # issue 21: Q2 is excluded in corrected-1, so there is nothing to re-grade
        "n_missing_grade": 0,
        "re_graded": None,
    }
