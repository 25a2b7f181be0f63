"""Permission matrix: every mutating review page and API endpoint, for every role.

Roles: anonymous, outsider (signed in, no role), inactive (an editor whose account is
disabled), reviewer, editor, admin. The item under test is claimed by `reviewer`, and the
proposal under test is authored by `reviewer`, so holder-only and four-eyes rules show.
"""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from core.models import AuditLogEntry
from questions.models import KeyEdition
from review import services
from review.models import Proposal, ReviewItem
from tests.factories import ReviewItemFactory
from tests.review_fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db

ROLES = ["anonymous", "outsider", "inactive", "reviewer", "editor", "admin"]
EDITORS = {"editor", "admin"}
REVIEWERS = {"reviewer", "editor", "admin"}
HOLDER = {"reviewer"}  # the item is claimed by `reviewer`
# Holder-only actions refuse another reviewer with 409 (the item's state, as a lost claim
# race), anyone without the reviewer role with 403.
HELD_ELSEWHERE_409 = {"check", "propose"}


def _refusal(endpoint: str, role: str) -> int:
    return 409 if endpoint in HELD_ELSEWHERE_409 and role in REVIEWERS else 403


@pytest.fixture
def scene(world, reviewer, editor, admin, outsider, inactive, editor2):
    """Open item (Q0), item claimed by reviewer (Q1), pending proposal by reviewer (Q2), a draft."""
    open_item = ReviewItemFactory(question=world.q(0), benchmark=world.benchmark, priority=900)
    held = services.review_item_claim(
        item=ReviewItemFactory(question=world.q(1), benchmark=world.benchmark, priority=100),
        user=reviewer,
    )
    third = services.review_item_claim(
        item=ReviewItemFactory(question=world.q(2), benchmark=world.benchmark, priority=50),
        user=reviewer,
    )
    proposal = services.proposal_create(
        item=third, user=reviewer, version=third.version, action="remove", reason="ungradeable"
    )
    # A draft with one approved change, ready to publish.
    fourth = services.review_item_claim(
        item=ReviewItemFactory(question=world.q(3), benchmark=world.benchmark, priority=40),
        user=reviewer,
    )
    p4 = services.proposal_create(
        item=fourth, user=reviewer, version=fourth.version, action="remove", reason="other"
    )
    services.proposal_approve(proposal=p4, user=editor2)
    draft = KeyEdition.objects.get(status="draft")
    users = {
        "reviewer": reviewer,
        "editor": editor,
        "admin": admin,
        "outsider": outsider,
        "inactive": inactive,
    }
    return {
        "open": open_item,
        "held": held,
        "proposal": proposal,
        "draft": draft,
        "users": users,
        "world": world,
    }


def _check(s):
    return {
        "version": ReviewItem.objects.get(pk=s["held"].pk).version,
        "locator_exists": "yes",
        "supports": "yes",
        "edition_in_force": "yes",
        "amended": "no",
    }


def _propose(s):
    return {"version": ReviewItem.objects.get(pk=s["held"].pk).version, "action": "confirm"}


