"""Site-wide access rules: anonymous users get the login page only."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

pytestmark = pytest.mark.django_db


def test_anonymous_page_request_redirects_to_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=%2F"


def test_anonymous_htmx_request_gets_whole_page_redirect_not_a_fragment(client):
    response = client.get(
        "/", HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://testserver/review/?status=open"
    )
    assert response.status_code == 204
    assert response["HX-Redirect"] == "/accounts/login/?next=%2Freview%2F%3Fstatus%3Dopen"
    assert response.content == b""


def test_login_page_renders_a_form_in_british_english(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "Sign in" in body and 'name="password"' in body


def test_roles_come_from_groups_and_editor_implies_reviewer(db):
    from questions.roles import Role, user_roles

    assert {g.name for g in Group.objects.all()} >= {"reviewer", "editor", "admin"}
    user = User.objects.create_user("ed", password="x-very-long-pass-1")
    user.groups.add(Group.objects.get(name="editor"))
    assert user_roles(user) == {Role.REVIEWER, Role.EDITOR}
    user.is_active = False
    user._snaglist_roles = None
    assert user_roles(user) == set()


def test_signed_in_user_sees_overview(client):
    user = User.objects.create_user("rev", password="x-very-long-pass-1")
    user.groups.add(Group.objects.get(name="reviewer"))
    client.force_login(user)
    response = client.get("/")
    assert response.status_code == 200
    assert "No benchmark has been imported yet" in response.content.decode()
