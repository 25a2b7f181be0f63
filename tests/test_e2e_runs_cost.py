"""The runs pages' cost figures in Chromium at 1366x900 and 390x844 (issue 30 items 13, 14):
a cap typed below the estimate is warned about on the Runs page; a run stopped at its cap
says what finishing costs and fills that cap in; the runs list marks a partial cost.
Screenshots: test-artifacts/runs-cost-1366/ and runs-cost-390/.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User

import tests.judge_server as loopback
from scoring.models import Judge
from scoring.runs import services
from scoring.runs.budget import last_finish_offer
from scoring.runs.estimate import estimate_run
from tests.browser import Shots, sign_in
from tests.test_judge_server import KEY_ENV
from tests.worker_fixtures import build_benchmark

pytestmark = [pytest.mark.browser]
judge_server = loopback.judge_server
GRADE_1 = '{"grade": 1, "rationale": "partly right", "flag": false, "flag_reason": ""}'
PASSWORD = "runs-cost-pass-1"
PRICES = {
    "price_currency": "USD",
    "price_input": Decimal("2.50"),
    "price_cached_input": Decimal("1.25"),
    "price_output": Decimal("10.00"),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("width", "height"), [(1366, 900), (390, 844)])
def test_the_cap_warning_and_the_finish_offer_at_both_widths(
    live_server, chromium, judge_server, monkeypatch, settings, width, height
):
    settings.SNAGLIST_RESCORE_CHUNK = 500
    monkeypatch.setenv(KEY_ENV, "sk-runs-cost-not-a-secret")
    data = build_benchmark(
        n_questions=4, n_models=3, n_judges=1, grade_original=False, with_auditors=False
    )
    (judge,) = data.judges
    Judge.objects.filter(pk=judge.pk).update(
        backend="openai",
        model="loopback-openai",
        base_url=judge_server.url + "/v1",
        api_key_env=KEY_ENV,
        backend_settings={"max_retries": 0, "timeout": 5, "max_tokens": 60},
        **PRICES,
    )
    judge.refresh_from_db()
    judge_server.default = loopback.ok(GRADE_1)
    judge_server.script(loopback.no_usage(GRADE_1))  # one call of unknown usage: partial
    whole = estimate_run(edition=data.original, judges=[judge])
    cap = (whole.cost_live / 2).quantize(Decimal("0.000001"))
    run = services.scoring_run_create(edition=data.original, judges=[judge], budget_cost=cap)
    run.refresh_from_db()
    assert run.status == "stopped"
    offer = last_finish_offer(run)
    User.objects.create_superuser("runs-cost-admin", password=PASSWORD)

    shots = Shots(f"runs-cost-{width}")
    ctx = chromium.new_context(viewport={"width": width, "height": height}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, live_server.url, "runs-cost-admin", PASSWORD)
    page.goto(f"{live_server.url}/runs/")
    estimate = page.locator(f"#estimate-{data.original.pk}-grade")
    # the estimate loads as its place is shown (hx-trigger "revealed"): at phone width the
    # actions column is off the first screen
    page.locator("form[data-estimate] .cap-warning").first.evaluate(
        "(el) => el.closest('td').scrollIntoView()"
    )
    estimate.wait_for()
    warning = page.locator("form[data-estimate] .cap-warning").first
    assert warning.is_hidden()
    cost_cap = page.get_by_label(f"Cost cap for re-scoring {data.original.name}", exact=False)
    cost_cap.first.fill("0.0001")
    assert warning.is_visible()
    text = warning.inner_text()
    assert text.startswith("Warning: the cost cap 0.0001 USD is below the estimated ")
    assert "the run would stop before it is finished" in text
    tokens = page.get_by_label(f"Token cap for re-scoring {data.original.name}").first
    tokens.fill("10")
    assert "the token cap 10 is below the estimated " in warning.inner_text()
    row = page.locator("#runs-table tbody tr").first
    assert "partial" in row.inner_text() and "1 call with usage unknown" in row.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    warning.scroll_into_view_if_needed()
    shots.take(page, f"runs page cap below the estimate at {width}", full_page=False)
    cost_cap.first.fill(f"{whole.cost_live * 2:.2f}")
    tokens.fill("")
    assert warning.is_hidden()

    page.goto(f"{live_server.url}/runs/{run.pk}/")
    said = page.locator(f"#run-progress-{run.pk}").inner_text()
    assert f"finishing the run ({offer['pairs']} pairs left) would cost about" in said
    assert f"resume with a cost cap of {offer['cap_cost']} USD" in said
    assert page.locator('input[name="budget_cost"]').input_value() == offer["cap_cost"]
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    shots.take(page, f"stopped run offers the cap that finishes it at {width}")
    page.get_by_role("button", name="Resume with this cap").click()
    page.wait_for_url(f"**/runs/{run.pk}/")
    page.locator(f"#run-progress-{run.pk}").get_by_text("complete").first.wait_for()
    run.refresh_from_db()
    assert (run.status, run.graded) == ("complete", 12)
    shots.take(page, f"resumed run complete at {width}")
    ctx.close()
