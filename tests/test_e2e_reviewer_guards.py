"""The reviewer's guards on the decision panel (issue 30 items 2 and 3), in a real browser on
the demo, at 1366x900 and 390x844.

Item 3: after choosing Correction the panel grows past the screen; "Record decision" stays
in view (sticky at the bottom of the panel's scroll box, or of the screen on a phone)
without scrolling the page. Screenshots: test-artifacts/reviewer-guards/.
"""

from __future__ import annotations

import re

import pytest

from tests.browser import Shots, sign_in
from tests.test_e2e_main_job import BENCHMARK, PASSWORD, demo  # noqa: F401

pytestmark = [pytest.mark.browser]

BOX = """(el) => { const b = el.getBoundingClientRect();
  return {top: b.top, bottom: b.bottom, left: b.left, right: b.right,
          vh: window.innerHeight, vw: window.innerWidth}; }"""
# the element the browser would hit at the button's centre is the button (or inside it):
# in view AND not covered by anything else
HIT = """(el) => { const b = el.getBoundingClientRect();
  const hit = document.elementFromPoint(b.left + b.width / 2, b.top + b.height / 2);
  return !!hit && (hit === el || el.contains(hit)); }"""


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width,height", [(1366, 900), (390, 844)])
def test_record_decision_stays_in_view_after_choosing_correction(
    demo,  # noqa: F811
    live_server,
    chromium,
    width,
    height,
):
    shots = Shots(f"reviewer-guards-{width}")
    ctx = chromium.new_context(viewport={"width": width, "height": height}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, live_server.url, "reviewer", PASSWORD)
    page.goto(f"{live_server.url}/review/?benchmark={BENCHMARK}")
    page.locator("body").press("c")
    page.wait_for_url(re.compile(r"/review/items/\d+/"))
    page.wait_for_selector("text=You hold this item")
    panel = page.locator("#decide-panel")
    if width < 900:  # one column: the panel comes after the evidence
        panel.scroll_into_view_if_needed()
    page.locator("body").press("e")  # Correction: reason, answer, citation fields appear
    panel.get_by_label("Corrected answer").wait_for()
    assert panel.get_by_label("Corrected answer").is_visible()
    submit = panel.get_by_role("button", name=re.compile("Record decision"))
    # the panel is taller than the screen now (what made the button fall below the fold)
    assert panel.evaluate("(el) => el.scrollHeight") > height * 0.9 or width < 900
    box = submit.evaluate(BOX)
    assert 0 <= box["top"] and box["bottom"] <= box["vh"], box
    assert 0 <= box["left"] and box["right"] <= box["vw"], box
    assert submit.evaluate(HIT), "the button is covered"
    shots.take(page, f"correction chosen at {width}", full_page=False)
    # typing into the first field of the correction keeps it in view too
    panel.get_by_label("Corrected answer").fill("No floorspace limit since 5 March 2024.")
    box = submit.evaluate(BOX)
    assert 0 <= box["top"] and box["bottom"] <= box["vh"], box
    ctx.close()
