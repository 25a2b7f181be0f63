"""The candidate panel of a benchmark: the one writer of `CandidateMember` rows (issue 31).

A candidate panel is a judge panel an admin tries before it counts: judges at prompt
versions (new judges included), re-scored like any run (estimate and budget), compared
with the judge panel on pages only admins and editors see. Nothing public reads it.
Adopting it replaces the judge panel through `judge_panel_set` (so the change is the one
logged as "set the judge panel", as `panel --set` is) and logs the adoption as well.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.actions import Action
from core.services import audit_log
from questions.errors import DomainError
from questions.models import Benchmark, KeyEdition
from scoring.models import CandidateMember, Judge, ScoringRun
from scoring.runs.services.panel import checked_members, judge_panel_set, panel_state


def candidate_state(benchmark: Benchmark) -> list[dict[str, str]]:
    """Return the candidate panel as [{"judge": judge_id, "prompt_version": v}] by judge id
    ([] when none is defined)."""
    return [
        {"judge": jid, "prompt_version": pv}
        for jid, pv in CandidateMember.objects.filter(benchmark=benchmark)
        .order_by("judge__judge_id")
        .values_list("judge__judge_id", "prompt_version")
    ]


def _log(benchmark: Benchmark, action: str, actor: Any, before: Any, after: Any) -> None:
    audit_log(
        actor=actor,
        action=action,
        target_type="benchmark",
        target_id=benchmark.pk,
        target_label=f"candidate panel of {benchmark.name}",
        benchmark_name=benchmark.name,
        before=before,
        after=after,
    )


def candidate_set(
    *,
    benchmark: Benchmark,
    members: list[tuple[str, str | None]],
    actor: Any = None,
) -> list[dict[str, str]]:
    """Replace the benchmark's candidate panel with `members`; return it.

    `members` is [(judge_id, prompt_version or None)] (`parse_panel_spec`): None means the
    judge's current prompt version. The same checks as the judge panel (a judge of this
    benchmark, role judge, named once; at least one). Atomic; logs
    Action.CANDIDATE_PANEL_SET with the candidate before and after (nothing when unchanged).
    Changes no published figure. Raises NotFoundError / DomainError as `judge_panel_set`.
    """
    with transaction.atomic():
        judges, after = checked_members(benchmark, members, "a candidate panel")
        before = candidate_state(benchmark)
        if before == after:
            return after
        CandidateMember.objects.filter(benchmark=benchmark).delete()
        user = actor if getattr(actor, "is_authenticated", False) else None
        CandidateMember.objects.bulk_create(
            CandidateMember(
                benchmark=benchmark,
                judge=judges[m["judge"]],
                prompt_version=m["prompt_version"],
                added_by=user,
            )
            for m in after
        )
        _log(benchmark, Action.CANDIDATE_PANEL_SET, actor, before, after)
    return after


def candidate_clear(*, benchmark: Benchmark, actor: Any = None) -> bool:
    """Discard the candidate panel (logged as Action.CANDIDATE_PANEL_CLEAR); return whether
    there was one. Grades made for it stay: they are real grades, counted by no figure."""
    with transaction.atomic():
        before = candidate_state(benchmark)
        if not before:
            return False
        CandidateMember.objects.filter(benchmark=benchmark).delete()
        _log(benchmark, Action.CANDIDATE_PANEL_CLEAR, actor, before, [])
    return True


def candidate_adopt(*, benchmark: Benchmark, actor: Any = None) -> list[dict[str, str]]:
    """Make the candidate panel the judge panel; return the new judge panel.

    In one transaction: `judge_panel_set` with the candidate's judges at its versions
    (logged as Action.JUDGE_PANEL_SET, before and after, as `panel --set`), then
    Action.CANDIDATE_PANEL_ADOPT (the judge panel before, the candidate adopted) and the
    candidate's rows deleted. From then on the public and signed-in boards use it. Raises
    DomainError when the benchmark has no candidate panel.
    """
    with transaction.atomic():
        members = candidate_state(benchmark)
        if not members:
            raise DomainError(
                f"benchmark {benchmark.name!r} has no candidate panel to adopt "
                "(define one: manage.py panel --candidate ID@VERSION,...)"
            )
        before = panel_state(benchmark)
        after = judge_panel_set(
            benchmark=benchmark,
            members=[(m["judge"], m["prompt_version"]) for m in members],
            actor=actor,
        )
        CandidateMember.objects.filter(benchmark=benchmark).delete()
        _log(benchmark, Action.CANDIDATE_PANEL_ADOPT, actor, before, after)
    return after


def candidate_graders(benchmark: Benchmark) -> tuple[list[Judge], list[str]]:
    """Return (the candidate's judges a re-score can grade for it, notes on the others).

    A run grades at a judge's current prompt version (scoring.runs.services.pairs), so a member
    pinned at another version is left out with a note (its grades must already exist or
    its prompt version be moved first); so is one that cannot grade at all (graders_for).
    """
    from scoring.runs.services.pairs import graders_for

    rows = list(
        CandidateMember.objects.filter(benchmark=benchmark)
        .select_related("judge")
        .order_by("judge__judge_id")
    )
    usable, notes = graders_for([r.judge for r in rows])
    pinned = {r.judge_id: r.prompt_version for r in rows}
    graders = []
    for judge in usable:
        if pinned[judge.pk] != judge.prompt_version:
            notes.append(
                f"{judge.judge_id}: skipped, the candidate pins prompt {pinned[judge.pk]} but "
                f"the judge grades with {judge.prompt_version} now (a run grades at the "
                "judge's current prompt version)"
            )
        else:
            graders.append(judge)
    return graders, notes


def candidate_rescore(
    *,
    edition: KeyEdition,
    user: Any = None,
    budget_cost: Any = None,
    budget_tokens: Any = None,
    enqueue: bool = True,
) -> ScoringRun:
    """Start a re-scoring run of `edition` for the candidate panel's judges
    (`candidate_graders`): what lacks a grade at their versions, with an optional budget
    (`scoring_run_create`: estimate, budget and the ledger as any run). The skipped
    members' notes go in `run.error`. Raises DomainError when no member can grade,
    scoring.runs.budget.BudgetError for a budget that cannot be set."""
    from scoring.runs.services.runs import scoring_run_create

    graders, notes = candidate_graders(edition.benchmark)
    if not graders:
        raise DomainError(
            "no judge of the candidate panel can grade: " + ("; ".join(notes) or "none defined")
        )
    run = scoring_run_create(
        edition=edition,
        judges=graders,
        user=user,
        budget_cost=budget_cost,
        budget_tokens=budget_tokens,
        enqueue=enqueue,
    )
    if notes:
        run.error = "\n".join(filter(None, [run.error, *notes]))
        run.save(update_fields=["error"])
    return run
