"""The review's progress page (issue 31 item 3): figures from the audit log, a dated forecast."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from core.actions import Action
from core.models import AuditLogEntry
from review import services
from review.models import ReviewItem, Source
from review.progress import review_progress
from tests.factories import ReviewItemFactory
from tests.review_fixtures import *  # noqa: F403
from tests.review_fixtures import propose_correction

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _entry(bench, action, actor, target_id, at, after=None, target_type="review_item"):
    return AuditLogEntry.objects.create(
        actor_label=actor,
        action=action,
        target_type=target_type,
        target_id=str(target_id),
        benchmark_name=bench.name,
        after=after,
        created_at=at,
    )


def test_reviewer_figures_from_a_hand_written_log(world):
    """alice: claims at 9:00, 9:00 and 10:00, decisions 10, 30 and 60 minutes after her own
    claim (median 30 min by hand), plus one decision on an item she never claimed (left out
    of the median); editors approve two of her proposals and reject one (rate 2/3)."""
    b = world.benchmark
    minute = timedelta(minutes=1)
    _entry(b, Action.REVIEW_ITEM_CLAIM, "alice", 1, T0)
    _entry(b, Action.REVIEW_ITEM_CLAIM, "alice", 2, T0)
    _entry(b, Action.REVIEW_ITEM_CLAIM, "bob", 3, T0)  # bob's claim does not time alice
    _entry(b, Action.REVIEW_ITEM_CLAIM, "alice", 3, T0 + 60 * minute)
    decisions = [(1, 10, "correct"), (2, 30, "confirm"), (3, 120, "remove"), (4, 130, "correct")]
    for pk, (item, minutes, action) in enumerate(decisions, start=1):
        _entry(
            b,
            Action.PROPOSAL_CREATE,
            "alice",
            pk,
            T0 + minutes * minute,
            {"item": item, "action": action, "author": "alice"},
            target_type="proposal",
        )
    for pk, action in ((1, Action.PROPOSAL_APPROVE), (3, Action.PROPOSAL_APPROVE)):
        _entry(b, action, "ed", pk, T0 + 200 * minute, {"author": "alice"}, "proposal")
    _entry(b, Action.PROPOSAL_REJECT, "ed", 4, T0 + 201 * minute, {"author": "alice"}, "proposal")

    (alice,) = review_progress(b).reviewers
    assert alice.username == "alice"
    assert (alice.decided, alice.items) == (4, 4)
    assert (alice.confirmed, alice.corrected, alice.removed) == (1, 2, 1)
    assert alice.timed == 3  # item 4 had no claim of hers
    assert alice.median_claim_to_decision == timedelta(minutes=30)
    assert (alice.approved, alice.rejected) == (2, 1)
    assert alice.approval_rate == pytest.approx(2 / 3)


def test_figures_equal_counts_from_the_audit_log_after_real_work(
    world, reviewer, reviewer2, editor
):
    """Real claims, proposals, approvals and a rejection through the services; the page's
    figures are then recounted from the audit log with queries of the test's own."""
    items = [
        ReviewItemFactory(question=world.q(i), source=Source.SINGLE_AUDITOR_FLAG) for i in range(4)
    ]
    approved = propose_correction(items[0], reviewer)
    services.proposal_approve(proposal=approved, user=editor)
    item = services.review_item_claim(item=items[1], user=reviewer)
    services.proposal_create(item=item, user=reviewer, version=item.version, action="confirm")
    rejected = propose_correction(items[2], reviewer2)
    services.proposal_reject(proposal=rejected, user=editor, comment="The key is right.")

    progress = review_progress(world.benchmark)
    log = AuditLogEntry.objects.filter(benchmark_name=world.benchmark.name)
    by_name = {r.username: r for r in progress.reviewers}
    assert set(by_name) == {"reviewer", "reviewer2"}
    for name, row in by_name.items():
        created = log.filter(action=Action.PROPOSAL_CREATE, actor_label=name)
        assert row.decided == created.count()
        assert row.items == len({e.after["item"] for e in created})
        decided = log.filter(after__author=name)
        assert row.approved == decided.filter(action=Action.PROPOSAL_APPROVE).count()
        assert row.rejected == decided.filter(action=Action.PROPOSAL_REJECT).count()
        waits = []
        for e in created:
            claim = (
                log.filter(
                    action=Action.REVIEW_ITEM_CLAIM,
                    actor_label=name,
                    target_id=str(e.after["item"]),
                    created_at__lte=e.created_at,
                )
                .order_by("-created_at")
                .first()
            )
            waits.append(e.created_at - claim.created_at)
        assert row.median_claim_to_decision == statistics.median(waits)
    assert (by_name["reviewer"].decided, by_name["reviewer"].approved) == (2, 1)
    assert (by_name["reviewer"].corrected, by_name["reviewer"].confirmed) == (1, 1)
    assert (by_name["reviewer2"].rejected, by_name["reviewer2"].approval_rate) == (1, 0.0)
    everything = progress.sources[0]
    assert (everything.source, everything.open, everything.closed) == ("all", 2, 2)


