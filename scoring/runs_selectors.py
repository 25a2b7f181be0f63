"""Reads of scoring runs for the runs page, the API, the CLI and the leaderboard.

Selectors only: no writes. The run lifecycle that writes them is scoring.services.runs.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count

from questions.models import KeyEdition
from scoring.models import JudgeCall, ScoringRun


def latest_run(edition: KeyEdition, *, kind: str = ScoringRun.Kind.GRADE) -> ScoringRun | None:
    """Return the edition's newest run of `kind`: the leaderboard marks its figures stale while
    that run is pending/running or when it failed."""
    return (
        ScoringRun.objects.filter(edition=edition, kind=kind).order_by("-created_at", "-id").first()
    )


def ledger_summary(run: ScoringRun) -> dict[str, int]:
    """Return the run's judge-call ledger: calls sent, answered, retried, failed, lost, started.

    `lost` are calls in flight when a worker was killed: paid for, no grade kept, called
    again; every other pair is paid at most once (`paid_twice` counts exceptions).
    """
    counts = dict(
        JudgeCall.objects.filter(run=run)
        .values_list("outcome")
        .annotate(n=Count("id"))
        .values_list("outcome", "n")
    )
    paid_twice = (
        JudgeCall.objects.filter(run=run, outcome=JudgeCall.Outcome.OK)
        .values("judge_id", "response_id", "key_entry_id", "prompt_version")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    return {
        "calls": sum(counts.values()),
        "ok": counts.get(JudgeCall.Outcome.OK, 0),
        "retries": counts.get(JudgeCall.Outcome.RETRY, 0),
        "failed": counts.get(JudgeCall.Outcome.FAILED, 0),
        "in_flight_at_kill": counts.get(JudgeCall.Outcome.LOST, 0),
        "in_flight": counts.get(JudgeCall.Outcome.STARTED, 0),
        "paid_twice": paid_twice,
    }


def run_summary(run: ScoringRun) -> dict[str, Any]:
    """Return the cli.md JSON shape of a run (plus kind, done and notes)."""
    return {
        "run": run.pk,
        "edition": run.edition.name,
        "kind": run.kind,
        "status": run.status,
        "needed": run.needed,
        "done": run.done,
        "graded": run.graded,
        "reused": run.reused,
        "failed": run.failed,
        "unparsed": run.unparsed,
        "judges": sorted(run.judges.values_list("judge_id", flat=True)),
        "notes": [line for line in run.error.splitlines() if line],
    }
