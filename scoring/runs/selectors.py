"""Reads of scoring runs for the runs page, the API, the CLI and the leaderboard.

Selectors only: no writes. The run lifecycle that writes them is scoring.runs.services.runs.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from questions.models import KeyEdition
from scoring.models import JudgeCall, ScoringRun
from scoring.runs.costs import calls_cost
from scoring.runs.services.tunables import resend_due_at, stall_seconds


def latest_run(edition: KeyEdition, *, kind: str = ScoringRun.Kind.GRADE) -> ScoringRun | None:
    """Return the edition's newest run of `kind`: the leaderboard marks its figures stale while
    that run is pending/running or when it failed."""
    return (
        ScoringRun.objects.filter(edition=edition, kind=kind).order_by("-created_at", "-id").first()
    )


def _paid_again(calls: QuerySet) -> int:
    """Count the answered calls among `calls` whose pair (response, judge, key entry, prompt
    version; an audit's has no response) had been answered before by an earlier call of ANY
    run: the judge was paid twice for one grade or verdict. Two queries (grade calls, audit
    calls), each a correlated EXISTS on the ledger's call_pair_idx."""
    grades, audits = paid_again_calls(calls)
    return grades.count() + audits.count()


def paid_again_calls(calls: QuerySet) -> tuple[QuerySet, QuerySet]:
    """Return the answered calls among `calls` that bought a pair an earlier call of any run
    had already answered (see _paid_again), as two JudgeCall querysets: (grade calls, audit
    calls), each a correlated EXISTS on call_pair_idx (kept apart: one OR of both reads
    the ledger without that index)."""
    answered = calls.filter(outcome=JudgeCall.Outcome.OK)
    same = {n: OuterRef(n) for n in ("judge_id", "key_entry_id", "prompt_version")}
    earlier = JudgeCall.objects.filter(outcome=JudgeCall.Outcome.OK, id__lt=OuterRef("id"), **same)
    grades = answered.filter(response_id__isnull=False).filter(
        Exists(earlier.filter(response_id=OuterRef("response_id")))
    )
    audits = answered.filter(response_id__isnull=True).filter(
        Exists(earlier.filter(response_id__isnull=True))
    )
    return grades, audits


def ledger_summary(run: ScoringRun) -> dict[str, int]:
    """Return the run's judge-call ledger: calls sent, answered, retried, failed, lost,
    started, and paid twice (by this run, and by its edition's runs).

    `retries` are live calls that found the judge unavailable (asked again);
    `batch_no_reply` the requests a vendor batch brought no reply for (expired, cancelled,
    errored, or the batch failed: not billed), of which `batch_not_sent_again` were not
    sent again because their run was cancelled (scoring.runs.services.batch_mode
    NOT_SENT_AGAIN); `modes`: how the run's calls were sent ("batch", "live").

    `in_flight_at_kill` (outcome "lost") are calls in flight when a worker was killed: sent,
    outcome unknown (not counted as paid: scoring.runs.costs.UNKNOWN_OUTCOMES), no grade kept,
    called again. `paid_twice` counts this run's answered calls whose
    pair had already been answered by an earlier call of any run (issue 19: counted across
    runs, so a second run on the same edition that bought a pair again shows it here);
    `edition_paid_twice` is the same count over every run of the run's edition
    (edition_paid_twice). `repeated` counts this run's calls for pairs whose earlier call
    (of any run) was lost at a kill: each pair is asked again once per loss.
    """
    from scoring.runs.services.batch_mode import NOT_SENT_AGAIN

    rows = list(
        JudgeCall.objects.filter(run=run)
        .values("outcome", "mode")
        .annotate(
            n=Count("id"),
            dropped=Count("id", filter=Q(detail__endswith=NOT_SENT_AGAIN)),
        )
        .order_by()
    )
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + r["n"]
    retry = [r for r in rows if r["outcome"] == JudgeCall.Outcome.RETRY]
    live_retries = sum(r["n"] for r in retry if r["mode"] != ScoringRun.Mode.BATCH)
    no_reply = sum(r["n"] for r in retry if r["mode"] == ScoringRun.Mode.BATCH)
    dropped = sum(r["dropped"] for r in retry if r["mode"] == ScoringRun.Mode.BATCH)
    return {
        "calls": sum(counts.values()),
        "ok": counts.get(JudgeCall.Outcome.OK, 0),
        "retries": live_retries,
        "batch_no_reply": no_reply,
        "batch_not_sent_again": dropped,
        "modes": sorted({r["mode"] for r in rows}),
        "failed": counts.get(JudgeCall.Outcome.FAILED, 0),
        "in_flight_at_kill": counts.get(JudgeCall.Outcome.LOST, 0),
        "in_flight": counts.get(JudgeCall.Outcome.STARTED, 0),
        "paid_twice": _paid_again(JudgeCall.objects.filter(run=run)),
        "edition_paid_twice": edition_paid_twice(run.edition),
        "repeated": _repeated_after_loss(run),
    }


def _repeated_after_loss(run: ScoringRun) -> int:
    """Count this run's calls for a pair that had lost an earlier call (of any run) in
    flight at a kill: the calls asked again because a worker died. One query."""
    same = {n: OuterRef(n) for n in ("judge_id", "key_entry_id", "prompt_version")}
    lost = JudgeCall.objects.filter(outcome=JudgeCall.Outcome.LOST, id__lt=OuterRef("id"), **same)
    calls = JudgeCall.objects.filter(run=run)
    grades = calls.filter(response_id__isnull=False).filter(
        Exists(lost.filter(response_id=OuterRef("response_id")))
    )
    audits = calls.filter(response_id__isnull=True).filter(
        Exists(lost.filter(response_id__isnull=True))
    )
    return grades.count() + audits.count()


def run_costs(run: ScoringRun) -> dict[str, Any]:
    """Return what the run's judge calls cost, and its edition's, per judge (issue 20).

    Shape: {"run", "edition", "paid_twice", "edition_paid_twice"}, each a
    scoring.runs.costs.calls_cost summary (each call at its judge's prices for the way it was
    sent: live, or batch prices for calls sent in a vendor batch): this run's billed calls, every run of its edition, and the
    answered calls that bought a pair already answered (ledger_summary's paid_twice and
    edition_paid_twice) in tokens and money.
    """
    mine = JudgeCall.objects.filter(run=run)
    edition = edition_costs(run.edition)
    return {
        "run": calls_cost(mine),
        "edition": edition["spent"],
        "paid_twice": calls_cost(_ids_of(paid_again_calls(mine))),
        "edition_paid_twice": edition["paid_twice"],
    }


def edition_costs(edition: KeyEdition) -> dict[str, Any]:
    """Return what the judge calls of every run of `edition` cost, per judge:
    {"spent": calls_cost of the edition's billed calls, "paid_twice": calls_cost of its
    answered calls that bought a pair already answered} (scoring.runs.costs.calls_cost shapes:
    each call at its send mode's prices)."""
    calls = JudgeCall.objects.filter(run__edition=edition)
    return {"spent": calls_cost(calls), "paid_twice": calls_cost(_ids_of(paid_again_calls(calls)))}


def _ids_of(parts: tuple[QuerySet, QuerySet]) -> QuerySet:
    """Return one JudgeCall queryset of the calls in both parts (their ids read first: the
    paid-twice calls are few)."""
    ids = [pk for part in parts for pk in part.values_list("pk", flat=True)]
    return JudgeCall.objects.filter(pk__in=ids)


def run_stall(run: ScoringRun, *, now: datetime | None = None) -> dict[str, Any] | None:
    """Return why an active run does not move, or None when a worker reported on it lately.

    A worker reports on a run when a task of it begins and every
    SNAGLIST_WORKER_HEARTBEAT_SECONDS while one runs (scoring.runs.services.heartbeat). With no
    report for tunables.stall_seconds(run.mode) (3 heartbeats; for a batch-mode run, whose
    batch poller reports at each poll, 2 polls and a heartbeat) the run is stalled: returns
    {"since": the last report (or the run's creation when none came), "elsewhere": True
    when a worker reported on another active run within that time (the workers are alive
    but busy elsewhere, or this run's tasks were lost)}. Finished runs: None.
    """
    if run.status not in (ScoringRun.Status.PENDING, ScoringRun.Status.RUNNING):
        return None
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=stall_seconds(run.mode))
    since = run.reported_at or run.created_at
    if since >= cutoff:
        return None
    elsewhere = (
        ScoringRun.objects.filter(
            status__in=(ScoringRun.Status.PENDING, ScoringRun.Status.RUNNING),
            reported_at__gte=cutoff,
        )
        .exclude(pk=run.pk)
        .exists()
    )
    return {"since": since, "elsewhere": elsewhere}


