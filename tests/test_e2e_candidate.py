"""The candidate panel in a real browser on the demo (issue 31 item 1, "Done when"):

an admin moves the strict reference judge to prompt judge-v2, finds "Candidate panel" in
the navigation, defines the candidate ref-lenient@judge-v1, ref-strict@judge-v2, re-scores
for it, and sees which bands would move and what it costs, while the signed-in board is
unchanged; adopting it changes the board and is in the audit log. Screenshots at 1366x900
go to test-artifacts/candidate/.
"""

from __future__ import annotations

import json

import pytest

from tests.browser import Shots, sign_in
from tests.test_e2e_main_job import BENCHMARK, PASSWORD, demo  # noqa: F401

pytestmark = [pytest.mark.browser]


def _board(page, base: str) -> dict:
    """The signed-in leaderboard's JSON download, read in the page's session."""
    text = page.evaluate(
        "async (u) => (await fetch(u)).text()",
        f"{base}/leaderboard/{BENCHMARK}/leaderboard.json",
    )
    doc = json.loads(text)
    return {m["model_id"]: (m["score"], m["band"]) for m in doc["models"]} | {
        "_panel": doc["panel"]
    }


@pytest.mark.django_db(transaction=True)
def test_admin_previews_a_new_prompt_as_a_candidate_and_adopts_it(demo, live_server, chromium):  # noqa: F811
    from core.models import AuditLogEntry
    from scoring.models import Judge

    Judge.objects.filter(judge_id="ref-strict").update(prompt_version="judge-v2")
    base = live_server.url
    shots = Shots("candidate")
    ctx = chromium.new_context(viewport={"width": 1366, "height": 900}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, base, "admin", PASSWORD)
    before = _board(page, base)
    assert before["_panel"][1] == {"judge": "ref-strict", "prompt_version": "judge-v1"}

    # the Runs page's warning that the judges and the panel differ points to the candidate
    page.goto(f"{base}/runs/")
    link = page.get_by_role("link", name="try those versions as a candidate panel")
    assert link.get_attribute("href") == f"/candidate/{BENCHMARK}/"
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Candidate panel").click()
    page.wait_for_selector("#define-heading")
    page.get_by_label("Judges at prompt versions").fill("ref-lenient,ref-strict@judge-v2")
    page.get_by_role("button", name="Set the candidate panel").click()
    page.wait_for_selector("#summary")
    assert "ref-strict@judge-v2" in page.inner_text("#candidate-panel")
    assert page.inner_text("#candidate-state").startswith("Incomplete:")
    assert page.inner_text("#partial-note").startswith("Not final.")
    assert "none yet" in page.inner_text("#candidate-cost")
    shots.take(page, "candidate defined, not graded yet")

    page.get_by_role("button", name="Re-score original for the candidate").click()
    page.wait_for_url(f"{base}/runs/*/")
    page.goto(f"{base}/candidate/{BENCHMARK}/?edition=original")
    page.wait_for_selector("#side-table")
    assert page.inner_text("#candidate-state").startswith("Complete:")
    assert page.locator("#partial-note").count() == 0
    moves = page.inner_text("#moves-sentence")
    assert "would move" in moves or "No model would move" in moves
    assert "paid call" in page.inner_text("#candidate-cost")
    shots.take(page, "candidate beside the judge panel", full_page=False)
    shots.take(page, "candidate beside the judge panel full")
    assert _board(page, base) == before  # nothing changed for signed-in readers

    with page.expect_navigation():
        page.get_by_role("button", name="Adopt as the judge panel").click()
    assert "the judge panel is now ref-lenient@judge-v1, ref-strict@judge-v2" in page.inner_text(
        ".messages"
    )
    after = _board(page, base)
    assert after["_panel"][1] == {"judge": "ref-strict", "prompt_version": "judge-v2"}
    assert after != before
    actions = set(AuditLogEntry.objects.values_list("action", flat=True))
    assert {"candidate_panel.set", "candidate_panel.adopt", "judge_panel.set"} <= actions
    shots.take(page, "adopted")
    ctx.close()
