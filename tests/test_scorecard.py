"""Detector scorecard (issue 17 item 9): review.scorecard, `report`, the report page."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from review.models import ReviewItem
from review.scorecard import detector_scorecard, scorecard_markdown
from tests.factories import EvidenceFactory, ReviewItemFactory
from tests.review_fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db
S = ReviewItem.Status


def adverse(auditor):
    return {
        "verdicts": [
            {"auditor": auditor, "verdict": "wrong"},
            {"auditor": "a9", "verdict": "correct"},
        ]
    }


@pytest.fixture
def closed_items(world):
    """Five items: models_against_key on 0-3 (corrected, removed, confirmed, open);
    responses_agree on 1 and 4 (removed, confirmed); a1 adverse alone on 2 and 4."""
    statuses = [S.CORRECTED, S.REMOVED, S.CONFIRMED, S.OPEN, S.CONFIRMED]
    items = [
        ReviewItemFactory(question=world.q(i), benchmark=world.benchmark, status=s)
        for i, s in enumerate(statuses)
    ]
    for i in range(4):
        EvidenceFactory(item=items[i], kind="models_against_key")
    for i in (1, 4):
        EvidenceFactory(item=items[i], kind="responses_agree_against_key")
    for i in (2, 4):
        EvidenceFactory(item=items[i], kind="single_auditor_flag", detail=adverse("a1"))
    return world


def rows(card, group):
    return {r["name"]: r for r in card[group]}


def test_counts_and_precision_against_human_decisions(closed_items):
    card = detector_scorecard(closed_items.benchmark)
    m = rows(card, "detectors")["models_against_key"]
    # raised 4; closed 3: corrected 1 + removed 1 = 2 of 3 the key was wrong
    assert (m["raised"], m["open"], m["closed"]) == (4, 1, 3)
    assert (m["corrected"], m["removed"], m["confirmed"]) == (1, 1, 1)
    assert m["precision"] == round(2 / 3, 4)
    r = rows(card, "detectors")["responses_agree_against_key"]
    assert (r["raised"], r["closed"], r["precision"]) == (2, 2, 0.5)
    c = rows(card, "detectors")["consensus_against_key"]
    assert (c["raised"], c["precision"]) == (0, None)  # nothing raised: no precision, not 0
    a1 = rows(card, "auditors")["a1"]
    assert (a1["raised"], a1["confirmed"], a1["precision"]) == (2, 2, 0.0)
    assert "a9" not in rows(card, "auditors")  # a9 said correct: it raised nothing
    md = scorecard_markdown(card)
    assert "| Strong models marked down against their record | 4 | 1 | 3 | 1 | 1 | 1 | 67% |" in md


def test_an_auditor_whose_verdict_was_not_parsed_raised_nothing(world):
    # rule 4's adverse verdicts (scoring.models.ADVERSE_VERDICTS): wrong and ungradeable;
    # a null verdict (the reply could not be parsed) is not one
    item = ReviewItemFactory(question=world.q(0), benchmark=world.benchmark, status=S.OPEN)
    detail = {
        "verdicts": [
            {"auditor": "a1", "verdict": "ungradeable"},
            {"auditor": "a2", "verdict": None},
        ]
    }
    EvidenceFactory(item=item, kind="single_auditor_flag", detail=detail)
    card = detector_scorecard(world.benchmark)
    assert sorted(rows(card, "auditors")) == ["a1"]


def test_report_json_carries_the_scorecard(closed_items, capsys):
    call_command("report", benchmark="demo", format="json")
    doc = json.loads(capsys.readouterr().out)
    m = rows(doc["detector_scorecard"], "detectors")["models_against_key"]
    assert (m["raised"], m["precision"]) == (4, round(2 / 3, 4))
    assert doc["questions_total"] == 6  # the scoring report is still all there


def test_report_page_loads_the_scorecard(closed_items, client, reviewer):
    client.force_login(reviewer)
    page = client.get("/report/demo/").content.decode()
    assert 'hx-get="/scorecard/demo/"' in page and 'href="/scorecard/demo/"' in page
    part = client.get("/scorecard/demo/", HTTP_HX_REQUEST="true")
    html = part.content.decode()
    assert "<html" not in html and "Strong models marked down against their record" in html
    assert "67%" in html and "HX-Request" in part["Vary"]
    assert "<html" in client.get("/scorecard/demo/").content.decode()


def test_scorecard_reads_in_two_queries_whatever_the_number_of_items(
    closed_items, django_assert_num_queries
):
    with django_assert_num_queries(2):
        detector_scorecard(closed_items.benchmark)