def run_resends(run: ScoringRun) -> dict[str, Any] | None:
    """Return how often heal_runs sent the run to the workers again, or None when never.

    Shape: {"count": re-sends in all (ScoringRun.resend_count), "last": the last one's time,
    "due": when the next one is due if no worker reports meanwhile, or None when a worker
    has reported since the last one (tunables.resend_due_at, the rule heal_runs follows; a
    finished run has none)}.
    """
    if not run.resend_count and run.resent_at is None:
        return None
    due = None
    if run.status in (ScoringRun.Status.PENDING, ScoringRun.Status.RUNNING):
        due = resend_due_at(
            resent_at=run.resent_at,
            last_report=run.reported_at or run.created_at,
            unanswered=run.resends_unanswered,
            mode=run.mode,
        )
    return {"count": max(run.resend_count, 1), "last": run.resent_at, "due": due}


def edition_paid_twice(edition: KeyEdition) -> int:
    """Return how many answered calls of the edition's runs (every kind) bought a pair that
    an earlier call of any run had already answered: the sum of `paid_twice` over the
    edition's runs (ledger_summary)."""
    return _paid_again(JudgeCall.objects.filter(run__edition=edition))


def run_summary(run: ScoringRun) -> dict[str, Any]:
    """Return the cli.md JSON shape of a run (plus kind, mode, done and notes)."""
    return {
        "run": run.pk,
        "edition": run.edition.name,
        "kind": run.kind,
        "mode": run.mode,
        "status": run.status,
        "needed": run.needed,
        "done": run.done,
        "graded": run.graded,
        "reused": run.reused,
        "failed": run.failed,
        "unparsed": run.unparsed,
        "judges": sorted(run.judges.values_list("judge_id", flat=True)),
        # the run's caps (scoring.runs.budget): a decimal string in budget_currency, or None
        "budget_cost": None if run.budget_cost is None else f"{run.budget_cost:.6f}",
        "budget_currency": run.budget_currency,
        "budget_tokens": run.budget_tokens,
        "notes": [line for line in run.error.splitlines() if line],
    }


def run_batches(run: ScoringRun) -> list[Any]:
    """Return the run's vendor batches (scoring.models.JudgeBatch, batch mode), oldest first,
    with their judges: one query."""
    from scoring.models import JudgeBatch

    return list(JudgeBatch.objects.filter(run=run).select_related("judge").order_by("pk"))
