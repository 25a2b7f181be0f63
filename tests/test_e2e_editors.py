"""Issue 18 items 2 and 4 in a real browser on the demo bundle.

- The superseded citation (Q005 cites the 2006 edition of AD B Vol 1, superseded by the
  2019 edition): at 1366x900 the cited passage and the edition in force's passage at the
  same locator sit side by side, both inside the viewport without scrolling.
- An editor ticks two proposals on the approvals page and approves them in one action
  with the keyboard only: j (first proposal's checkbox), Space, j (the next one the
  editor may decide: their own is skipped), Space, Ctrl+Enter = 5 key presses, 1 page
  load (the result page). Screenshots go to test-artifacts/editors/.
"""

from __future__ import annotations

import re

import pytest

from tests.browser import Shots, sign_in
from tests.test_e2e_decide import Counter, _assert_in_view
from tests.test_e2e_main_job import BENCHMARK, PASSWORD, demo  # noqa: F401

pytestmark = [pytest.mark.browser]

SUPERSEDED = "Q005"


@pytest.mark.django_db(transaction=True)
def test_superseded_citation_shows_the_edition_in_force_beside_it(demo, live_server, chromium):  # noqa: F811
    from review import services
    from review.models import ReviewItem

    item = ReviewItem.objects.get(question__question_id=SUPERSEDED, benchmark__name=BENCHMARK)
    services.review_item_claim(item=item, user=demo["reviewer"])
    shots = Shots("editors")
    ctx = chromium.new_context(viewport={"width": 1366, "height": 900}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, live_server.url, "reviewer", PASSWORD)
    page.goto(f"{live_server.url}/review/items/{item.pk}/")
    page.wait_for_selector("#successor-passage")
    shots.take(page, "superseded citation beside the edition in force", full_page=False)
    cited = ".passage-compare .cited .passage"
    _assert_in_view(page, cited)
    _assert_in_view(page, "#successor-passage")
    _assert_in_view(page, "#decide-panel")
    left = page.locator(cited).bounding_box()
    right = page.locator("#successor-passage").bounding_box()
    assert left["x"] + left["width"] <= right["x"], "side by side, cited edition first"
    assert "Smoke and heat alarms should have a standby power supply" in (
        page.locator("#successor-passage").inner_text()
    )
    heading = page.locator(".passage-compare .cited h3").inner_text()
    assert heading.endswith("(summary of the superseded 2006 edition, not verbatim)"), heading
    # At 390 px the two stack: the successor below the cited passage.
    page.set_viewport_size({"width": 390, "height": 900})
    left = page.locator(cited).bounding_box()
    right = page.locator("#successor-passage").bounding_box()
    assert right["y"] >= left["y"] + left["height"], "stacked on a small screen"
    shots.take(page, "superseded citation at 390 px")
    ctx.close()


def _propose(item, user, services):
    """Claim `item` for `user` and propose a correction of its key's answer."""
    from review.selectors import entry_for_question, working_edition

    item = services.review_item_claim(item=item, user=user)
    base = entry_for_question(item.question, working_edition(item.benchmark))
    return services.proposal_create(
        item=item,
        user=user,
        version=item.version,
        action="correct",
        answer=f"{base.answer} (corrected)",
        citation_doc_id=base.citation_doc_id,
        citation_locator=base.citation_locator,
        citation_quote=base.citation_quote,
        reason="factually_wrong",
    )


@pytest.mark.django_db(transaction=True)
def test_editor_approves_two_proposals_in_one_action_by_keyboard(demo, live_server, chromium):  # noqa: F811
    from review import services
    from review.models import Proposal, ReviewItem
    from review.selectors import entry_for_question, passage_for_entry, working_edition

    def cites_a_passage(item) -> bool:
        entry = entry_for_question(item.question, working_edition(item.benchmark))
        passage = passage_for_entry(entry)
        return passage is not None and passage.section is not None

    # The three highest open items whose citation the stored text holds (each shows its
    # passage on Approvals); the queue's order moves with the detectors.
    items = [
        item
        for item in ReviewItem.objects.filter(benchmark__name=BENCHMARK, status="open")
        .exclude(question__question_id=SUPERSEDED)
        .order_by("-priority", "id")
        if cites_a_passage(item)
    ][:3]
    first = _propose(items[0], demo["reviewer"], services)
    own = _propose(items[1], demo["editor"], services)
    second = _propose(items[2], demo["reviewer"], services)
    shots = Shots("editors-bulk")
    ctx = chromium.new_context(viewport={"width": 1366, "height": 900}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, live_server.url, "editor", PASSWORD)
    page.goto(f"{live_server.url}/review/approvals/")
    page.wait_for_selector("#bulk-approve")
    assert page.locator(".proposal-passages .passage").count() >= 3, "a passage per proposal"
    count = Counter(page)
    count.press("j")
    count.press("Space")
    count.press("j")
    count.press("Space")
    assert page.locator("[data-selected-count]").inner_text() == "(2)"
    assert page.locator("#select-all").is_checked(), "both selectable proposals are ticked"
    shots.take(page, "two proposals ticked", full_page=False)
    with page.expect_navigation():
        count.press("Control+Enter")
    page.wait_for_selector("text=Approved 2")
    count.stop()
    shots.take(page, "approved two in one action", full_page=False)
    message = page.locator(".messages, [role=status]").first.inner_text()
    q1, q2 = (p.item.question.question_id for p in (first, second))
    assert f"Approved 2 ({q1}, {q2})." in message, message
    statuses = {p.pk: Proposal.objects.get(pk=p.pk).status for p in (first, own, second)}
    assert statuses == {first.pk: "approved", own.pk: "pending", second.pk: "approved"}
    print("\nbulk approve counts (keys, loads):", (count.keys, count.loads))
    assert (count.keys, count.loads) == (5, 1)
    assert re.search(r"/review/approvals/$", page.url)
    ctx.close()
