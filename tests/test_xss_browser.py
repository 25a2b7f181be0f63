"""Untrusted text in a real browser: with the payloads in the data, no script runs.

Signs in through the sign-in form and opens the queue, every review item, approvals, the
key editions and the edition diff, leaderboard (with the comparison), report, audit log
and runs pages in Chromium. A payload that ran would set `window.__xss`, change the
title to 'XSS', open a dialog, or make htmx fetch `/log/?xss=1`. Issue 7, item 3.
"""

from __future__ import annotations

import pytest

from tests.browser import ARTIFACTS, InFlight
from tests.test_xss import build_xss_world

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = ARTIFACTS / "xss"


@pytest.fixture
def browser(chromium):
    """The session's one Chromium (tests/browser.py): two sync Playwright loops can't nest."""
    return chromium


def test_no_payload_runs_in_the_browser_on_any_page(live_server, browser, tmp_path):
    world = build_xss_world(tmp_path)
    SHOTS.mkdir(parents=True, exist_ok=True)  # a fresh checkout has no test-artifacts/
    dialogs: list[str] = []
    hostile_requests: list[str] = []
    page = browser.new_page()
    in_flight = InFlight(page)
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: hostile_requests.append(r.url) if "xss" in r.url else None)

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", world.admin.username)
    page.fill("input[name=password]", "correct-horse-battery-1")
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_load_state("networkidle")
    assert "/accounts/login/" not in page.url, "sign-in failed"

    ran: dict[str, str] = {}
    for path in world.pages:
        page.goto(f"{live_server.url}{path}")
        in_flight.settle()  # hx-trigger="load" requests answered
        page.wait_for_timeout(50)  # and what they swapped in processed, autofocus fired
        # Hover and focus everything a payload could have hooked (onmouseover/onfocus).
        page.evaluate(
            """() => document.querySelectorAll('*').forEach(el => {
                   for (const t of ['mouseover', 'focus', 'toggle'])
                       el.dispatchEvent(new Event(t));
               })"""
        )
        flag = page.evaluate("window.__xss")
        title = page.title()
        if flag is not None or title.startswith("XSS"):
            ran[path] = f"window.__xss={flag!r} title={title!r}"
        name = path.strip("/").replace("/", "_").replace("?", "_") or "home"
        page.screenshot(path=str(SHOTS / f"xss-{name[:80]}.png"), full_page=False)
    # Control: the same probe does see a payload that runs (so "nothing ran" means it). On a
    # blank page: set_content keeps the current document's Content-Security-Policy, which
    # would block the handler (issue 19 item 6) and make the control prove nothing.
    page.goto("about:blank")
    page.set_content('<img src=x onerror="window.__xss=1">')
    page.wait_for_function("window.__xss === 1", timeout=5000)
    page.close()
    assert not ran, ran
    assert not dialogs, dialogs
    assert not hostile_requests, hostile_requests
