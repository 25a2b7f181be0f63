"""The whole main job in a real browser, on the demo bundle, with a real Celery worker.

reviewer: queue -> claim the top item with the keyboard -> passage and grades -> citation
check -> proposes a correction; editor: approves it (and cannot approve their own
proposal) -> publishes corrected-1; admin: re-scores -> progress reaches 100% -> the
leaderboard's original-vs-corrected view and the report show the correction.

Runs against pytest-django's live_server on PostgreSQL; publishing and re-scoring go
through Redis to a worker process (tests/worker_fixtures.py). Screenshots of every step
land in test-artifacts/e2e-main-job/; the pictures the docs show (DOC_SHOTS) are written to
docs/screenshots/ on every run, from the running app, so they cannot go stale (issue 30
item 1; test_docs_screenshots.py checks the docs name no others).
"""

from __future__ import annotations

import re
import shutil

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command

from tests.browser import ARTIFACTS, Shots, sign_in
from tests.conftest import DEMO_BUNDLE, PROJECT_ROOT
from tests.worker_fixtures import celery_worker_factory  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.worker]

PASSWORD = "e2e-demo-password-7Kq"
BENCHMARK = "uk-construction-demo"
CLASS_MA = "Q046"  # the out-of-date Class MA key: both judges flag it, most models "disagree"
NEW_ANSWER = (
    "There is no longer a floorspace limit: the 1,500 m² cap on Class MA was removed by "
    "amendment from 5 March 2024."
)


def _users() -> dict[str, User]:
    users = {}
    for name, group in (
        ("reviewer", "reviewer"),
        ("editor", "editor"),
        ("editor2", "editor"),
        ("admin", "admin"),
    ):
        user = User.objects.create_user(name, password=PASSWORD)
        # get_or_create: an earlier transactional test may have flushed the migration's groups.
        user.groups.add(Group.objects.get_or_create(name=group)[0])
        users[name] = user
    return users


@pytest.fixture
def demo(transactional_db):
    call_command("import_bundle", str(DEMO_BUNDLE), verbosity=0)
    call_command("triage", benchmark=BENCHMARK, verbosity=0)
    return _users()


@pytest.fixture
def worker(celery_worker_factory):  # noqa: F811
    """A real worker; the web (live_server thread) enqueues to its queue."""
    from config.celery import app

    w = celery_worker_factory()
    old_queue = app.conf.task_default_queue
    app.conf.task_default_queue = w.queue
    yield w
    app.conf.task_default_queue = old_queue


#: Every picture docs/*.md and README.md show, by the step of this test that makes it.
DOC_SHOTS = {
    "reviewer queue": "reviewer-queue.png",
    "review page": "review-page.png",
    "decision panel errors in place": "decision-panel-errors-in-place.png",
    "correction proposed": "correction-proposed.png",
    "approvals": "approvals.png",
    "corrected-1 published": "corrected-1-published.png",
    "re-scoring complete": "re-scoring-complete.png",
    "leaderboard original vs corrected": "leaderboard.png",
    "methodology report": "methodology-report.png",
}
DOCS_SHOTS_DIR = PROJECT_ROOT / "docs" / "screenshots"


def _shot(shots: Shots, page, label: str) -> None:
    """Take the step's screenshot; a step the docs show is also written to docs/screenshots/."""
    path = shots.take(page, label)
    if label in DOC_SHOTS:
        shutil.copy(path, DOCS_SHOTS_DIR / DOC_SHOTS[label])


def _scores(page) -> dict[str, str]:
    """Return {model_id: score text} from the leaderboard's band table."""
    rows = page.locator("table.band-table tbody tr")
    out = {}
    for i in range(rows.count()):
        cells = rows.nth(i).locator("td, th")
        texts = [cells.nth(j).inner_text().strip() for j in range(cells.count())]
        for t in texts:
            if t.startswith("model-"):
                out[t] = texts
    return out


