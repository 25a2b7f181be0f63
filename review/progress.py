"""The review's progress for one benchmark (issue 31 item 3): per reviewer and per source.

Read-only, for editors and admins. Every per-reviewer figure comes from the audit log
(core.models.AuditLogEntry), the record of who did what and when, so it can be checked
against it:

- *decided*: the reviewer's `proposal.create` entries (a confirmation recorded without
  approval counts: it is a decision); *items* the distinct review items among them;
- *outcomes*: those proposals by action (confirm / correct / remove);
- *claim to decision*: for each decision, the time from the same reviewer's latest
  `review_item.claim` of that item before it; the median over decisions with a claim
  (an item decided without a claim of one's own, e.g. reassigned, is left out);
- *approved* / *rejected*: editors' `proposal.approve` / `proposal.reject` entries of
  proposals the reviewer wrote; the approval rate is approved / (approved + rejected).

Per source (the item's highest-priority reason, ReviewItem.source): items open and
closed (ReviewItem.CLOSED). The forecast is dated from decisions: the pace is the items
of that source closed (ReviewItem.closed_at) in the last PACE_DAYS days, divided by
PACE_DAYS; the open items are cleared at that pace by now + open / pace days. No item of
a source closed in that window means no forecast for it, said in words. The per-detector
table is review.scorecard's (one place for "open and closed by detector").
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from core.actions import Action
from core.models import AuditLogEntry
from questions.models import Benchmark
from review.models import ReviewItem, Source
from review.scorecard import detector_scorecard

PACE_DAYS = 7


@dataclass
class ReviewerProgress:
    """One reviewer's figures (counts of audit-log entries; `median_claim_to_decision` a
    timedelta or None; `approval_rate` a fraction 0-1 or None before any editor decided)."""

    username: str
    decided: int = 0
    items: int = 0
    confirmed: int = 0
    corrected: int = 0
    removed: int = 0
    approved: int = 0
    rejected: int = 0
    median_claim_to_decision: timedelta | None = None
    timed: int = 0  # decisions with a claim of their own before them

    @property
    def approval_rate(self) -> float | None:
        decided = self.approved + self.rejected
        return self.approved / decided if decided else None


@dataclass
class SourceProgress:
    """Items of one source: open, closed, closed within the pace window, and the forecast
    (`pace` items a day, `cleared_by` a date or None when nothing closed in the window)."""

    source: str
    label: str
    open: int
    closed: int
    closed_recently: int
    pace: float
    cleared_by: datetime | None

    @property
    def forecast(self) -> str:
        """The forecast in words (British English, dates as "14 December 2026")."""
        if not self.open:
            return "Cleared."
        if not self.cleared_by:
            kind = "item" if self.source == "all" else "item of this kind"
            return f"No {kind} was closed in the last {PACE_DAYS} days: no forecast."
        return (
            f"At the last {PACE_DAYS} days' pace ({self.pace:.1f} a day) the {self.open} open "
            f"{'item is' if self.open == 1 else 'items are'} cleared by "
            f"{self.cleared_by.day} {self.cleared_by:%B %Y}."
        )


@dataclass
class ReviewProgress:
    """What the progress page shows: `reviewers` sorted by decisions (most first), then
    name; `sources` in Source order with an `all` row first; `detectors` as
    review.scorecard.detector_scorecard's rows; `as_of` the time the figures were read."""

    benchmark: Benchmark
    as_of: datetime
    reviewers: list[ReviewerProgress] = field(default_factory=list)
    sources: list[SourceProgress] = field(default_factory=list)
    detectors: list[dict[str, Any]] = field(default_factory=list)


def _source_row(
    source: str, label: str, open_: int, closed: int, recent: int, now: datetime
) -> SourceProgress:
    pace = recent / PACE_DAYS
    cleared_by = None
    if open_ and pace:
        cleared_by = now + timedelta(days=math.ceil(open_ / pace))
    return SourceProgress(source, label, open_, closed, recent, pace, cleared_by)


def _sources(benchmark: Benchmark, now: datetime) -> list[SourceProgress]:
    since = now - timedelta(days=PACE_DAYS)
    rows = (
        ReviewItem.objects.filter(benchmark=benchmark)
        .order_by()
        .values("source")
        .annotate(
            closed=Count("pk", filter=Q(status__in=ReviewItem.CLOSED)),
            total=Count("pk"),
            recent=Count("pk", filter=Q(status__in=ReviewItem.CLOSED, closed_at__gte=since)),
        )
    )
    by_source = {r["source"]: r for r in rows}
    labels = dict(Source.choices)
    order = [s.value for s in Source] + sorted(k for k in by_source if k not in labels)
    out = []
    totals = Counter()
    for source in order:
        r = by_source.get(source)
        if not r:
            continue
        open_ = r["total"] - r["closed"]
        totals.update(open=open_, closed=r["closed"], recent=r["recent"])
        out.append(
            _source_row(source, labels.get(source, source), open_, r["closed"], r["recent"], now)
        )
    everything = _source_row(
        "all", "All items", totals["open"], totals["closed"], totals["recent"], now
    )
    return [everything, *out]


def _reviewers(benchmark: Benchmark) -> list[ReviewerProgress]:
    entries = (
        AuditLogEntry.objects.filter(
            benchmark_name=benchmark.name,
            action__in=[
                Action.REVIEW_ITEM_CLAIM,
                Action.PROPOSAL_CREATE,
                Action.PROPOSAL_APPROVE,
                Action.PROPOSAL_REJECT,
            ],
        )
        .order_by("created_at", "id")
        .values_list("action", "actor_label", "target_id", "after", "created_at")
    )
    rows: dict[str, ReviewerProgress] = {}
    items: dict[str, set] = defaultdict(set)
    waits: dict[str, list[timedelta]] = defaultdict(list)
    last_claim: dict[tuple[str, str], datetime] = {}
    outcome_field = {"confirm": "confirmed", "correct": "corrected", "remove": "removed"}
    for action, actor, target_id, after, at in entries:
        after = after or {}
        if action == Action.REVIEW_ITEM_CLAIM:
            last_claim[(actor, str(target_id))] = at
            continue
        if action == Action.PROPOSAL_CREATE:
            row = rows.setdefault(actor, ReviewerProgress(actor))
            row.decided += 1
            item = str(after.get("item"))
            items[actor].add(item)
            name = outcome_field.get(after.get("action"))
            if name:
                setattr(row, name, getattr(row, name) + 1)
            claimed = last_claim.get((actor, item))
            if claimed is not None and claimed <= at:
                waits[actor].append(at - claimed)
            continue
        author = after.get("author")
        if not author:
            continue
        row = rows.setdefault(author, ReviewerProgress(author))
        if action == Action.PROPOSAL_APPROVE:
            row.approved += 1
        else:
            row.rejected += 1
    for actor, row in rows.items():
        row.items = len(items[actor])
        row.timed = len(waits[actor])
        if waits[actor]:
            row.median_claim_to_decision = statistics.median(waits[actor])
    return sorted(rows.values(), key=lambda r: (-r.decided, r.username))


def review_progress(benchmark: Benchmark, *, now: datetime | None = None) -> ReviewProgress:
    """Return the benchmark's ReviewProgress as of `now` (default: the current time).

    Four queries: the audit-log entries of claims, proposals and editors' decisions for
    the benchmark, one grouped count of review items, and the scorecard's two.
    """
    now = now or timezone.now()
    return ReviewProgress(
        benchmark=benchmark,
        as_of=now,
        reviewers=_reviewers(benchmark),
        sources=_sources(benchmark, now),
        detectors=detector_scorecard(benchmark)["detectors"],
    )
