"""The public results site in Chromium (issue 22, done-when and item 4).

An anonymous visitor, with JavaScript switched off, opens the public leaderboard's
comparison view, follows its link to the errata register, opens one erratum and reports
an error on that question; a reviewer then signs in and finds the question at the top of
the review queue with the report as its evidence. Screenshots in
test-artifacts/public-site/. Every public page passes axe-core's WCAG 2 A/AA rules
(tests/vendor/axe/axe.min.js, run in the page) and prints without navigation or controls.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User

from tests.browser import Shots, sign_in
from tests.test_leaderboard import build_tiny

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = (Path(__file__).parent / "vendor" / "axe" / "axe.min.js").read_text(encoding="utf-8")
PASSWORD = "x-very-long-pass-1"
REPORT = "Paragraph 2.3 was amended in 2024: the figure is now 1100 mm, not 900 mm."


def _user(name: str, group: str) -> User:
    user = User.objects.create_user(name, password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


def axe_violations(page) -> list[dict]:
    """Run axe-core (WCAG 2.0/2.1 A and AA rules) on the loaded page; return its violations."""
    page.evaluate(AXE)
    result = page.evaluate(
        "() => axe.run(document, {runOnly: {type: 'tag', values: "
        "['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}})"
    )
    return [
        {"id": v["id"], "help": v["help"], "nodes": [n["target"] for n in v["nodes"]][:3]}
        for v in result["violations"]
    ]


def test_a_reader_reports_an_error_and_a_reviewer_sees_it_first(live_server, chromium):
    from questions.models import Benchmark
    from questions.services import benchmark_publicity_set

    build_tiny()
    benchmark_publicity_set(
        benchmark=Benchmark.objects.get(name="tiny"),
        user=_user("site-admin", "admin"),
        public=True,
        credit_reviewers=False,
    )
    reviewer = _user("rev-one", "reviewer")
    shots = Shots("public-site")
    base = live_server.url

    # The reader: no account, no JavaScript.
    reader = chromium.new_context(java_script_enabled=False)
    page = reader.new_page()
    page.goto(f"{base}/public/tiny/?edition=corrected-1&compare=original")
    assert page.locator("h1").inner_text().startswith("Leaderboard")
    assert page.locator("#compare-heading").is_visible()
    shots.take(page, "leaderboard comparison")
    # The board's GET form works without script: switch the banding with the Show button.
    page.select_option("#banding-select", "ci_overlap")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**banding=ci_overlap**")
    page.go_back()
    page.locator("#compare-errata a", has_text="errata of corrected-1").click()
    page.wait_for_url("**/public/tiny/errata/?edition=corrected-1")
    assert page.get_by_role("link", name="tiny/corrected-1/Q2").is_visible()
    shots.take(page, "errata register")
    page.get_by_role("link", name="tiny/corrected-1/Q2").click()
    page.wait_for_url("**/public/tiny/errata/corrected-1/Q2/")
    assert "Better" in page.content() and "Factually wrong" in page.inner_text("main")
    shots.take(page, "one erratum")
    page.get_by_role("link", name="Report an error in this question's key entry").click()
    page.wait_for_url("**/public/tiny/questions/Q2/report/")
    page.get_by_label("What is wrong with the key entry").fill(REPORT)
    page.get_by_label("The source that says so").fill("Approved Document M, 2015 edition, 2.3")
    page.get_by_label("Your email address (optional)").fill("reader@example.org")
    shots.take(page, "report form filled")
    page.get_by_role("button", name="Send the report").click()
    page.wait_for_url("**/public/tiny/questions/Q2/report/?sent=1")
    assert "Thank you" in page.inner_text("main")
    shots.take(page, "report sent")
    reader.close()

    # The reviewer: the reported question heads the queue, the report is its evidence.
    staff = chromium.new_context()
    page = staff.new_page()
    sign_in(page, base, reviewer.username, PASSWORD)
    page.goto(f"{base}/review/")
    first_row = page.locator("table tbody tr").first
    assert "Q2" in first_row.inner_text() and "reported by a reader" in first_row.inner_text()
    shots.take(page, "queue with the report on top")
    first_row.get_by_role("link", name="Q2").first.click()
    page.wait_for_url("**/review/items/**")
    evidence = page.locator("dl.evidence").inner_text()
    assert "Reported by a reader" in evidence and REPORT in evidence
    assert "reader@example.org" not in page.content(), "a reviewer does not see the address"
    shots.take(page, "item with the report as evidence")
    staff.close()


def test_public_pages_pass_axe_and_print_cleanly(live_server, chromium, settings):
    from questions.models import Benchmark
    from questions.services import benchmark_publicity_set

    build_tiny()
    benchmark_publicity_set(
        benchmark=Benchmark.objects.get(name="tiny"),
        user=_user("site-admin", "admin"),
        public=True,
        credit_reviewers=False,
    )
    paths = [
        "/public/",
        "/public/tiny/",
        "/public/tiny/?edition=corrected-1&compare=original",
        "/public/tiny/report/",
        "/public/tiny/editions/",
        "/public/tiny/errata/",
        "/public/tiny/errata/corrected-1/Q2/",
        "/public/tiny/questions/Q2/report/",
    ]
    context = chromium.new_context()
    page = context.new_page()
    found = {}
    for path in paths:
        page.goto(f"{live_server.url}{path}")
        violations = axe_violations(page)
        if violations:
            found[path] = violations
    assert not found, json.dumps(found, indent=1)
    # Control: axe does report a violation it should (an image without alternative text).
    page.goto(f"{live_server.url}/public/tiny/")
    page.evaluate("() => document.querySelector('main').append(document.createElement('img'))")
    assert any(v["id"] == "image-alt" for v in axe_violations(page))

    # Print: no navigation, controls or download buttons; the table and the licence remain.
    page.goto(f"{live_server.url}/public/tiny/?edition=corrected-1&compare=original")
    page.emulate_media(media="print")
    assert not page.locator(".site-header nav").is_visible()
    assert not page.locator(".board-controls").is_visible()
    assert not page.locator("ul.actions").first.is_visible()
    assert page.locator("table.band-table").is_visible()
    assert page.get_by_text("Open Government Licence").is_visible()
    Shots("public-site-print").take(page, "leaderboard printed")
    context.close()