def test_the_forecast_is_dated_from_closed_items(world):
    """Single-flag items: 3 closed in the last 7 days (one 8 days ago does not count) and 4
    open, so the pace is 3/7 a day and they are cleared in ceil(4 / (3/7)) = ceil(9.33) =
    10 days. Judge flags: 2 open, none closed lately: no forecast, said in words."""
    now = T0
    closed_at = [now - timedelta(days=d) for d in (1, 2, 6.9, 8)]
    for i, when in enumerate(closed_at):
        ReviewItemFactory(
            question=world.q(i),
            source=Source.SINGLE_AUDITOR_FLAG,
            status=ReviewItem.Status.CONFIRMED,
            closed_at=when,
        )
    for i in range(4):
        ReviewItemFactory(question=world.q(i), source=Source.SINGLE_AUDITOR_FLAG)
    for i in range(2):
        ReviewItemFactory(question=world.q(4 + i), source=Source.JUDGE_FLAG)

    rows = {s.source: s for s in review_progress(world.benchmark, now=now).sources}
    flag = rows[Source.SINGLE_AUDITOR_FLAG]
    assert (flag.open, flag.closed, flag.closed_recently) == (4, 4, 3)
    assert flag.pace == pytest.approx(3 / 7)
    assert flag.cleared_by == now + timedelta(days=10)
    assert flag.forecast == (
        "At the last 7 days' pace (0.4 a day) the 4 open items are cleared by 11 December 2026."
    )
    judge = rows[Source.JUDGE_FLAG]
    assert judge.cleared_by is None
    assert judge.forecast == "No item of this kind was closed in the last 7 days: no forecast."
    # All items: 6 open at 3/7 a day -> ceil(14) = 14 days.
    assert rows["all"].open == 6 and rows["all"].cleared_by == now + timedelta(days=14)


def test_editors_find_the_page_in_the_navigation_and_read_it(world, editor, reviewer, client):
    ReviewItemFactory(question=world.q(0), source=Source.SINGLE_AUDITOR_FLAG)
    propose_correction(ReviewItem.objects.get(), reviewer)
    client.force_login(editor)
    home = client.get(reverse("home"))
    assert reverse("review:progress-index") in home.content.decode()
    index = client.get(reverse("review:progress-index"))
    assert index.status_code == 302  # one benchmark with items: straight to it
    page = client.get(index["Location"])
    html = page.content.decode()
    assert page.status_code == 200
    assert "Review progress: demo" in html
    assert '<th scope="row">reviewer</th><td class="num">1</td>' in html
    assert "No item was closed in the last 7 days: no forecast." in html
    assert "No detector evidence is filed" in html
    client.force_login(reviewer)
    assert client.get(index["Location"]).status_code == 403


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_page_fits_a_phone_and_a_laptop(live_server, chromium):
    """At 390x844 and 1366x900 the page is no wider than the screen (wide tables scroll
    inside their own box); screenshots of both in test-artifacts/progress/."""
    from tests.browser import Shots, sign_in
    from tests.factories import UserFactory
    from tests.review_fixtures import build_world

    w = build_world()
    reviewer = UserFactory(username="reviewer", roles=["reviewer"])
    UserFactory(username="editor", roles=["editor"])  # factories.py's password
    for i in range(3):
        ReviewItemFactory(question=w.q(i), source=Source.SINGLE_AUDITOR_FLAG)
    propose_correction(ReviewItem.objects.order_by("pk").first(), reviewer)
    shots = Shots("progress")
    for width, height in ((390, 844), (1366, 900)):
        page = chromium.new_page(viewport={"width": width, "height": height})
        sign_in(page, live_server.url, "editor", "correct-horse-battery-1")
        page.goto(f"{live_server.url}{reverse('review:progress', args=[w.benchmark.name])}")
        assert "Review progress: demo" in page.inner_text("h1")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        shots.take(page, f"progress at {width}")
        page.close()
