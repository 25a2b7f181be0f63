"""Small screens and wide tables (issue 18 item 6), in a real browser on the demo.

At 390 px the queue's Claim buttons were off screen inside an unmarked scroller; the
leaderboard's category table showed slug headers, ~10 of 18 columns with no hint, and cells
from one response coloured a full 0 or 100. Screenshots: test-artifacts/small-screens/.
"""

from __future__ import annotations

import pytest

from tests.browser import Shots, sign_in
from tests.test_e2e_main_job import BENCHMARK, PASSWORD, demo  # noqa: F401

pytestmark = [pytest.mark.browser]

BOX = "(el) => { const b = el.getBoundingClientRect(); return [b.left, b.right, b.top, b.width]; }"


@pytest.mark.django_db(transaction=True)
def test_queue_claim_buttons_are_on_a_phone_screen(demo, live_server, chromium):  # noqa: F811
    shots = Shots("small-screens")
    ctx = chromium.new_context(viewport={"width": 390, "height": 844}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, live_server.url, "reviewer", PASSWORD)
    page.goto(f"{live_server.url}/review/?benchmark={BENCHMARK}")
    page.wait_for_selector("#queue-results tbody tr")
    claims = page.locator("#queue-results .row-action button")
    assert claims.count() >= 9  # the demo's queue: 9 items since issue 27
    for i in range(claims.count()):
        left, right, _top, width = claims.nth(i).evaluate(BOX)
        assert width > 0 and left >= 0 and right <= 390, (i, left, right)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shots.take(page, "queue at 390 px", full_page=False)
    # the first row's Claim is beside its question, not below the fold of a long row
    q_top = page.locator("#queue-results tbody tr td.qtext").first.evaluate(BOX)[2]
    c_top = claims.first.evaluate(BOX)[2]
    assert abs(c_top - q_top) < 40
    ctx.close()


@pytest.mark.django_db(transaction=True)
def test_category_table_names_hint_and_few_responses(demo, live_server, chromium):  # noqa: F811
    from questions.models import Category

    shots = Shots("small-screens-categories")
    ctx = chromium.new_context(viewport={"width": 1366, "height": 900}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, live_server.url, "reviewer", PASSWORD)
    page.goto(f"{live_server.url}/leaderboard/{BENCHMARK}/")
    page.wait_for_selector(".heat-table")
    headers = page.locator(".heat-table thead th.heat-col").all_inner_texts()
    names = set(Category.objects.values_list("name", flat=True))
    assert headers and set(headers) <= names | {"(none)"}, headers
    assert "Fire safety (Part B)" in headers
    wrap = page.locator(".heat-table").locator("xpath=..")
    if wrap.evaluate("w => w.scrollWidth > w.clientWidth + 1"):
        hint = page.locator(".scroll-hint").first
        assert hint.is_visible() and "Scroll sideways" in hint.inner_text()
    few = page.locator(".heat-table td.heat-few")
    counts = few.locator(".heat-n").all_inner_texts()
    assert counts and all(int(c.strip(" ()")) < 5 for c in counts), counts
    assert few.first.locator("abbr.few").inner_text() == "few"
    shots.take(page, "category table", full_page=True)
    # at phone width the category table scrolls inside its box, with the hint shown
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(200)
    assert page.locator(".scroll-hint").first.is_visible()
    ctx.close()
