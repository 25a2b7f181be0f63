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
    # django-htmx's HttpResponseClientRedirect: 200, no Location, htmx follows HX-Redirect
    assert response.status_code == 200 and "Location" not in response
    assert response["HX-Redirect"] == "/accounts/login/?next=%2Freview%2F%3Fstatus%3Dopen"
    assert response.content == b""


def test_login_page_renders_a_form_in_british_english(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "Sign in" in body and 'name="password"' in body


def test_roles_come_from_groups_and_editor_implies_reviewer(db):
    from core.roles import Role, user_roles

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


def test_login_is_rate_limited_after_five_failures(client):
    User.objects.create_user("victim", password="the-right-password-42")
    for _ in range(4):
        response = client.post("/accounts/login/", {"username": "victim", "password": "wrong"})
        assert response.status_code == 200  # the form again, with an error
    fifth = client.post("/accounts/login/", {"username": "victim", "password": "wrong"})
    assert fifth.status_code == 429  # the fifth failure locks the account out
    locked = client.post(
        "/accounts/login/", {"username": "victim", "password": "the-right-password-42"}
    )
    assert locked.status_code == 429
    assert "Too many sign-in attempts" in locked.content.decode()


def test_correct_password_signs_in(client):
    User.objects.create_user("someone", password="the-right-password-42")
    response = client.post(
        "/accounts/login/", {"username": "someone", "password": "the-right-password-42"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/"


def test_deploy_check_passes_with_production_settings(db):
    import os
    import subprocess
    import sys

    from tests.conftest import PROJECT_ROOT
    from tests.worker_fixtures import database_url

    env = dict(os.environ)
    env.update(
        # The role check (core/checks.py) connects: to the test database, which exists on a
        # fresh machine (DATABASE_URL's own database may not).
        DATABASE_URL=database_url(),
        DJANGO_SETTINGS_MODULE="config.settings_production",
        DJANGO_SECRET_KEY="a-long-random-production-secret-" + "x7Qp2Lm9Zr4Tk8Wv" * 3,
        DJANGO_ALLOWED_HOSTS="snaglist.example.org",
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # The test database user is a PostgreSQL superuser: the one issue is the database-role
    # warning (core/checks.py, issue 19); every Django security setting passes. That a role
    # owning nothing passes clean is in tests/test_schema_guard.py.
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "System check identified 1 issue" in output, output
    assert "(snaglist.W001) The app connects to PostgreSQL as 'postgres', a superuser" in output


def test_production_cookies_are_secure_httponly_samesite():
    import importlib
    import os

    os.environ.setdefault("DJANGO_SECRET_KEY", "a-long-random-production-secret-" + "k" * 40)
    prod = importlib.import_module("config.settings_production")
    assert prod.SESSION_COOKIE_SECURE is True
    assert prod.SESSION_COOKIE_HTTPONLY is True
    assert prod.SESSION_COOKIE_SAMESITE == "Lax"
    assert prod.CSRF_COOKIE_SECURE is True
    assert prod.DEBUG is False


def test_navigation_highlights_only_the_most_specific_entry(client):
    user = User.objects.create_user("ed2", password="x-very-long-pass-1")
    user.groups.add(Group.objects.get(name="editor"))
    client.force_login(user)
    body = client.get("/review/approvals/").content.decode()
    assert body.count('aria-current="page"') == 1
    assert 'href="/review/approvals/" aria-current="page"' in body


def test_dates_are_in_uk_format_with_a_24_hour_clock():
    import datetime

    from django.utils import formats, translation

    moment = datetime.datetime(2026, 3, 5, 14, 7)
    with translation.override("en-gb"):
        assert formats.date_format(moment, "DATETIME_FORMAT") == "5 March 2026, 14:07"
        assert formats.date_format(moment, "SHORT_DATE_FORMAT") == "05/03/2026"


def test_admin_sees_a_rescore_button_on_a_published_edition_and_a_reviewer_does_not(client):
    from django.core.management import call_command

    from tests.conftest import DEMO_BUNDLE

    call_command("import_bundle", str(DEMO_BUNDLE), verbosity=0)
    url = "/editions/uk-construction-demo/original/"
    admin = User.objects.create_user("adm", password="x-very-long-pass-1")
    admin.groups.add(Group.objects.get(name="admin"))
    reviewer = User.objects.create_user("rev2", password="x-very-long-pass-1")
    reviewer.groups.add(Group.objects.get(name="reviewer"))
    client.force_login(admin)
    assert "Re-score original" in client.get(url).content.decode()
    client.force_login(reviewer)
    assert "Re-score original" not in client.get(url).content.decode()


def test_item_history_reads_as_plain_english(client):
    from django.core.management import call_command

    from review.models import ReviewItem
    from review.services import review_item_claim
    from tests.conftest import DEMO_BUNDLE

    call_command("import_bundle", str(DEMO_BUNDLE), verbosity=0)
    call_command("triage", benchmark="uk-construction-demo", verbosity=0)
    user = User.objects.create_user("histo", password="x-very-long-pass-1")
    user.groups.add(Group.objects.get(name="reviewer"))
    item = ReviewItem.objects.order_by("-priority", "pk").first()
    review_item_claim(item=item, user=user)
    client.force_login(user)
    body = client.get(f"/review/items/{item.pk}/").content.decode()
    assert "<strong>histo</strong> claimed the item → claimed" in body
    assert "put the item in the queue → open" in body
    assert "review_item.claim" not in body
