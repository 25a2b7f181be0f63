"""Keyboard alone, in a real browser: every page's controls take focus, visibly (issue 6, item 4).

For each main page, Tab moves through the page; every element that receives focus must be
visible and drawn with a focus outline (the yellow ring of snaglist.css), and the page's
main action must be reachable. Screenshots of the focused states go to
test-artifacts/keyboard/.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command

from tests.browser import Shots, sign_in
from tests.conftest import DEMO_BUNDLE

pytestmark = [pytest.mark.browser]

PASSWORD = "keyboard-only-password-5Rt"
BENCHMARK = "uk-construction-demo"

FOCUS_PROBE = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const style = getComputedStyle(el);
  const box = el.getBoundingClientRect();
  return {
    tag: el.tagName.toLowerCase(),
    text: (el.innerText || el.value || el.getAttribute('aria-label') || '').trim().slice(0, 60),
    outline: style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 2,
    visible: box.width > 0 && box.height > 0 && style.visibility !== 'hidden',
  };
}"""


@pytest.fixture
def demo_admin(transactional_db):
    call_command("import_bundle", str(DEMO_BUNDLE), verbosity=0)
    call_command("triage", benchmark=BENCHMARK, verbosity=0)
    user = User.objects.create_user("kbd-admin", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name="admin")[0])
    return user


def _tab_through(page, presses: int) -> list[dict]:
    seen = []
    for _ in range(presses):
        page.keyboard.press("Tab")
        info = page.evaluate(FOCUS_PROBE)
        if info:
            seen.append(info)
    return seen


@pytest.mark.django_db(transaction=True)
def test_every_main_page_is_usable_by_keyboard_with_visible_focus(
    demo_admin, live_server, chromium
):
    from review.models import ReviewItem

    base = live_server.url
    shots = Shots("keyboard")
    item = ReviewItem.objects.order_by("-priority", "pk").first()
    pages = {
        "queue": (f"/review/?benchmark={BENCHMARK}", "Next item"),
        "review item": (f"/review/items/{item.pk}/", "Claim"),
        "approvals": ("/review/approvals/", None),
        "key editions": (f"/editions/{BENCHMARK}/", "original"),
        "leaderboard": (f"/leaderboard/{BENCHMARK}/", "Show"),
        "report": (f"/report/{BENCHMARK}/", None),
        "runs": ("/runs/", "Re-score"),
    }
    ctx = chromium.new_context(viewport={"width": 1280, "height": 900}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, base, "kbd-admin", PASSWORD)
    problems = []
    for name, (path, main_action) in pages.items():
        page.goto(base + path)
        page.wait_for_load_state()
        focused = _tab_through(page, 30)
        assert focused, f"{name}: Tab never moved the focus"
        assert focused[0]["text"] == "Skip to content", f"{name}: the skip link comes first"
        for info in focused:
            if not (info["outline"] and info["visible"]):
                problems.append((name, info))
        if main_action:
            assert any(main_action in f["text"] for f in focused), (
                f"{name}: '{main_action}' not reachable by Tab in 30 presses: "
                f"{[f['text'] for f in focused]}"
            )
        shots.take(page, f"{name} focused", full_page=False)
    ctx.close()
    assert not problems, f"focus not visible: {problems[:5]}"


@pytest.mark.django_db(transaction=True)
def test_skip_link_moves_focus_to_the_main_content(demo_admin, live_server, chromium):
    ctx = chromium.new_context(viewport={"width": 1280, "height": 900}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, live_server.url, "kbd-admin", PASSWORD)
    page.goto(f"{live_server.url}/review/?benchmark={BENCHMARK}")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent.trim()") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    ctx.close()


def test_main_pages_fit_a_phone_screen_without_sideways_scrolling(
    demo_admin, live_server, chromium
):
    """At 390 px wide no page is wider than the screen: wide tables scroll inside their own
    box (.table-wrap), and nothing positioned inside one (a visually hidden header label)
    widens the page. The review queue was 723 px wide before."""
    from review.models import ReviewItem
    from tests.review_fixtures import propose_correction

    base = live_server.url
    shots = Shots("phone-width")
    item = ReviewItem.objects.order_by("-priority", "pk").first()
    # a pending correction, so the approvals page shows its sticky bulk-approval bar
    other = ReviewItem.objects.filter(status="open").exclude(pk=item.pk).order_by("pk").first()
    propose_correction(other, demo_admin)
    ctx = chromium.new_context(viewport={"width": 390, "height": 844}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, base, "kbd-admin", PASSWORD)
    widths = {}
    for path in (
        f"/review/?benchmark={BENCHMARK}",
        f"/review/items/{item.pk}/",
        "/review/approvals/",
        f"/editions/{BENCHMARK}/",
        f"/editions/{BENCHMARK}/original/key/",
        f"/leaderboard/{BENCHMARK}/",
        f"/report/{BENCHMARK}/",
        "/runs/",
    ):
        page.goto(base + path)
        page.wait_for_load_state()
        widths[path] = page.evaluate("document.documentElement.scrollWidth")
        shots.take(page, path)
    ctx.close()
    assert {p: w for p, w in widths.items() if w > 390} == {}
