"""htmx done right (issue 18 item 7): NUL and other control characters in a filter are a
400 naming the filter (not a 500), history-restore requests get whole pages, and a failed
htmx request shows a visible message."""

from __future__ import annotations

import pytest

from tests.review_fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db

NUL_URLS = [
    ("/review/?q=%00", "q"),
    ("/review/?benchmark=demo%00", "benchmark"),
    ("/log/?actor=%00", "actor"),
    ("/log/?date_from=2026-01-01%00", "date_from"),
    ("/leaderboard/demo/?edition=original%00", "edition"),
    ("/report/demo/?edition=%01", "edition"),
    ("/editions/demo/original/key/?q=%00", "q"),
    ("/review/?%00=1", "\\x00"),
]


@pytest.mark.parametrize("url,name", NUL_URLS)
def test_control_characters_in_a_filter_are_a_400_naming_it(client, admin, world, url, name):
    client.force_login(admin)
    response = client.get(url)
    body = response.content.decode()
    assert response.status_code == 400, url
    assert f"The value of the filter “{name}” contains the control character U+00" in body
    assert "<html" in body
    fragment = client.get(url, HTTP_HX_REQUEST="true")
    assert fragment.status_code == 400 and "<html" not in fragment.content.decode()
    assert 'role="alert"' in fragment.content.decode()


def test_the_api_answers_400_json_for_a_nul(client, admin, world):
    client.force_login(admin)
    response = client.get("/api/review/items/?q=%00")
    assert response.status_code == 400
    assert response.json()["parameter"] == "q"


def test_tab_and_newline_in_a_search_are_not_refused(client, admin, world):
    client.force_login(admin)
    assert client.get("/review/?q=a%09b%0Ac").status_code == 200


@pytest.mark.parametrize(
    "url",
    [
        "/review/?benchmark=demo&status=all",
        "/leaderboard/demo/",
        "/report/demo/",
        "/scorecard/demo/",
        "/runs/",
    ],
)
def test_history_restore_requests_get_the_whole_page(client, admin, world, url):
    """htmx asks again on Back when its history cache misses; the answer must be a page,
    not the fragment (the pages also tell htmx not to send HX-Request then: base.html)."""
    client.force_login(admin)
    response = client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" in body and 'class="site-header"' in body, url


def test_pages_tell_htmx_to_restore_history_as_a_page_load(client, admin, world):
    client.force_login(admin)
    body = client.get("/review/").content.decode()
    assert '"historyRestoreAsHxRequest": false' in body


def test_opening_an_actions_address_says_it_is_not_a_page(client, reviewer):
    """GET on a POST-only address (/review/next/) was Django's empty 405: now a page that
    says what the address is, still 405 with its Allow header; the API keeps DRF's JSON and
    an htmx request keeps the bare answer."""
    client.force_login(reviewer)
    browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    response = client.get("/review/next/", HTTP_ACCEPT=browser)
    body = response.content.decode()
    assert response.status_code == 405 and response["Allow"] == "POST"
    assert "<html" in body and "Not a page" in body and "(POST only)" in body
    htmx = client.get("/review/next/", HTTP_HX_REQUEST="true", HTTP_ACCEPT=browser)
    assert htmx.status_code == 405 and htmx.content == b""
    probe = client.post("/healthz", HTTP_ACCEPT="*/*")  # a monitor, not a person
    assert probe.status_code == 405 and b"<html" not in probe.content
    api = client.put("/api/review/items/")
    assert api.status_code == 405 and "detail" in api.json()


def test_pages_name_the_site_icon(client, reviewer):
    client.force_login(reviewer)
    body = client.get("/review/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in body
