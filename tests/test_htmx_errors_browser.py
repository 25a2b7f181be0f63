"""A failed htmx request is visible (issue 18 item 7), in a real browser on the demo."""

from __future__ import annotations

import pytest

from tests.browser import Shots, sign_in
from tests.test_e2e_main_job import BENCHMARK, PASSWORD, demo  # noqa: F401

pytestmark = [pytest.mark.browser]


@pytest.mark.django_db(transaction=True)
def test_server_error_and_lost_connection_show_a_message(demo, live_server, chromium):  # noqa: F811
    shots = Shots("htmx-errors")
    ctx = chromium.new_context(viewport={"width": 1366, "height": 900}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, live_server.url, "reviewer", PASSWORD)
    page.goto(f"{live_server.url}/review/?benchmark={BENCHMARK}")
    page.wait_for_selector("#queue-results")

    # the filter's htmx request fails with a 500: the page says so
    page.route("**/review/?*status=all*", lambda route: route.fulfill(status=500, body="boom"))
    page.get_by_label("Status", exact=True).select_option("all")
    alert = page.locator("#request-error")
    alert.wait_for()
    assert "The server failed to answer (error 500)" in alert.inner_text()
    shots.take(page, "server error shown", full_page=False)
    page.unroute("**/review/?*status=all*")

    # the connection is lost: the page says that instead
    page.route("**/review/?*status=open*", lambda route: route.abort("failed"))
    page.get_by_label("Status", exact=True).select_option("open")
    page.locator("#request-error", has_text="could not be reached").wait_for()
    shots.take(page, "lost connection shown", full_page=False)
    page.unroute("**/review/?*status=open*")

    # a 400 (a NUL typed into the search) shows the server's own reason
    page.locator("#f-q").fill("a\x00b")
    page.locator("#f-q").press("Enter")
    page.locator("#request-error", has_text="control character").wait_for()
    ctx.close()
