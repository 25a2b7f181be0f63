"""Issue 18 items 2 and 4: the successor edition's passage beside a superseded citation on
the decision page, the cited passages beside each proposal on the approvals page, and
bulk approval (four-eyes and the item version checked per proposal).

The world (tests.review_fixtures.build_world): ADA paragraphs 1.0 ... 1.7 read "Paragraph
i: the minimum bearing is (100 + i) mm for a lintel of this span."; question i's key
cites ADA 1.i with the quote "minimum bearing is (100 + i) mm"; ADB-2006 is superseded.
"""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from core.actions import Action
from core.models import AuditLogEntry
from questions.models import KeyEdition, KeyEntry, Section, SourceDocument
from review import services
from review.cited_passages import Segment, highlight, successor_passage
from review.models import Proposal, ReviewItem
from tests.factories import ReviewItemFactory
from tests.review_fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db


# ------------------------------------------------------------------ highlighting


def test_highlight_marks_the_answers_figure_in_other_units_and_keeps_the_text():
    text = (
        "iii. The bottom of the openable area is a maximum of 1100mm above the floor; 450mm wide."
    )
    segments = highlight(text, answer="No more than 1.1 m above the floor")
    assert "".join(s.text for s in segments) == text
    assert [s for s in segments if s.mark] == [Segment("1100mm", "figure")]


def test_highlight_quote_wins_over_a_figure_inside_it_and_bare_numbers_are_not_marked():
    text = "Paragraph 3: the minimum bearing is 103 mm for a lintel of span 3."
    segments = highlight(text, quote="MINIMUM bearing is 103 mm", answer="103 mm, class 3")
    assert [s for s in segments if s.mark] == [Segment("minimum bearing is 103 mm", "quote")]
    assert highlight("", quote="x") == []
    assert highlight(text, answer="3") == [Segment(text)]  # a bare number is no figure


# ------------------------------------------------------------------ successor passage


def _successor_world(world, *, locators=("1.4", "1.6")):
    """ADB-2006 superseded by ADB (2019, current) with paragraphs at `locators`."""
    old = world.documents["ADB-2006"]
    new = SourceDocument.objects.create(
        benchmark=world.benchmark,
        doc_id="ADB",
        title="Approved Document B (2019)",
        short_title="AD B 2019",
        edition="2019 edition",
        status="current",
    )
    Section.objects.bulk_create(
        [
            Section(
                document=new,
                locator=loc,
                heading=f"Heading of {loc}, long enough not to be cut off not verbatim",
                text=f"{loc} A smoke alarm should be fitted within 7.5 m of each habitable room.",
                position=n,
            )
            for n, loc in enumerate(locators)
        ]
    )
    Section.objects.create(document=old, locator="1.4", text="1.4 The 2006 wording.", position=0)
    old.superseded_by = new
    old.save()
    return old, new


def _cite(world, i, doc_id, locator, *, answer="Within 7500 mm of each habitable room", quote=""):
    """Publish a child edition whose entry for question i cites `doc_id` `locator`
    (published key rows are never altered; reviewers work against the latest one)."""
    from tests.factories import KeyEditionFactory, publish

    n = KeyEdition.objects.filter(benchmark=world.benchmark).count()
    edition = KeyEditionFactory(
        benchmark=world.benchmark, name=f"corrected-{n}", parent=world.original
    )
    entry = KeyEntry.objects.create(
        edition=edition,
        question=world.q(i),
        citation_document=SourceDocument.objects.get(benchmark=world.benchmark, doc_id=doc_id),
        citation_doc_id=doc_id,
        citation_locator=locator,
        citation_quote=quote,
        has_citation=True,
        answer=answer,
    )
    publish(edition)
    return KeyEntry.objects.select_related("citation_document").get(pk=entry.pk)


