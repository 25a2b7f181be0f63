"""Reads of scoring runs for the runs page, the API, the CLI and the leaderboard.

Selectors only: no writes. The run lifecycle that writes them is scoring.services.runs.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Exists, OuterRef, QuerySet

from questions.models import KeyEdition
from scoring.models import JudgeCall, ScoringRun


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
    answered = calls.filter(outcome=JudgeCall.Outcome.OK)
    same = {n: OuterRef(n) for n in ("judge_id", "key_entry_id", "prompt_version")}
    earlier = JudgeCall.objects.filter(outcome=JudgeCall.Outcome.OK, id__lt=OuterRef("id"), **same)
    grades = answered.filter(response_id__isnull=False).filter(
        Exists(earlier.filter(response_id=OuterRef("response_id")))
    )
    audits = answered.filter(response_id__isnull=True).filter(
        Exists(earlier.filter(response_id__isnull=True))
    )
    return grades.count() + audits.count()


def ledger_summary(run: ScoringRun) -> dict[str, int]:
    """Return the run's judge-call ledger: calls sent, answered, retried, failed, lost,
    started, and paid twice (by this run, and by its edition's runs).

    `in_flight_at_kill` (outcome "lost") are calls in flight when a worker was killed: paid
    for, no grade kept, called again. `paid_twice` counts this run's answered calls whose
    pair had already been answered by an earlier call of any run (issue 19: counted across
    runs, so a second run on the same edition that bought a pair again shows it here);
    `edition_paid_twice` is the same count over every run of the run's edition
    (edition_paid_twice).
    """
    counts = dict(
        JudgeCall.objects.filter(run=run)
        .values_list("outcome")
        .annotate(n=Count("id"))
        .values_list("outcome", "n")
    )
    return {
        "calls": sum(counts.values()),
        "ok": counts.get(JudgeCall.Outcome.OK, 0),
        "retries": counts.get(JudgeCall.Outcome.RETRY, 0),
        "failed": counts.get(JudgeCall.Outcome.FAILED, 0),
        "in_flight_at_kill": counts.get(JudgeCall.Outcome.LOST, 0),
        "in_flight": counts.get(JudgeCall.Outcome.STARTED, 0),
        "paid_twice": _paid_again(JudgeCall.objects.filter(run=run)),
        "edition_paid_twice": edition_paid_twice(run.edition),
    }


def edition_paid_twice(edition: KeyEdition) -> int:
    """Return how many answered calls of the edition's runs (every kind) bought a pair that
    an earlier call of any run had already answered: the sum of `paid_twice` over the
    edition's runs (ledger_summary)."""
    return _paid_again(JudgeCall.objects.filter(run__edition=edition))


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