# name -> (page url, api url, data, allowed roles, did-it-happen?)
ENDPOINTS = {
    "next": (
        lambda s: "/review/next/",
        lambda s: "/api/review/items/next/",
        lambda s: {},
        REVIEWERS,
        lambda s, u: ReviewItem.objects.get(pk=s["open"].pk).claimed_by_id == u.pk,
    ),
    "claim": (
        lambda s: f"/review/items/{s['open'].pk}/claim/",
        lambda s: f"/api/review/items/{s['open'].pk}/claim/",
        lambda s: {},
        REVIEWERS,
        lambda s, u: ReviewItem.objects.get(pk=s["open"].pk).claimed_by_id == u.pk,
    ),
    "release": (
        lambda s: f"/review/items/{s['held'].pk}/release/",
        lambda s: f"/api/review/items/{s['held'].pk}/release/",
        lambda s: {},
        HOLDER | EDITORS,
        lambda s, u: ReviewItem.objects.get(pk=s["held"].pk).status == "open",
    ),
    "renew": (
        lambda s: f"/review/items/{s['held'].pk}/renew/",
        lambda s: f"/api/review/items/{s['held'].pk}/renew/",
        lambda s: {},
        HOLDER,
        lambda s, u: AuditLogEntry.objects.filter(action="review_item.renew", actor=u).exists(),
    ),
    "reassign": (
        lambda s: f"/review/items/{s['open'].pk}/reassign/",
        lambda s: f"/api/review/items/{s['open'].pk}/reassign/",
        lambda s: {"assignee": "reviewer", "version": 1},
        EDITORS,
        lambda s, u: (
            ReviewItem.objects.get(pk=s["open"].pk).claimed_by_id == s["users"]["reviewer"].pk
        ),
    ),
    "check": (
        lambda s: f"/review/items/{s['held'].pk}/check/",
        lambda s: f"/api/review/items/{s['held'].pk}/checks/",
        _check,
        HOLDER,
        lambda s, u: s["held"].checks.filter(reviewer=u).exists(),
    ),
    "propose": (
        lambda s: f"/review/items/{s['held'].pk}/propose/",
        lambda s: f"/api/review/items/{s['held'].pk}/proposals/",
        _propose,
        HOLDER,
        lambda s, u: s["held"].proposals.filter(author=u).exists(),
    ),
    "approve": (
        lambda s: f"/review/proposals/{s['proposal'].pk}/approve/",
        lambda s: f"/api/review/proposals/{s['proposal'].pk}/approve/",
        lambda s: {"comment": "fine"},
        EDITORS,  # reviewer is the author AND not an editor
        lambda s, u: Proposal.objects.get(pk=s["proposal"].pk).decided_by_id == u.pk,
    ),
    "reject": (
        lambda s: f"/review/proposals/{s['proposal'].pk}/reject/",
        lambda s: f"/api/review/proposals/{s['proposal'].pk}/reject/",
        lambda s: {"comment": "needs the 2013 table"},
        EDITORS,
        lambda s, u: Proposal.objects.get(pk=s["proposal"].pk).status == "rejected",
    ),
    "publish": (
        lambda s: f"/editions/{s['world'].benchmark.name}/{s['draft'].name}/publish/",
        lambda s: f"/api/review/editions/{s['draft'].pk}/publish/",
        lambda s: {},
        EDITORS,
        lambda s, u: KeyEdition.objects.get(pk=s["draft"].pk).status == "published",
    ),
}


def _client(kind: str, role: str, scene):
    client = Client() if kind == "page" else APIClient()
    if role != "anonymous":
        client.force_login(scene["users"][role])
    return client


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_page_permission_matrix(scene, endpoint, role):
    page_url, _, data, allowed, happened = ENDPOINTS[endpoint]
    client = _client("page", role, scene)
    response = client.post(page_url(scene), data(scene))
    user = scene["users"].get(role)
    if role in ("anonymous", "inactive"):
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
        assert not (user and happened(scene, user))
    elif role in allowed:
        assert response.status_code == 303, response.content[:500]
        assert happened(scene, user)
    else:
        assert response.status_code == _refusal(endpoint, role)
        assert not happened(scene, user)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_api_permission_matrix(scene, endpoint, role):
    _, api_url, data, allowed, happened = ENDPOINTS[endpoint]
    client = _client("api", role, scene)
    response = client.post(api_url(scene), data(scene), format="json")
    user = scene["users"].get(role)
    if role in ("anonymous", "inactive"):
        assert response.status_code in (401, 403)
        assert not (user and happened(scene, user))
    elif role in allowed:
        assert response.status_code in (200, 201), response.content[:500]
        assert happened(scene, user)
    else:
        assert response.status_code == _refusal(endpoint, role), response.content[:500]
        assert not happened(scene, user)


def test_editor_sees_own_proposal_without_buttons_and_forcing_it_fails(world, editor, editor2):
    item = services.review_item_claim(
        item=ReviewItemFactory(question=world.q(0), benchmark=world.benchmark), user=editor
    )
    proposal = services.proposal_create(
        item=item, user=editor, version=item.version, action="remove", reason="ungradeable"
    )
    client = Client()
    client.force_login(editor)
    body = client.get("/review/approvals/").content.decode()
    assert "Your own proposal: another editor must decide it." in body
    assert f"/review/proposals/{proposal.pk}/approve/" not in body
    forced = client.post(f"/review/proposals/{proposal.pk}/approve/")
    assert forced.status_code == 403
    assert "you cannot approve your own proposal" in forced.content.decode()
    api = APIClient()
    api.force_login(editor)
    assert api.post(f"/api/review/proposals/{proposal.pk}/approve/").status_code == 403
    client.force_login(editor2)
    body = client.get("/review/approvals/").content.decode()
    assert f"/review/proposals/{proposal.pk}/approve/" in body


@pytest.mark.parametrize(
    "url,allowed",
    [
        ("/review/", REVIEWERS),
        ("/review/approvals/", EDITORS),
        ("/log/", {"admin"}),
        ("/api/review/log/", {"admin"}),
        ("/api/review/items/", REVIEWERS),
    ],
)
@pytest.mark.parametrize("role", ["outsider", "reviewer", "editor", "admin"])
def test_read_pages_by_role(scene, url, allowed, role):
    client = _client("api" if url.startswith("/api/") else "page", role, scene)
    response = client.get(url)
    assert response.status_code == (200 if role in allowed else 403)
