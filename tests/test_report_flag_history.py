"""History figures stay history (issue 21 item 5): a corrected edition's report gives the
shortlist its corrections came from (flags against the entry each question had when it was
flagged) next to the flags still standing against its own entries, each labelled.

On the hand-checked `tiny` fixture (tests/test_leaderboard.build_tiny): Q2 is corrected
and Q3 removed in corrected-1; Q4's original entry (kept by corrected-1) is flagged by j1.
Added here: j1 flags Q2's original entry, j2 flags Q3's original entry, j2 flags Q2's
corrected entry, and an old-prompt grade (j1 at v0) flags Q1, which never counts.
"""

from __future__ import annotations

import pytest

from scoring.models import Grade
from tests.test_leaderboard import build_tiny, run, run_json

pytestmark = pytest.mark.django_db


@pytest.fixture
def flagged(db):
    t = build_tiny()
    r, j = t["responses"], t["judges"]

    def flag(qid, model, judge, edition_name, prompt_version="v1"):
        n = Grade.objects.filter(
            response=r[(qid, model)],
            judge=j[judge],
            key_entry__edition__name=edition_name,
            prompt_version=prompt_version,
        ).update(flag=True, flag_reason="the key looks wrong")
        assert n == 1, (qid, model, judge, edition_name)

    flag("Q2", "mA", "j1", "original")
    flag("Q3", "mB", "j2", "original")
    flag("Q2", "mB", "j2", "corrected-1")
    flag("Q1", "mA", "j1", "original", prompt_version="v0")
    return t


def test_the_original_edition_counts_each_flag_once_as_both(flagged):
    doc = run_json("report", "--edition", "original")
    # Q2, Q3, Q4 flagged against original entries; Q1's flag is an old prompt's.
    assert (doc["judge_flagged"], doc["judge_flags_standing"]) == (3, 3)


def test_a_corrected_edition_keeps_the_shortlist_beside_the_standing_flags(flagged):
    doc = run_json("report", "--edition", "corrected-1", "--compare", "original")
    # Shortlist: Q2 (original entry, and again its correction: one question), Q3 (removed
    # since, flagged on its original entry), Q4. Standing: Q2's correction, Q4's entry.
    assert doc["judge_flagged"] == 3
    assert doc["judge_flags_standing"] == 2
    prov = doc["provenance"]
    assert "when graded" in prov["judge_flagged"]["data"]
    assert "original to corrected-1" in prov["judge_flagged"]["data"]
    assert "edition corrected-1's entries" in prov["judge_flags_standing"]["data"]
    assert prov["judge_flags_standing"]["judges"] == ["j1", "j2"]


def test_the_report_labels_each_figure_as_what_it_is(flagged):
    out, _ = run("report", "--edition", "corrected-1")
    assert "| Questions flagged by a judge when graded (shortlist, history) | 3 |" in out
    assert "| Questions whose entry in this edition a judge flags (standing) | 2 |" in out


def test_without_flags_both_are_zero(db):
    build_tiny()
    Grade.objects.update(flag=False)
    doc = run_json("report", "--edition", "corrected-1")
    assert (doc["judge_flagged"], doc["judge_flags_standing"]) == (0, 0)
