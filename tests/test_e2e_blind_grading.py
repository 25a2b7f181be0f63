"""Blind grading by keyboard in a real browser at 1366x900 (issue 31 item 2).

A reviewer finds "Blind grading" in the navigation, starts the sample with g, grades three
responses with digits and s (one with a note: n, typing, Ctrl+Enter), and the grades are
stored. The grade form must lie inside the viewport without scrolling. Screenshots go to
test-artifacts/blind-grading/.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command

from tests.browser import Shots, sign_in
from tests.conftest import DEMO_BUNDLE

pytestmark = [pytest.mark.browser]

PASSWORD = "blind-grading-password-7Qx"
BENCHMARK = "uk-construction-demo"


@pytest.mark.django_db(transaction=True)
def test_a_reviewer_grades_blind_by_keyboard(live_server, chromium):
    from questions.models import Benchmark
    from scoring.board.human import human_sample_draw
    from scoring.human_models import HumanGrade

    call_command("import_bundle", str(DEMO_BUNDLE), verbosity=0)
    user = User.objects.create_user("blind-ann", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name="reviewer")[0])
    sample = human_sample_draw(Benchmark.objects.get(name=BENCHMARK), actor=None, size=10, seed=4)
    shots = Shots("blind-grading")
    ctx = chromium.new_context(viewport={"width": 1366, "height": 900}, locale="en-GB")
    page = ctx.new_page()
    base = live_server.url
    sign_in(page, base, "blind-ann", PASSWORD)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Blind grading").click()
    page.wait_for_url(f"{base}/review/blind/")
    shots.take(page, "samples")
    page.keyboard.press("g")
    page.wait_for_url(f"{base}/review/blind/{sample.pk}/1/")
    form = page.locator("#human-grade-form").bounding_box()
    assert form["y"] >= 0 and form["y"] + form["height"] <= 900, form
    assert page.evaluate("window.scrollY") == 0
    shots.take(page, "first response", full_page=False)
    page.keyboard.press("2")
    assert page.locator('input[name="grade"][value="2"]').is_checked()
    page.keyboard.press("s")
    page.wait_for_url(f"{base}/review/blind/{sample.pk}/2/")
    page.keyboard.press("0")
    page.keyboard.press("n")
    page.keyboard.type("Cites the repealed rule.")
    shots.take(page, "second response with a note", full_page=False)
    page.keyboard.press("Control+Enter")
    page.wait_for_url(f"{base}/review/blind/{sample.pk}/3/")
    page.keyboard.press("1")
    page.keyboard.press("s")
    page.wait_for_url(f"{base}/review/blind/{sample.pk}/4/")
    page.keyboard.press("?")
    assert page.locator("#shortcut-help").is_visible()
    shots.take(page, "shortcuts", full_page=False)
    grades = sorted(
        HumanGrade.objects.filter(reviewer=user).values_list("item__position", "grade", "note")
    )
    assert grades == [(1, 2, ""), (2, 0, "Cites the repealed rule."), (3, 1, "")]
    ctx.close()
