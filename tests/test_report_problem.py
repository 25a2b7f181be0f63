"""Raising a review item by hand (issue 17 item 6): service, page, API, `queue` command."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from core.models import AuditLogEntry
from review.errors import InvalidInputError, NotAllowedError
from review.models import Evidence, ReviewItem
from review.services import review_item_report
from tests.review_fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db
NOTE = "Paragraph 3.60 says at least 1100 mm, not 900 mm."


def test_a_reviewer_raises_an_item_with_the_note_as_evidence_and_it_is_logged(world, reviewer):
    item, created = review_item_report(question=world.q(2), note=f"  {NOTE} ", user=reviewer)
    assert created and item.source == "manual" and item.status == "open"
    ev = Evidence.objects.get(item=item)
    assert (ev.kind, ev.detail) == ("manual", {"note": NOTE, "reported_by": "reviewer"})
    # added by hand: 1 ban = 1000 milli-bans (review.priority.WEIGHTS)
    assert item.priority == 1000 and item.reasons == f"reported by hand: {NOTE}"
    log = AuditLogEntry.objects.get(action="review_item.create")
    assert log.actor_label == "reviewer" and log.target_label == "demo/Q0002"


def test_a_second_report_adds_its_note_to_the_open_item(world, reviewer, editor):
    first, _ = review_item_report(question=world.q(2), note=NOTE, user=reviewer)
    again, created = review_item_report(
        question=world.q(2), note="Also cited wrongly.", user=editor
    )
    assert again.pk == first.pk and not created
    assert ReviewItem.objects.count() == 1 and again.evidence.count() == 2
    assert AuditLogEntry.objects.filter(action="review_item.add_evidence").count() == 1


def test_bad_note_and_outsider_are_refused(world, reviewer, outsider):
    with pytest.raises(InvalidInputError, match="note"):
        review_item_report(question=world.q(2), note="   ", user=reviewer)
    with pytest.raises(InvalidInputError, match="At most 2000"):
        review_item_report(question=world.q(2), note="x" * 2001, user=reviewer)
    with pytest.raises(NotAllowedError):
        review_item_report(question=world.q(2), note=NOTE, user=outsider)
    assert not ReviewItem.objects.exists()


def test_key_page_links_each_row_and_the_form_puts_the_question_in_the_queue(
    world, client, reviewer
):
    client.force_login(reviewer)
    key = client.get(f"/editions/demo/{world.original.name}/key/").content.decode()
    assert 'href="/review/report/demo/"' in key
    assert 'href="/review/report/demo/?question=Q0003"' in key
    form = client.get("/review/report/demo/?question=Q0003").content.decode()
    assert 'value="Q0003"' in form
    response = client.post("/review/report/demo/", {"question_id": "Q0003", "note": NOTE})
    item = ReviewItem.objects.get()
    assert response.status_code == 303 and response["Location"] == f"/review/items/{item.pk}/"
    assert item.question.question_id == "Q0003"
    page = client.get(response["Location"]).content.decode()
    assert f"reported by hand: {NOTE}" in page


def test_the_form_names_an_unknown_question(world, client, reviewer):
    client.force_login(reviewer)
    response = client.post("/review/report/demo/", {"question_id": "Q9999", "note": NOTE})
    assert response.status_code == 422
    assert "No question Q9999 in demo." in response.content.decode()
    assert not ReviewItem.objects.exists()


def test_api_post_creates_then_adds_and_names_bad_input(world, client, reviewer, outsider):
    client.force_login(reviewer)
    body = {"question_id": "Q0001", "note": NOTE}
    created = client.post("/api/review/items/", body, content_type="application/json")
    assert created.status_code == 201
    data = created.json()
    assert data["question_id"] == "Q0001" and data["source"] == "manual"
    assert data["evidence"][0]["detail"]["note"] == NOTE and data["reasons"].startswith("reported")
    added = client.post(
        "/api/review/items/", {**body, "note": "More."}, content_type="application/json"
    )
    assert added.status_code == 200 and len(added.json()["evidence"]) == 2
    unknown = client.post(
        "/api/review/items/", {**body, "question_id": "Q9"}, content_type="application/json"
    )
    assert unknown.status_code == 400 and "Q9" in unknown.json()["question_id"][0]
    client.force_login(outsider)
    assert (
        client.post("/api/review/items/", body, content_type="application/json").status_code == 403
    )


def test_queue_add_and_queue_json(world, editor, capsys):
    call_command("queue", "add", "Q0004", note=NOTE, user="editor", format="json")
    added = json.loads(capsys.readouterr().out)
    assert added["created"] is True and added["question_id"] == "Q0004"
    review_item_report(question=world.q(1), note="second", user=editor)
    ReviewItem.objects.filter(question=world.q(1)).update(priority=1500)
    call_command("queue", format="json")
    doc = json.loads(capsys.readouterr().out)
    assert doc["benchmark"] == "demo" and doc["edition"] == "original"
    assert [(i["position"], i["question_id"], i["priority"]) for i in doc["items"]] == [
        (1, "Q0001", 1500),
        (2, "Q0004", 1000),
    ]
    assert doc["items"][1]["evidence"] == [
        {"kind": "manual", "summary": f"reported by hand: {NOTE}"}
    ]


def test_queue_add_unknown_question_exits_1(world):
    with pytest.raises(CommandError) as exc:
        call_command("queue", "add", "Q9999", note=NOTE)
    assert exc.value.returncode == 1 and "Q9999" in str(exc.value)
    with pytest.raises(CommandError) as exc:
        call_command("queue", "add", "Q0001")
    assert exc.value.returncode == 2


def test_queue_document_reads_in_two_queries(world, reviewer, django_assert_num_queries):
    from review.management.commands.queue import queue_document

    for i in range(4):
        review_item_report(question=world.q(i), note=f"note {i}", user=reviewer)
    with django_assert_num_queries(2):  # items with their questions; their evidence
        doc = queue_document(world.benchmark, world.original, state="open")
    assert len(doc["items"]) == 4
