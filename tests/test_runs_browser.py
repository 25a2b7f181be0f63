"""The Runs page in Chromium: choosing batch mode disables the budget caps and says why
(the service refuses a cap on a batch run; the admin learned it only after submitting)."""

from __future__ import annotations

import pytest

from tests.browser import Shots, sign_in
from tests.factories import UserFactory
from tests.test_leaderboard import build_tiny

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct-horse-battery-1"


def test_batch_mode_disables_the_caps_and_says_why(live_server, chromium):
    build_tiny()
    admin = UserFactory(username="root", is_superuser=True, is_staff=True)
    admin.set_password(PASSWORD)
    admin.save()
    page = chromium.new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, live_server.url, "root", PASSWORD)
    page.goto(f"{live_server.url}/runs/")
    form = page.locator("form:has(select[name=mode])").first
    cost, tokens = (
        form.locator("input[name=budget_cost]"),
        form.locator("input[name=budget_tokens]"),
    )
    assert cost.is_enabled() and tokens.is_enabled()
    form.locator("select[name=mode]").select_option("batch")
    assert cost.is_disabled() and tokens.is_disabled()
    assert "Caps apply to live runs only" in form.inner_text()
    Shots("runs").take(page, "batch chosen", full_page=False)
    form.locator("select[name=mode]").select_option("live")
    assert cost.is_enabled() and "Caps apply" not in form.inner_text()
    page.close()