def test_main_job_end_to_end(demo, worker, live_server, chromium):
    from questions.models import KeyEdition, KeyEntry
    from review.models import CitationCheck, Proposal

    base = live_server.url
    shots = Shots("e2e-main-job")
    original_entries = list(
        KeyEntry.objects.filter(edition__name="original")
        .order_by("pk")
        .values_list("pk", "answer", "citation_locator", "citation_quote")
    )

    # ---------------------------------------------------------------- reviewer
    ctx = chromium.new_context(viewport={"width": 1366, "height": 900}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, base, "reviewer", PASSWORD)
    page.goto(f"{base}/review/?benchmark={BENCHMARK}")
    page.wait_for_selector("text=Review queue")
    first_row = page.locator("#queue-results tbody tr").first
    assert CLASS_MA in first_row.inner_text(), "both judges flagged + consensus should sort first"
    _shot(shots, page, "reviewer queue")

    page.locator("body").press("c")  # claim the top item with the keyboard
    page.wait_for_url(re.compile(r"/review/items/\d+/"))
    page.wait_for_selector("text=You hold this item")
    body = page.locator("main").inner_text()
    assert "Cited passage" in body and "Class MA" in body
    # The Class MA key cites the passage without a quote: the passage itself is shown.
    assert "1,500 square metres" in page.locator(".passage").inner_text()
    grades_table = page.locator("table.grades-table tbody tr")
    assert grades_table.count() == 6, "every model's response with both judges' grades"
    assert "5 of 6 models graded 0 by both judges" in body
    _shot(shots, page, "review page")

    # The decision panel (issue 18): a refused submit swaps in only its fragment, focus on
    # the first error.
    page.get_by_role("button", name=re.compile("Record decision")).click()
    page.wait_for_selector("#decide-panel .field-error")
    assert page.locator("header.site-header").count() == 1, "no page inside the fragment"
    assert page.locator("#decide-panel").count() == 1
    assert re.search(r"/review/items/\d+/$", page.url)
    assert page.evaluate("document.activeElement.name") == "locator_exists"
    _shot(shots, page, "decision panel errors in place")

    panel = page.locator("#decide-panel")
    panel.get_by_role("group", name="Does the locator exist in that edition?").get_by_label(
        "Yes"
    ).check()
    panel.get_by_role("group", name="Does the passage support the key answer?").get_by_label(
        "Yes"
    ).check()
    panel.get_by_role("group", name="Is that edition in force?").get_by_label("Yes").check()
    panel.get_by_role("group", name="Amended or repealed since?").get_by_label("Yes").check()
    page.locator("body").press("e")  # propose a correction
    panel.get_by_label("Reason").select_option("amended_or_repealed")
    panel.get_by_label("Corrected answer").fill(NEW_ANSWER)
    panel.get_by_label("Evidence note").fill(
        "SI 2024/141 removed the 1,500 m² limit from Class MA from 5 March 2024."
    )
    panel.get_by_label("Then open the next item").uncheck()  # stay on this item
    panel.get_by_role("button", name=re.compile("Record decision")).click()
    page.wait_for_selector("text=sent for an editor's approval")
    _shot(shots, page, "correction proposed")
    assert CitationCheck.objects.get(item__question__question_id=CLASS_MA).amended == "yes"
    proposal = Proposal.objects.get(item__question__question_id=CLASS_MA, status="pending")
    assert proposal.author.username == "reviewer" and proposal.answer == NEW_ANSWER
    ctx.close()

    # ---------------------------------------------------------------- editor
    ctx = chromium.new_context(viewport={"width": 1366, "height": 900}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, base, "editor", PASSWORD)

    # The editor proposes a removal elsewhere: their own proposal cannot be approved by them.
    page.goto(f"{base}/review/?benchmark={BENCHMARK}")
    page.get_by_role("button", name=re.compile("Next item")).click()
    page.wait_for_url(re.compile(r"/review/items/\d+/"))
    shots.take(page, "editor claims the next item")
    for _ in range(4):
        page.locator("body").press("1")  # each citation question: its first answer
    page.locator("body").press("r")
    panel = page.locator("#decide-panel")
    panel.get_by_label("Reason").select_option("ungradeable")
    panel.get_by_label("Evidence note").fill("Editor's own proposal, for the four-eyes check.")
    panel.get_by_label("Then open the next item").uncheck()
    panel.get_by_role("button", name=re.compile("Record decision")).click()
    page.wait_for_selector("text=sent for an editor's approval")

    page.goto(f"{base}/review/approvals/")
    own = page.locator("article", has_text="Editor's own proposal")
    theirs = page.locator("article", has_text=CLASS_MA)
    assert own.get_by_role("button", name="Approve").count() == 0
    assert "your own proposal" in own.inner_text().lower()
    assert NEW_ANSWER in theirs.inner_text(), "the diff shows the new answer"
    _shot(shots, page, "approvals")
    theirs.get_by_label("Comment (optional)").fill("Checked against SI 2024/141.")
    theirs.get_by_role("button", name="Approve").click()
    page.wait_for_selector("text=approved")
    proposal.refresh_from_db()
    assert proposal.status == "approved" and proposal.decided_by.username == "editor"

    page.goto(f"{base}/editions/{BENCHMARK}/")
    shots.take(page, "editions before publishing")
    page.get_by_role("link", name=re.compile("corrected-1")).first.click()
    asked: list[str] = []

    def confirm(dialog):
        asked.append(dialog.message)
        dialog.accept()

    page.once("dialog", confirm)
    page.get_by_role("button", name=re.compile("Publish")).click()
    page.wait_for_selector("text=published")
    # Publishing is final: the browser asked first (static/js/snaglist.js, data-confirm).
    assert asked == [
        "Publish corrected-1? Its 1 change will count for scoring, and the edition can never "
        "be changed again. 1 proposal is still awaiting approval and will not be in it."
    ]
    _shot(shots, page, "corrected-1 published")
    corrected = KeyEdition.objects.get(name="corrected-1")
    assert corrected.status == "published" and corrected.entries.count() == 1
    ctx.close()

    # The original key edition is byte-identical.
    assert original_entries == list(
        KeyEntry.objects.filter(edition__name="original")
        .order_by("pk")
        .values_list("pk", "answer", "citation_locator", "citation_quote")
    )

    # ---------------------------------------------------------------- admin
    ctx = chromium.new_context(viewport={"width": 1366, "height": 900}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, base, "admin", PASSWORD)
    # Publishing already re-graded exactly the affected pairs: 6 models x 2 judges (rule 8),
    # and asked again the 3 replies the bundle holds as unparsed (null grades; issue 17).
    from scoring.models import ScoringRun

    auto = ScoringRun.objects.get(edition__name="corrected-1", kind="grade")
    assert (auto.status, auto.needed, auto.graded, auto.failed) == ("complete", 15, 15, 0)
    page.goto(f"{base}/runs/")
    page.locator("tr", has_text="corrected-1").get_by_role("button", name="Re-score").click()
    progress = page.locator("progress").first
    progress.wait_for()
    page.wait_for_function(
        "() => { const p = document.querySelector('progress');"
        " return p && p.max > 0 && p.value >= p.max; }",
        timeout=90_000,
    )
    page.wait_for_selector("text=Complete", timeout=30_000)
    _shot(shots, page, "re-scoring complete")

    page.goto(f"{base}/leaderboard/{BENCHMARK}/?edition=corrected-1&compare=original")
    page.wait_for_selector("table")
    board_text = page.locator("main").inner_text()
    assert "corrected-1" in board_text
    changes = {}
    rows = page.locator("table.compare-table tbody tr")
    for i in range(rows.count()):
        cells = [c.strip() for c in rows.nth(i).locator("th, td").all_inner_texts()]
        changes[cells[0]] = cells
    # Columns: model | original score, rank, band | corrected score, rank, band | change | move
    # Five models said the cap was removed (now right: up), model-e applied it (now wrong).
    for model in ("model-a", "model-b", "model-c", "model-d", "model-f"):
        assert float(changes[model][7]) > 0, changes[model]
    assert float(changes["model-e"][7]) < 0, changes["model-e"]
    # Hand check for model-a: 37 counted responses (the demo's two questions both
    # auditors reject are scored: its auditors are one vendor, not independent, rule 4),
    # Q046 moved from 0+0 to 2+2 agreed, so its points rise by 2 on a denominator of
    # 2 x 37: +2/74 = +2.70 points.
    assert changes["model-a"][7] == "+2.70", changes["model-a"]
    _shot(shots, page, "leaderboard original vs corrected")

    page.goto(f"{base}/report/{BENCHMARK}/?edition=corrected-1&compare=original")
    report = page.locator("main").inner_text()
    assert re.search(r"Corrected\D{0,40}1\b", report), report[:2000]
    _shot(shots, page, "methodology report")
    ctx.close()

    # --------------------------------------------------- htmx habits, as the reviewer
    ctx = chromium.new_context(viewport={"width": 1366, "height": 900}, locale="en-GB")
    page = ctx.new_page()
    sign_in(page, base, "reviewer", PASSWORD)
    page.goto(f"{base}/review/?benchmark={BENCHMARK}")
    page.get_by_label("Status", exact=True).select_option(
        "all"
    )  # htmx swaps the results, pushes the URL
    page.wait_for_url(re.compile(r"status=all"))
    page.locator("#queue-results a", has_text="Q005").first.click()
    page.wait_for_url(re.compile(r"/review/items/\d+/"))
    page.go_back()
    page.wait_for_url(re.compile(r"status=all"))
    page.wait_for_selector("#queue-results tbody tr")
    assert page.locator("header.site-header").count() == 1, "Back shows the full page"
    assert page.locator("form.filters").count() == 1
    shots.take(page, "back after filtering shows the full page")

    # An expired session on an htmx action leads to the login page, not into a fragment.
    ctx.clear_cookies()
    page.get_by_label("Status", exact=True).select_option("open")
    page.wait_for_url(re.compile(r"/accounts/login/"))
    assert page.locator("#queue-results").count() == 0
    assert page.get_by_role("heading", name="Sign in").count() == 1
    shots.take(page, "expired session goes to login")
    ctx.close()
    assert ARTIFACTS.is_dir()
