"""Phone and desk widths (issue 30 item 11), in Chromium on the demo at 390x844 and 1366x900.

No page is wider than the screen, even with a proposal whose new answer holds a long
unbroken word (the diff's After column held approvals open to 424 px); public tables say
"Scroll sideways" (no script there: a sticky line from public.css) at phone width only; on
the review page the decision panel follows the question, before the cited passage; the
queue's first row is on the first screen (its filters two a row).
Screenshots: test-artifacts/phone-layout/.
"""

from __future__ import annotations

import pytest

from tests.browser import Shots, sign_in
from tests.test_e2e_main_job import BENCHMARK, PASSWORD, demo  # noqa: F401

pytestmark = [pytest.mark.browser]

LONG = " BS-EN-1991-1-1:2002+A1:2019/NationalAnnex/Table-NA.2.1-imposed-loads-category-C5"
HINT = "(el) => getComputedStyle(el, '::before').content"
TOP = "(el) => el.getBoundingClientRect().top + window.scrollY"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("width", "height"), [(390, 844), (1366, 900)])
def test_no_page_is_wider_than_the_screen(demo, live_server, chromium, width, height):  # noqa: F811
    from questions.models import Benchmark
    from questions.services import benchmark_publicity_set
    from review.models import ReviewItem
    from tests.review_fixtures import propose_correction

    benchmark_publicity_set(
        benchmark=Benchmark.objects.get(name=BENCHMARK),
        user=demo["admin"],
        public=True,
        credit_reviewers=False,
    )
    item = ReviewItem.objects.order_by("-priority", "pk").first()
    other = ReviewItem.objects.filter(status="open").exclude(pk=item.pk).order_by("pk").first()
    propose_correction(other, demo["reviewer"], suffix=LONG)
    shots = Shots("phone-layout")
    ctx = chromium.new_context(viewport={"width": width, "height": height}, locale="en-GB")
    page = ctx.new_page()
    base = live_server.url
    public = [
        f"/public/{BENCHMARK}/",
        f"/public/{BENCHMARK}/errata/",
        f"/public/{BENCHMARK}/editions/",
        f"/public/{BENCHMARK}/report/",
    ]
    widths = {}
    for path in public:
        page.goto(base + path)
        page.wait_for_load_state()
        widths[path] = page.evaluate("document.documentElement.scrollWidth")
        shots.take(page, f"{path} at {width}")
    page.goto(base + public[0])
    hint = page.locator(".band-table").locator("xpath=..").evaluate(HINT)
    if width == 390:
        assert "Scroll sideways" in hint, hint
    else:
        assert hint == "none", hint
    sign_in(page, base, "editor", PASSWORD)
    for path in (
        f"/review/?benchmark={BENCHMARK}",
        f"/review/items/{item.pk}/",
        "/review/approvals/",
        f"/editions/{BENCHMARK}/",
    ):
        page.goto(base + path)
        page.wait_for_load_state()
        widths[path] = page.evaluate("document.documentElement.scrollWidth")
        shots.take(page, f"{path} at {width}")
    assert {p: w for p, w in widths.items() if w > width} == {}
    page.goto(f"{base}/review/?benchmark={BENCHMARK}")
    first_row = page.locator("#queue-results tbody tr").first.evaluate(TOP)
    assert first_row < height, first_row  # on the first screen (it began ~1,070 px down)
    page.goto(f"{base}/review/items/{item.pk}/")
    decision = page.locator(".decision-column").evaluate(TOP)
    question = page.locator("#h-question").evaluate(TOP)
    passage = page.locator("#h-source").evaluate(TOP)
    if width == 390:
        assert question < decision < passage, (question, decision, passage)
    else:  # side by side at desk width, as before
        assert abs(decision - question) < 120, (question, decision)
    ctx.close()
