"""Review API: values returned, 409 on stale versions, query counts, schema."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from review import services
from review.models import ReviewItem
from tests.factories import ReviewItemFactory
from tests.review_fixtures import *  # noqa: F403
from tests.review_fixtures import build_world

pytestmark = pytest.mark.django_db


def api_for(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.mark.parametrize("n", [3, 30])
def test_items_list_query_count_is_constant(reviewer, django_assert_max_num_queries, n):
    world = build_world(n_questions=n, n_models=1, with_grades=False, with_audits=False)
    ReviewItem.objects.bulk_create(
        [
            ReviewItem(
                benchmark=world.benchmark,
                question=q,
                source="judge_flag",
                sources=["judge_flag"],
                priority=100 + i,
            )
            for i, q in enumerate(world.questions)
        ]
    )
    client = api_for(reviewer)
    with django_assert_max_num_queries(6):
        response = client.get("/api/review/items/?benchmark=demo&source=judge_flag&open=true")
    data = response.json()
    assert data["count"] == n
    assert data["results"][0]["question_id"] == f"Q{n - 1:04d}"  # highest priority first
    assert data["results"][0]["version"] == 1


def test_claim_check_propose_decide_publish_over_the_api(world, reviewer, editor, editor2):
    item = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    rev = api_for(reviewer)
    claimed = rev.post(f"/api/review/items/{item.pk}/claim/").json()
    assert (
        claimed["status"] == "claimed"
        and claimed["claimed_by"] == "reviewer"
        and claimed["version"] == 2
    )
    check = rev.post(
        f"/api/review/items/{item.pk}/checks/",
        {
            "version": 2,
            "locator_exists": "yes",
            "supports": "no",
            "edition_in_force": "superseded",
            "amended": "yes",
        },
        format="json",
    )
    assert check.status_code == 201 and check.json()["supports"] == "no"
    stale = rev.post(
        f"/api/review/items/{item.pk}/proposals/",
        {
            "version": 2,
            "action": "correct",
            "answer": "150 mm",
            "citation_doc_id": "ADA",
            "citation_locator": "1.3",
            "reason": "amended_or_repealed",
        },
        format="json",
    )
    assert stale.status_code == 409
    assert stale.json()["current_version"] == 3
    assert [c["action"] for c in stale.json()["changes"]] == ["review_item.check"]
    proposal = rev.post(
        f"/api/review/items/{item.pk}/proposals/",
        {
            "version": 3,
            "action": "correct",
            "answer": "150 mm",
            "citation_doc_id": "ADA",
            "citation_locator": "1.3",
            "reason": "amended_or_repealed",
        },
        format="json",
    ).json()
    assert proposal["status"] == "pending" and proposal["base_entry"]["answer"] == "101 mm"
    own = api_for(editor)
    rejected_self = rev.post(f"/api/review/proposals/{proposal['id']}/approve/")
    assert rejected_self.status_code == 403
    approved = api_for(editor2).post(
        f"/api/review/proposals/{proposal['id']}/approve/", {"comment": "ok"}, format="json"
    )
    assert approved.json()["status"] == "approved" and approved.json()["decided_by"] == "editor2"
    editions = own.get("/api/review/editions/?benchmark=demo").json()["results"]
    draft = next(e for e in editions if e["status"] == "draft")
    assert draft["name"] == "corrected-1" and draft["parent"] == "original"
    detail = own.get(f"/api/review/editions/{draft['id']}/").json()
    assert detail["changes"][0]["question_id"] == "Q0001"
    assert (
        detail["changes"][0]["old"]["answer"] == "101 mm"
        and detail["changes"][0]["new"]["answer"] == "150 mm"
    )
    assert (
        detail["changes"][0]["proposed_by"] == "reviewer"
        and detail["changes"][0]["approved_by"] == "editor2"
    )
    published = own.post(f"/api/review/editions/{draft['id']}/publish/").json()
    assert published["status"] == "published" and published["published_by"] == "editor"
    again = own.post(f"/api/review/editions/{draft['id']}/publish/")
    assert again.status_code == 409


def test_claim_conflict_and_next_empty(world, reviewer, reviewer2):
    item = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    api_for(reviewer).post(f"/api/review/items/{item.pk}/claim/")
    taken = api_for(reviewer2).post(f"/api/review/items/{item.pk}/claim/")
    assert taken.status_code == 409 and "by reviewer" in taken.json()["detail"]
    assert api_for(reviewer2).post("/api/review/items/next/", {}, format="json").status_code == 204


def test_item_detail_includes_evidence_checks_and_proposals(world, reviewer):
    item = services.review_item_claim(
        item=ReviewItemFactory(question=world.q(1), benchmark=world.benchmark), user=reviewer
    )
    services.proposal_create(
        item=item, user=reviewer, version=item.version, action="remove", reason="ungradeable"
    )
    data = api_for(reviewer).get(f"/api/review/items/{item.pk}/").json()
    assert data["status"] == "proposed"
    assert (
        data["proposals"][0]["action"] == "remove" and data["proposals"][0]["author"] == "reviewer"
    )
    assert data["evidence"] == [] and data["checks"] == []


def test_log_endpoint_filters_and_counts(world, reviewer, admin, django_assert_max_num_queries):
    item = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    services.review_item_claim(item=item, user=reviewer)
    services.review_item_release(item=item, user=reviewer)
    client = api_for(admin)
    with django_assert_max_num_queries(5):
        data = client.get("/api/review/log/?action=review_item.claim").json()
    assert data["count"] == 1
    entry = data["results"][0]
    assert entry["actor_label"] == "reviewer" and entry["after"]["status"] == "claimed"
    assert entry["action"] == "review_item.claim" and entry["action_label"] == "claimed the item"


def test_schema_lists_review_endpoints(admin):
    client = APIClient()
    client.force_login(admin)
    schema = client.get("/api/schema/?format=json").json()
    for path in (
        "/api/review/items/",
        "/api/review/items/{id}/claim/",
        "/api/review/items/next/",
        "/api/review/items/{id}/checks/",
        "/api/review/items/{id}/proposals/",
        "/api/review/proposals/{id}/approve/",
        "/api/review/proposals/{id}/reject/",
        "/api/review/editions/{id}/publish/",
        "/api/review/log/",
    ):
        assert path in schema["paths"], path


def test_api_docs_page_loads_swagger_ui_from_this_server(admin):
    """/api/docs/ must work offline: Swagger UI's files come from drf-spectacular-sidecar's
    static files, not a CDN (it was a blank page without internet access)."""
    import re

    from django.test import Client

    client = Client()
    client.force_login(admin)
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css|png))"', html)
    assert any(a.endswith("swagger-ui-bundle.js") for a in assets), assets
    for asset in assets:
        assert asset.startswith("/static/"), f"{asset} is not served from this server"
        served = client.get(asset)
        assert served.status_code == 200, asset
        b"".join(served.streaming_content) if served.streaming else served.content
    assert "cdn.jsdelivr" not in html and "unpkg.com" not in html


# ------------------------------------------- one filter definition per list (issue 16)
QUEUE_PARAMS = [
    {},
    {"status": "all"},
    {"status": "claimed"},
    {"open": "false"},
    {"open": "true", "benchmark": "demo"},
    {"source": "judge_flag"},
    {"category": "regs", "status": "all"},
    {"document": "ADA"},
    {"assignee": "me"},
    {"assignee": "none"},
    {"assignee": "reviewer", "status": "all"},
    {"q": "Q0001"},
]


def test_queue_page_and_api_accept_the_same_filters_and_list_the_same_rows(client, world, reviewer):
    """review.filters.QueueFilters is the one definition; each query gives the same rows.

    The API used to list closed items when no status was given (its own FilterSet); it now
    lists what the page lists, the items that are not closed, and `open=false` the closed
    ones. `q` and `assignee=me`/`none` were page-only before.
    """
    items = [
        ReviewItemFactory(question=world.q(i), benchmark=world.benchmark, priority=300 - i)
        for i in range(4)
    ]
    ReviewItem.objects.filter(pk=items[2].pk).update(source="judge_flag", sources=["judge_flag"])
    ReviewItem.objects.filter(pk=items[3].pk).update(status="confirmed")
    services.review_item_claim(item=items[1], user=reviewer)
    client.force_login(reviewer)
    expected = {
        "": ["Q0000", "Q0001", "Q0002"],
        "status=all": ["Q0000", "Q0001", "Q0002", "Q0003"],
        "open=false": ["Q0003"],
        "assignee=me": ["Q0001"],
        "q=Q0001": ["Q0001"],
    }
    for params in QUEUE_PARAMS:
        page = client.get("/review/", params)
        assert page.status_code == 200
        page_rows = [row["qid"] for row in page.context["rows"]]
        api = api_for(reviewer).get("/api/review/items/", params)
        assert api.status_code == 200, (params, api.content)
        api_rows = [r["question_id"] for r in api.json()["results"]]
        assert api_rows == page_rows, params
        key = "&".join(f"{k}={v}" for k, v in params.items())
        if key in expected:
            assert page_rows == expected[key], params
    assert api_for(reviewer).get("/api/review/items/?status=bogus").status_code == 400
    assert api_for(reviewer).get("/api/review/items/?open=maybe").status_code == 400
    assert client.get("/review/?status=bogus").context["rows"] == []


def test_log_page_and_api_accept_the_same_filters_and_dates(client, world, reviewer, admin):
    """review.filters.AuditLogFilter is the one definition: the same options on both,
    dates as the page shows them (30/11/2026) or ISO (2026-11-30)."""
    from django.utils import timezone

    item = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    services.review_item_claim(item=item, user=reviewer)
    services.review_item_release(item=item, user=reviewer)
    today = timezone.localdate()
    client.force_login(admin)
    cases = [
        ({}, None),
        ({"actor": "reviewer"}, 2),
        ({"action": "review_item.claim"}, 1),
        ({"target_type": "review_item", "target_id": str(item.pk)}, 2),
        ({"benchmark_name": "demo", "actor": "reviewer"}, 2),
        ({"actor": "reviewer", "date_from": today.strftime("%d/%m/%Y")}, 2),
        ({"actor": "reviewer", "date_to": today.isoformat()}, 2),
        ({"actor": "reviewer", "date_from": today.strftime("%d/%m/%y")}, 2),
        ({"actor": "reviewer", "date_from": "01/01/2999"}, 0),
        ({"actor": "reviewer", "date_to": "2000-01-01"}, 0),
    ]
    for params, n in cases:
        page = client.get("/log/", params)
        page_ids = [e.pk for e in page.context["page"].object_list]
        api = api_for(admin).get("/api/review/log/", params)
        assert api.status_code == 200, (params, api.content)
        assert [e["id"] for e in api.json()["results"]] == page_ids, params
        if n is not None:
            assert len(page_ids) == n, params
    assert api_for(admin).get("/api/review/log/?date_from=31/02/2026").status_code == 400
    bad = client.get("/log/?date_from=31/02/2026").content.decode()
    assert "Not a date, so not applied: From &#x27;31/02/2026&#x27;" in bad
    # The action is one of core.actions.Action: the page offers each by its label, and an
    # unknown one is an error (400 from the API; said on the page), never an empty list.
    page = client.get("/log/").content.decode()
    assert '<option value="review_item.claim">claimed the item</option>' in page
    assert '<option value="user.roles">changed a user&#x27;s roles</option>' in page
    assert api_for(admin).get("/api/review/log/?action=review_item.grab").status_code == 400
    bad = client.get("/log/?action=review_item.grab").content.decode()
    assert "No such action, so not applied: review_item.grab" in bad


def test_checking_an_item_another_reviewer_holds_is_409_as_the_schema_says(
    world, reviewer, reviewer2, admin
):
    """Issue 30 item 4: the claim endpoint and the schema answer 409 for an item held by
    someone else; the citation check and the proposal answer the same, naming the holder."""
    item = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    held = services.review_item_claim(item=item, user=reviewer)
    other = api_for(reviewer2)
    assert other.post(f"/api/review/items/{item.pk}/claim/").status_code == 409
    check = other.post(
        f"/api/review/items/{item.pk}/checks/",
        {
            "version": held.version,
            "locator_exists": "yes",
            "supports": "yes",
            "edition_in_force": "yes",
            "amended": "no",
        },
        format="json",
    )
    assert check.status_code == 409
    assert check.json()["detail"].startswith("reviewer holds this item now")
    proposal = other.post(
        f"/api/review/items/{item.pk}/proposals/",
        {"version": held.version, "action": "confirm"},
        format="json",
    )
    assert proposal.status_code == 409
    assert not held.checks.exists() and not held.proposals.exists()
    schema = api_for(admin).get("/api/schema/?format=json").json()
    assert "409" in schema["paths"]["/api/review/items/{id}/checks/"]["post"]["responses"]
