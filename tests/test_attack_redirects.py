"""Open redirects: a form's `next` must never send a signed-in user to another site.

The review item actions (claim, release, renew, reassign) redirect to `next` from the
POST body after the action. An attacker's page that posts `next=https://evil.example/`
(with a token obtained another way, or a same-site form) would otherwise bounce the
reviewer to a look-alike sign-in page. Issue 7, item 4.
"""

from __future__ import annotations

import pytest
from django.test import Client

from review import services
from tests.factories import ReviewItemFactory
from tests.review_fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db

HOSTILE = [
    "https://evil.example/",
    "//evil.example/",
    "/\\evil.example/",
    "https:evil.example",
    "javascript:alert(1)",
    " https://evil.example/",
]


@pytest.mark.parametrize("target", HOSTILE)
@pytest.mark.parametrize("action", ["claim", "release", "renew"])
def test_item_actions_do_not_redirect_off_site(world, reviewer, action, target):  # noqa: F811
    item = ReviewItemFactory(question=world.q(0), benchmark=world.benchmark)
    if action != "claim":
        services.review_item_claim(item=item, user=reviewer)
        item.refresh_from_db()
    client = Client()
    client.force_login(reviewer)
    response = client.post(
        f"/review/items/{item.pk}/{action}/", {"next": target, "version": item.version}
    )
    assert response.status_code == 303
    assert response["Location"] == f"/review/items/{item.pk}/"


def test_item_actions_still_follow_a_local_next(world, reviewer):  # noqa: F811
    item = ReviewItemFactory(question=world.q(0), benchmark=world.benchmark)
    client = Client()
    client.force_login(reviewer)
    response = client.post(f"/review/items/{item.pk}/claim/", {"next": "/review/?status=open"})
    assert response.status_code == 303
    assert response["Location"] == "/review/?status=open"


def test_htmx_item_actions_do_not_redirect_off_site(world, reviewer):  # noqa: F811
    item = ReviewItemFactory(question=world.q(0), benchmark=world.benchmark)
    client = Client()
    client.force_login(reviewer)
    response = client.post(
        f"/review/items/{item.pk}/claim/", {"next": "https://evil.example/"}, HTTP_HX_REQUEST="true"
    )
    assert response["HX-Redirect"] == f"/review/items/{item.pk}/"


def test_sign_in_does_not_redirect_off_site(db):
    from django.contrib.auth.models import User

    User.objects.create_user("someone", password="the-right-password-42")
    response = Client().post(
        "/accounts/login/?next=https://evil.example/",
        {"username": "someone", "password": "the-right-password-42"},
    )
    assert response.status_code == 302
    assert response["Location"] == "/"
