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


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width,height", [(1366, 900), (390, 844)])
def test_a_reason_the_check_contradicts_is_flagged_before_saving(
    demo,  # noqa: F811
    live_server,
    chromium,
    width,
    height,
):
    """Issue 30 item 1: `1` on "Amended or repealed since?" is No; with the reason "Amended
    or repealed since" the panel says so above Record decision before anything is saved."""
    from review.models import CitationCheck

    shots = Shots(f"reviewer-contradiction-{width}")
    ctx = chromium.new_context(viewport={"width": width, "height": height}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, live_server.url, "reviewer", PASSWORD)
    page.goto(f"{live_server.url}/review/?benchmark={BENCHMARK}")
    page.locator("body").press("c")
    page.wait_for_url(re.compile(r"/review/items/\d+/"))
    panel = page.locator("#decide-panel")
    warning = page.locator("#decide-contradiction")
    for _ in range(4):
        page.locator("body").press("1")
    amended = panel.get_by_role("group", name="Amended or repealed since?")
    assert amended.locator("input[value=no]").is_checked(), "1 on the last question is No"
    page.locator("body").press("e")
    panel.get_by_label("Reason").select_option("amended_or_repealed")
    warning.wait_for(state="visible")
    assert warning.inner_text() == (
        "Check before saving: the reason is \u201cAmended or repealed since\u201d but the "
        "citation check says not amended or repealed since. Change the reason or the answer, "
        "or say why in the evidence note."
    )
    box = warning.evaluate(BOX)
    assert 0 <= box["left"] and box["right"] <= box["vw"], box
    shots.take(page, f"contradiction flagged at {width}", full_page=False)
    amended.locator("input[value=yes]").check()
    warning.wait_for(state="hidden")
    assert not CitationCheck.objects.exists(), "nothing saved meanwhile"
    ctx.close()