def _item_page(client, world, i, user) -> str:
    item = ReviewItemFactory(question=world.q(i), benchmark=world.benchmark)
    client.force_login(user)
    response = client.get(f"/review/items/{item.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def test_successor_at_the_same_locator_is_shown_beside_the_cited_passage(client, reviewer, world):
    _successor_world(world)
    entry = _cite(world, 1, "ADB-2006", "1.4")
    found = successor_passage(entry)
    assert found.successor.doc_id == "ADB" and found.same_locator
    assert found.section.locator == "1.4" and found.figure_found  # 7.5 m is 7500 mm
    body = _item_page(client, world, 1, reviewer)
    assert 'class="passage-compare"' in body and "Edition in force" in body
    assert "1.4 The 2006 wording." in body  # the cited (superseded) passage
    assert '<mark class="figure" title="The key answer\'s figure">7.5 m</mark>' in body
    assert "nearest locator" not in body
    # the heading is whole (it was cut to "… not v…")
    assert "long enough not to be cut off not verbatim" in body


def test_successor_without_the_locator_shows_the_nearest_and_says_so(client, reviewer, world):
    _successor_world(world, locators=("1.3", "1.6", "2.1"))
    entry = _cite(world, 1, "ADB-2006", "1.4")
    found = successor_passage(entry)
    # nearest_locators("1.4", ["1.3", "1.6", "2.1"]): same chapter, one edit, then closeness
    assert not found.same_locator and found.section.locator == "1.3"
    body = _item_page(client, world, 1, reviewer)
    assert "AD B 2019 has no 1.4: this is the nearest locator, 1.3, not the same one." in body
    assert "1.3 A smoke alarm should be fitted" in body


def test_no_successor_in_the_database_is_said_in_words(client, reviewer, world):
    old = world.documents["ADB-2006"]
    Section.objects.create(document=old, locator="1.4", text="1.4 The 2006 wording.", position=0)
    entry = _cite(world, 1, "ADB-2006", "1.4")
    found = successor_passage(entry)
    assert found.successor is None and found.section is None
    body = _item_page(client, world, 1, reviewer)
    assert (
        "No successor of AD B 2006 (2006 edition, superseded) is in the database. "
        "Check the key against the source in force by hand." in body
    )
    assert 'id="successor-passage"' not in body


def test_a_chain_of_superseded_editions_leads_to_the_one_in_force_and_current_has_none(world):
    old, new = _successor_world(world)
    middle = SourceDocument.objects.create(
        benchmark=world.benchmark, doc_id="ADB-2010", title="AD B 2010", status="superseded"
    )
    middle.superseded_by = new
    middle.save()
    old.superseded_by = middle
    old.save()
    assert successor_passage(_cite(world, 1, "ADB-2006", "1.4")).successor.doc_id == "ADB"
    assert successor_passage(world.entry(2)) is None  # ADA is current
    # a cycle of superseded editions ends without a successor instead of looping
    new.status, new.superseded_by = "superseded", old
    new.save()
    assert successor_passage(_cite(world, 1, "ADB-2006", "1.4")).successor is None


def test_item_page_of_a_current_citation_has_no_successor_column(client, reviewer, world):
    body = _item_page(client, world, 1, reviewer)
    assert "passage-compare" not in body and "Edition in force" not in body
    assert "<mark>minimum bearing is 101 mm</mark>" in body


# ------------------------------------------------------------------ approvals: passages


def _proposal(world, i, author, **fields) -> Proposal:
    item = ReviewItemFactory(question=world.q(i), benchmark=world.benchmark)
    item = services.review_item_claim(item=item, user=author)
    data = {
        "action": "correct",
        "answer": f"{200 + i} mm",
        "citation_doc_id": "ADA",
        "citation_locator": f"1.{i + 1}",
        "citation_quote": f"minimum bearing is {101 + i} mm",
        "reason": "factually_wrong",
    } | fields
    return services.proposal_create(item=item, user=author, version=item.version, **data)


def _articles(body: str) -> dict[str, str]:
    parts = body.split('<article class="card" aria-labelledby="p-')[1:]
    return {re.search(r"Q\d{4}", part).group(0): part for part in parts}


def test_approvals_page_shows_the_proposed_and_current_passages_with_quotes(
    client, reviewer, editor2, world
):
    _proposal(world, 1, reviewer)  # cites ADA 1.2 instead of the key's ADA 1.1
    _proposal(world, 2, reviewer, answer="150 mm", citation_locator="1.2", citation_quote="")
    _proposal(world, 3, reviewer, citation_locator="1.99")
    client.force_login(editor2)
    articles = _articles(client.get("/review/approvals/").content.decode())
    moved = articles["Q0001"]
    assert "Proposed citation: <strong>ADA 1.2</strong>" in moved
    assert "<mark>minimum bearing is 102 mm</mark>" in moved
    assert "Key’s citation now: <strong>ADA 1.1</strong>" in moved
    assert "<mark>minimum bearing is 101 mm</mark>" in moved
    # same locator, quote dropped: the passage differs in its quote, so both are shown
    same = articles["Q0002"]
    assert same.count('class="cited-passage"') == 2
    missing = articles["Q0003"]
    assert "Locator “1.99” is not in the source index of ADA: no passage to show." in missing
    assert '<details class="cited-passage" open>' in missing


def test_an_answer_only_correction_shows_one_passage(client, reviewer, editor2, world):
    _proposal(
        world, 1, reviewer, citation_locator="1.1", citation_quote="minimum bearing is 101 mm"
    )
    client.force_login(editor2)
    article = _articles(client.get("/review/approvals/").content.decode())["Q0001"]
    assert article.count('class="cited-passage"') == 1 and "Key’s citation now" not in article


# ------------------------------------------------------------------ bulk approval


def _bulk(client, proposals, **extra):
    data = {"proposal": [str(p.pk) for p in proposals], "comment": "Checked against AD A."}
    for p in proposals:
        data[f"version-{p.pk}"] = str(ReviewItem.objects.get(pk=p.item_id).version)
    return client.post("/review/proposals/approve/", data | extra, follow=True)


def _message(response) -> str:
    return " ".join(str(m) for m in response.context["messages"])


def test_bulk_approve_approves_others_and_names_the_editors_own(
    client, reviewer, editor, editor2, world
):
    theirs = [_proposal(world, i, reviewer) for i in (1, 2)]
    mine = _proposal(world, 3, editor2)
    client.force_login(editor2)
    response = _bulk(client, [theirs[0], mine, theirs[1]])
    assert response.status_code == 200
    assert _message(response) == (
        "Approved 2 (Q0001, Q0002); refused 1: Q0003 (your own proposal)."
    )
    statuses = dict(Proposal.objects.values_list("item__question__question_id", "status"))
    assert statuses == {"Q0001": "approved", "Q0002": "approved", "Q0003": "pending"}
    assert {p.decision_comment for p in Proposal.objects.filter(status="approved")} == {
        "Checked against AD A."
    }
    approvals = AuditLogEntry.objects.filter(action=Action.PROPOSAL_APPROVE)
    assert sorted(int(e.target_id) for e in approvals) == sorted(p.pk for p in theirs)
    draft = KeyEntry.objects.filter(edition__status="draft")
    assert sorted(draft.values_list("answer", flat=True)) == ["201 mm", "202 mm"]
    # the other editor approves the remaining one
    client.force_login(editor)
    assert _message(_bulk(client, [mine])) == "Approved 1 (Q0003)."


def test_bulk_approve_resubmitted_changes_nothing(client, reviewer, editor2, world):
    proposals = [_proposal(world, i, reviewer) for i in (1, 2)]
    client.force_login(editor2)
    data = {"proposal": [str(p.pk) for p in proposals], "comment": ""}
    for p in proposals:
        data[f"version-{p.pk}"] = str(ReviewItem.objects.get(pk=p.item_id).version)
    first = client.post("/review/proposals/approve/", data, follow=True)
    assert _message(first) == "Approved 2 (Q0001, Q0002)."
    logged = AuditLogEntry.objects.count()
    again = client.post("/review/proposals/approve/", data, follow=True)
    assert _message(again) == (
        "Approved 0; refused 2: Q0001 (already approved), Q0002 (already approved)."
    )
    assert AuditLogEntry.objects.count() == logged
    assert KeyEntry.objects.filter(edition__status="draft").count() == 2


def test_bulk_approve_refuses_a_proposal_whose_item_changed(client, reviewer, editor2, world):
    stale, fresh = (_proposal(world, i, reviewer) for i in (1, 2))
    client.force_login(editor2)
    data = {
        "proposal": [str(stale.pk), str(fresh.pk)],
        f"version-{stale.pk}": str(ReviewItem.objects.get(pk=stale.item_id).version - 1),
        f"version-{fresh.pk}": str(ReviewItem.objects.get(pk=fresh.item_id).version),
    }
    response = client.post("/review/proposals/approve/", data, follow=True)
    assert _message(response) == (
        "Approved 1 (Q0002); refused 1: Q0001 (its item changed since the page was shown: "
        "reload and look again)."
    )
    stale.refresh_from_db()
    assert stale.status == "pending" and stale.key_entry_id is None


def test_bulk_approve_refuses_non_editors_bad_ids_and_an_empty_selection(
    client, reviewer, editor2, world
):
    proposal = _proposal(world, 1, reviewer)
    client.force_login(reviewer)
    response = client.post("/review/proposals/approve/", {"proposal": [str(proposal.pk)]})
    assert response.status_code == 403
    proposal.refresh_from_db()
    assert proposal.status == "pending"
    client.force_login(editor2)
    bad = client.post("/review/proposals/approve/", {"proposal": ["12x"]})
    assert bad.status_code == 400
    assert "Bulk approval refused: proposal: &#x27;12x&#x27; is not a proposal number." in (
        bad.content.decode()
    )
    assert client.get("/review/proposals/approve/").status_code == 405
    empty = client.post("/review/proposals/approve/", {}, follow=True)
    assert _message(empty) == "Tick at least one proposal to approve."


def test_bulk_approve_needs_the_csrf_token(reviewer, editor2, world):
    proposal = _proposal(world, 1, reviewer)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(editor2)
    refused = browser.post("/review/proposals/approve/", {"proposal": [str(proposal.pk)]})
    assert refused.status_code == 403
    proposal.refresh_from_db()
    assert proposal.status == "pending"
    page = browser.get("/review/approvals/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    assert 'form="bulk-approve" data-proposal-select' in page
    sent = browser.post(
        "/review/proposals/approve/",
        {"proposal": [str(proposal.pk)], "csrfmiddlewaretoken": token},
    )
    assert sent.status_code == 303
    proposal.refresh_from_db()
    assert proposal.status == "approved"


def test_approvals_page_cannot_select_ones_own_proposal(client, reviewer, editor2, world):
    _proposal(world, 1, reviewer)
    _proposal(world, 2, editor2)
    client.force_login(editor2)
    articles = _articles(client.get("/review/approvals/").content.decode())
    assert "data-proposal-select" in articles["Q0001"]
    assert "Your own proposal: not selectable" in articles["Q0002"]
    assert "data-proposal-select" not in articles["Q0002"]


def test_bulk_approve_api(client, reviewer, editor2, world):
    theirs = _proposal(world, 1, reviewer)
    mine = _proposal(world, 2, editor2)
    body = {
        "proposals": [
            {"id": theirs.pk, "version": ReviewItem.objects.get(pk=theirs.item_id).version},
            {"id": mine.pk},
            {"id": 999999},
        ],
        "comment": "ok",
    }
    client.force_login(reviewer)
    url = "/api/review/proposals/bulk-approve/"
    assert client.post(url, json.dumps(body), content_type="application/json").status_code == 403
    client.force_login(editor2)
    response = client.post(url, json.dumps(body), content_type="application/json")
    assert response.status_code == 200
    data = response.json()
    assert [p["id"] for p in data["approved"]] == [theirs.pk]
    assert data["approved"][0]["status"] == "approved"
    assert data["refused"] == [
        {"id": mine.pk, "question_id": "Q0002", "code": "own", "reason": "your own proposal"},
        {"id": 999999, "question_id": "#999999", "code": "missing", "reason": "no such proposal"},
    ]
    assert data["summary"].startswith("Approved 1 (Q0001); refused 2: Q0002 (your own proposal)")
    empty = client.post(url, json.dumps({"proposals": []}), content_type="application/json")
    assert empty.status_code == 400 and "proposals" in empty.json()


def test_edition_page_shows_each_changes_new_and_old_passages(
    client, reviewer, editor, editor2, world
):
    moved = _proposal(world, 1, reviewer)  # ADA 1.1 -> ADA 1.2, quote "... 102 mm"
    removal = _proposal(world, 2, reviewer, action="remove", reason="ungradeable")
    for proposal in (moved, removal):
        services.proposal_approve(proposal=proposal, user=editor2)
    client.force_login(editor)
    body = client.get("/editions/demo/corrected-1/").content.decode()
    changes = body.split('<article class="card">')[1:]
    assert len(changes) == 2
    assert "Citation in corrected-1: <strong>ADA 1.2</strong>" in changes[0]
    assert "<mark>minimum bearing is 102 mm</mark>" in changes[0]
    assert "Citation in original: <strong>ADA 1.1</strong>" in changes[0]
    # a removal shows only the passage the removed entry cited
    assert "Citation in corrected-1" not in changes[1]
    assert "Citation in original: <strong>ADA 1.2</strong>" in changes[1]
    assert "<mark>minimum bearing is 102 mm</mark>" in changes[1]
