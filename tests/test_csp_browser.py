"""The Content-Security-Policy in a real browser: the pages work under it (issue 19, item 6).

Signs in to Chromium as a superuser and opens every page the route walk of
tests/test_access_matrix.py reaches with a 200 HTML answer (review pages, leaderboard,
report, runs, audit log, the Django admin, Swagger UI at /api/docs/), then uses the htmx
parts: the leaderboard's and the queue's filters (hx-get swaps) and a review item's
outcome buttons (static/js/review.js). Chromium reports every blocked script, style, eval
or connection as a console error naming the Content Security Policy; there must be none.
A control injects an inline handler and must see it reported and blocked.
"""

from __future__ import annotations

import pytest
from django.test import Client

from tests.browser import InFlight, sign_in
from tests.test_access_matrix import all_routes, build_path, build_world, expected_for, is_api

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct-horse-battery-1"  # build_world's users


def _html_pages(world) -> list[str]:
    """Paths of every route that answers a superuser's GET with a 200 HTML page."""
    client = Client()
    client.force_login(world.users["superuser"])
    paths = []
    for route in all_routes():
        path = build_path(route, world)
        if path is None or expected_for(route) is None or is_api(route) and "docs" not in path:
            continue
        if route.name in ("logout", "admin:logout"):
            continue
        response = client.get(path)
        if response.status_code == 200 and response["Content-Type"].startswith("text/html"):
            paths.append(path)
    return paths


def test_no_page_breaks_the_content_security_policy(live_server, chromium, settings):
    world = build_world()
    paths = _html_pages(world)
    assert len(paths) >= 25, paths
    assert "/api/docs/" in paths and "/admin/" in paths
    page = chromium.new_page()
    in_flight = InFlight(page)
    reported: list[str] = []
    page.on(
        "console",
        lambda m: (
            reported.append(f"{page.url}: {m.text}")
            if "Content Security Policy" in m.text
            else None
        ),
    )
    page.on("pageerror", lambda e: reported.append(f"{page.url}: page error {e}"))
    sign_in(page, live_server.url, world.users["superuser"].username, PASSWORD)
    for path in paths:
        response = page.goto(f"{live_server.url}{path}")
        policy = response.headers["content-security-policy"]
        if path == "/api/docs/":  # Swagger UI's inline <style> (config/urls.py); scripts alike
            policy = policy.replace("style-src 'self' 'unsafe-inline'", "style-src 'self'")
        assert policy == settings.SNAGLIST_CSP, path
        in_flight.settle()
    # Swagger UI drew the API from the schema (its init script is a separate file).
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".swagger-ui .opblock", timeout=15000)

    # htmx: the leaderboard's filter form swaps the board in place (hx-get on change).
    page.goto(f"{live_server.url}/leaderboard/uk-construction-demo/")
    page.wait_for_load_state("networkidle")
    with page.expect_response(lambda r: "banding=ci_overlap" in r.url) as swap:
        page.select_option("#banding-select", "ci_overlap")
    assert swap.value.request.headers.get("hx-request") == "true"  # sent by htmx
    page.wait_for_load_state("networkidle")
    assert page.input_value("#banding-select") == "ci_overlap"

    # htmx: the queue's filters.
    page.goto(f"{live_server.url}/review/")
    with page.expect_response(lambda r: "source=" in r.url and "/review/" in r.url) as swap:
        page.select_option("#f-source", index=1)
    assert swap.value.request.headers.get("hx-request") == "true"
    page.wait_for_load_state("networkidle")

    # review.js: claim an open item, then choose an outcome (shows its fields).
    page.goto(f"{live_server.url}/review/items/{world.item_id}/")
    page.get_by_role("button", name="Claim").click()
    page.wait_for_load_state("networkidle")
    page.get_by_role("radio", name="Correction").click()  # the decision panel's outcome
    page.wait_for_selector("[data-for-action='correct']:visible")
    assert not reported, "\n".join(reported)

    # Control: an inline handler added to the page is blocked and reported.
    page.evaluate(
        """() => { const d = document.createElement('div');
                   d.innerHTML = '<img src="/static/none.png" onerror="window.__ran = 1">';
                   document.body.append(d); }"""
    )
    page.wait_for_timeout(500)
    assert page.evaluate("window.__ran") is None
    assert any("inline event handler" in r for r in reported), reported
    page.close()
