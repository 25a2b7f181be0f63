"""The `agreement` command on the hand-checked `tiny` fixture (see test_leaderboard)."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError

from scoring.models import Judge
from tests.test_leaderboard import _private_cache, build_tiny, run, run_json  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def tiny(db):
    return build_tiny()


def test_agreement_json_original_hand_checked(tiny):
    doc = run_json("agreement", "--edition", "original")
    assert doc["edition"] == "original"
    [pair] = doc["pairs"]
    assert pair["judges"] == ["j1", "j2"]
    # scored responses graded by both: Q1 (2,2)(1,0) Q2 (0,0)(1,1) Q3 mA (2,2) Q4 (1,1)(2,2);
    # mB/Q3 has a null grade from j2 and is dropped
    assert pair["n"] == 7 and pair["n_missing"] == 1
    assert "1 response dropped: a grade from one or both judges is null or missing" in pair["notes"]
    assert pair["exact_agreement"] == round(6 / 7, 4)
    assert pair["confusion"] == [[1, 0, 0], [1, 2, 0], [0, 0, 3]]
    assert -1 <= pair["cohen_kappa"] <= 1
    assert pair["krippendorff_alpha_ordinal"] is not None


def test_agreement_with_one_judge_says_it_needs_two(tiny):
    Judge.objects.filter(judge_id="j2").update(active=False)
    doc = run_json("agreement", "--edition", "original")
    assert doc["pairs"] == []
    assert any("needs two judges" in n for n in doc["notes"])
    out, _ = run("agreement", "--edition", "original")
    assert "Agreement needs two judges" in out


def test_agreement_table_shows_every_statistic(tiny):
    out, _ = run("agreement", "--edition", "original")
    for label in ("exact agreement", "Cohen's kappa", "quadratic", "Krippendorff", "confusion"):
        assert label in out
    assert "j1 vs j2" in out


def test_agreement_unknown_edition_exits_1(tiny):
    with pytest.raises(CommandError) as exc:
        run("agreement", "--edition", "nope")
    assert exc.value.returncode == 1
