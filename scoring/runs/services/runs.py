"""Re-scoring and key-audit runs: create, start, resume, cancel and close them (rule 8).

A run is for one key edition and a set of judges (kind "grade") or auditors (kind
"audit"). At creation it stores one RunItem per pair that lacks a Grade (or
AuditVerdict) (scoring.runs.services.pairs); its chunks are settled by the tasks through
scoring.runs.services.chunks. Run counters move with F() expressions in the transaction that
settles the pair(s); the last pair to settle flips the run to complete/failed with a
conditional update (`scoring_run_finish`), and only that caller sends the follow-up task
(`on_complete`).

Never imports review/: a caller that wants work done after a run passes a task name. Nor
the board above it: a finished re-scoring run sends BOARD_REFRESH_TASK by name.
Top of scoring.runs.services.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.template.defaultfilters import pluralize
from django.utils import timezone

from engine.chunking import chunk_bounds
from questions.errors import DomainError, InvalidTransitionError
from questions.models import KeyEdition
from scoring.models import Judge, RescoreRequest, RunItem, ScoringRun
from scoring.runs.services.ledger import free_dead_leases, free_dead_limiter_slots
from scoring.runs.services.pairs import (
    audit_needed_pairs,
    graders_for,
    panel_graders,
    rescore_needed_pairs,
    total_pairs,
)
from scoring.runs.services.tunables import resend_due_at, stall_seconds
from scoring.runs.services.work import ACTIVE_STATUSES, append_note

logger = logging.getLogger(__name__)
# The board's task that warms a finished re-scoring run's leaderboard (scoring.board.tasks),
# sent by name: the board sits above the runs and reads their costs.
BOARD_REFRESH_TASK = "scoring.refresh_leaderboard"
# The runs' own tasks (scoring.runs.tasks registers them under these names), sent by name
# too: the tasks call these services, so the services never import the tasks (issue 29).
RUN_START_TASK = "scoring.run_start"
RESCORE_REQUESTED_TASK = "scoring.rescore_requested"


def scoring_run_create(
    *,
    edition: KeyEdition,
    judges: Sequence[Judge],
    kind: str = ScoringRun.Kind.GRADE,
    user: Any = None,
    on_complete: str = "",
    enqueue: bool = True,
    budget_cost: Any = None,
    budget_tokens: Any = None,
    mode: str = ScoringRun.Mode.LIVE,
) -> ScoringRun:
    """Create a run for the pairs that lack a grade (or verdict) and enqueue it after commit.

    Judges that cannot grade (no backend, inactive, wrong role) are skipped with a note in
    `run.error`. needed = pairs to grade now, reused = pairs already graded. A run that
    needs nothing completes as soon as its start task runs. `on_complete` names a task
    sent with the run id when the run finishes; for a key-audit run left without one it is
    settings.SNAGLIST_AUDIT_FOLLOW_UP_TASK (the composition root sets it to review's
    `review.triage_after_audit`, so every audit run - Runs page, API or `audit_key` - ends
    with triage of its edition, and scoring never imports review). mode: "live" (default)
    or "batch" (a re-scoring run's model-judge calls go through the vendors' batch APIs:
    scoring.runs.services.batch_mode). budget_cost / budget_tokens: the run's caps
    (scoring.runs.budget.parse_budget input; None = no cap), audit-logged; live runs only (a
    batch's calls are billed when the vendor ends it, after the check a cap needs). Raises
    DomainError when no judge can grade, for an unknown mode, for batch mode on a key-audit
    run (audits are few and go live), scoring.runs.budget.BudgetError for a budget that cannot be
    set (a cap on a batch run included; nothing is created then).
    """
    from scoring.runs.budget import BudgetError, budget_currency, parse_budget, set_budget

    if mode not in ScoringRun.Mode.values:
        raise DomainError(f"unknown run mode {mode!r}: live or batch")
    if mode == ScoringRun.Mode.BATCH and kind != ScoringRun.Kind.GRADE:
        raise DomainError("batch mode is for re-scoring runs; key audits run live")
    if mode == ScoringRun.Mode.BATCH and (
        budget_cost not in (None, "") or budget_tokens not in (None, "")
    ):
        raise BudgetError(
            "a budget cap is for live runs: a batch's calls are billed when the vendor ends "
            "it, after the check a cap needs; start the run live to cap it"
        )
    if kind == ScoringRun.Kind.AUDIT and not on_complete:
        on_complete = settings.SNAGLIST_AUDIT_FOLLOW_UP_TASK
    role = Judge.Role.AUDITOR if kind == ScoringRun.Kind.AUDIT else Judge.Role.JUDGE
    usable, notes = graders_for(judges, role=role)
    if not usable:
        raise DomainError(
            f"no {role} of {edition} can grade: " + ("; ".join(notes) or f"no {role} selected")
        )
    if kind == ScoringRun.Kind.AUDIT:
        pairs = audit_needed_pairs(edition=edition, auditors=usable)
    else:
        pairs = rescore_needed_pairs(edition=edition, judges=usable)
    total = total_pairs(edition, usable, kind)
    cap_cost, cap_tokens = parse_budget(budget_cost, budget_tokens)
    if cap_cost is not None:
        budget_currency(usable)  # refuse before anything is written
    with transaction.atomic():
        run = ScoringRun.objects.create(
            benchmark_id=edition.benchmark_id,
            edition=edition,
            kind=kind,
            needed=len(pairs),
            reused=max(0, total - len(pairs)),
            error="\n".join(notes),
            on_complete=on_complete or "",
            mode=mode,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        run.judges.set(usable)
        if cap_cost is not None or cap_tokens is not None:
            set_budget(run=run, cost=cap_cost, tokens=cap_tokens, judges=usable, user=user)
        RunItem.objects.bulk_create(
            [RunItem(run=run, response_id=r, judge_id=j, key_entry_id=e) for r, j, e in pairs],
            batch_size=2000,
        )
        if enqueue:
            scoring_run_enqueue(run=run)
    return run


def scoring_run_enqueue(*, run: ScoringRun) -> None:
    """Send `scoring.run_start` (RUN_START_TASK) for the run once the current transaction
    commits; raises LookupError then if no such task is registered."""
    run_id = run.pk
    transaction.on_commit(lambda: send_task(RUN_START_TASK, run_id))


def scoring_run_begin(*, run: ScoringRun) -> bool:
    """Mark a pending run running (sets started_at); return False if it is not active."""
    now = timezone.now()
    ScoringRun.objects.filter(pk=run.pk, status=ScoringRun.Status.PENDING).update(
        status=ScoringRun.Status.RUNNING, started_at=now
    )
    run.refresh_from_db()
    return run.status == ScoringRun.Status.RUNNING


def pending_pairs(*, run: ScoringRun) -> list[list[int | None]]:
    """Return the JSON-able pairs of the run that are not settled yet."""
    return [
        [r, j, e]
        for r, j, e in RunItem.objects.filter(run=run, state=RunItem.State.PENDING)
        .order_by("id")
        .values_list("response_id", "judge_id", "key_entry_id")
    ]


def scoring_run_resume(
    *, run: ScoringRun, user: Any = None, budget_cost: Any = None, budget_tokens: Any = None
) -> ScoringRun:
    """Re-enqueue an unfinished run: its pending pairs are sent again (duplicates are no-ops).

    A run stopped at its budget is made pending again and sent; budget_cost / budget_tokens
    (None: keep the cap) set new caps first (audit-logged). When the first chunk it would
    send still does not fit, nothing changes and scoring.runs.budget.BudgetError says so.
    Raises InvalidTransitionError for a finished or cancelled run.
    """
    from scoring.runs.budget import (
        BudgetError,
        clear_reservations,
        parse_budget,
        refuse_if_over,
        set_budget,
    )

    resumable = (*ACTIVE_STATUSES, ScoringRun.Status.STOPPED)
    if run.status not in resumable:
        raise InvalidTransitionError(f"run {run.pk} is {run.status}: nothing to resume")
    cap_cost, cap_tokens = parse_budget(budget_cost, budget_tokens)
    if run.mode == ScoringRun.Mode.BATCH and (cap_cost is not None or cap_tokens is not None):
        raise BudgetError(f"run {run.pk} is a batch run: a budget cap is for live runs")
    with transaction.atomic():
        run = ScoringRun.objects.select_for_update().select_related("benchmark").get(pk=run.pk)
        if cap_cost is not None or cap_tokens is not None:
            set_budget(
                run=run,
                cost=cap_cost if cap_cost is not None else run.budget_cost,
                tokens=cap_tokens if cap_tokens is not None else run.budget_tokens,
                judges=list(run.judges.all()),
                user=user,
            )
        if run.status == ScoringRun.Status.STOPPED:
            clear_reservations([run.pk])
            run.refresh_from_db()
            refuse_if_over(run, first_chunk_work(run))
            ScoringRun.objects.filter(pk=run.pk).update(
                status=ScoringRun.Status.PENDING,
                finished_at=None,
                error=append_note(
                    run.error, f"resumed by {getattr(user, 'username', None) or 'system'}"
                ),
            )
            run.refresh_from_db()
        scoring_run_enqueue(run=run)
    return run


def first_chunk_work(run: ScoringRun) -> list[Any]:
    """Return the rows (judge, key_entry, response) of the first chunk a resumed run would
    send: its pending pairs in order, cut as engine.chunking.chunk_bounds cuts them."""
    from types import SimpleNamespace

    from questions.models import KeyEntry, Response
    from scoring.runs.services.tunables import chunk_size

    pairs = pending_pairs(run=run)
    if not pairs:
        return []
    start, end = chunk_bounds(len(pairs), chunk_size())[0]
    pairs = pairs[start:end]
    judges = Judge.objects.in_bulk({j for _, j, _ in pairs})
    entries = KeyEntry.objects.select_related("question", "citation_document").in_bulk(
        {e for _, _, e in pairs}
    )
    responses = Response.objects.only("id", "text").in_bulk({r for r, _, _ in pairs if r})
    return [
        SimpleNamespace(judge=judges[j], key_entry=entries[e], response=responses.get(r))
        for r, j, e in pairs
    ]


def scoring_run_cancel(*, run: ScoringRun, user: Any = None) -> ScoringRun:
    """Cancel an active run: no new pair is started; pairs already settled are kept.

    Raises InvalidTransitionError when the run already finished.
    """
    changed = ScoringRun.objects.filter(pk=run.pk, status__in=ACTIVE_STATUSES).update(
        status=ScoringRun.Status.CANCELLED,
        finished_at=timezone.now(),
        error=append_note(run.error, f"cancelled by {getattr(user, 'username', None) or 'system'}"),
    )
    run.refresh_from_db()
    if not changed:
        raise InvalidTransitionError(f"run {run.pk} is {run.status}: it cannot be cancelled")
    return run


def scoring_run_finish(*, run: ScoringRun) -> bool:
    """Close the run if every pair is settled; return True only for the caller that closed it.

    complete when no pair failed, failed otherwise (the failed pairs still lack a grade, so
    the next run picks them up). The closer sends the run's `on_complete` task after commit.
    """
    now = timezone.now()
    with transaction.atomic():
        base = ScoringRun.objects.filter(
            pk=run.pk, status__in=ACTIVE_STATUSES, done__gte=F("needed")
        )
        closed = base.filter(failed=0).update(status=ScoringRun.Status.COMPLETE, finished_at=now)
        if not closed:
            closed = base.filter(failed__gt=0).update(
                status=ScoringRun.Status.FAILED, finished_at=now
            )
        if closed:
            run.refresh_from_db()
            if run.status == ScoringRun.Status.FAILED:
                ScoringRun.objects.filter(pk=run.pk).update(
                    error=append_note(
                        run.error,
                        f"{run.failed} pair{pluralize(run.failed)} failed; a new run will retry them",
                    )
                )
            _after_finish(run)
    if closed:
        run.refresh_from_db()
    return bool(closed)


def _after_finish(run: ScoringRun) -> None:
    run_id, follow_up = run.pk, run.on_complete

    complete = run.status == ScoringRun.Status.COMPLETE
    kind_grade = run.kind == ScoringRun.Kind.GRADE

    def send() -> None:
        if complete and kind_grade:
            send_follow_up(BOARD_REFRESH_TASK, run_id)
        if follow_up:
            send_follow_up(follow_up, run_id)

    transaction.on_commit(send)


def _registered_task(task_name: str):
    """Return the Celery task registered as `task_name`, or None.

    Looked up in the Celery app's registry after the apps' `tasks` modules are imported
    (`import_default_modules`): Celery imports them by itself only in a worker, and a name
    it does not know is handed to the broker as is - in the web process or a command with
    eager tasks (the zero set-up default) that message was lost, so an audit run started
    there was never followed by triage. The import happens only when the name is not yet
    registered: with Django it sets Django up again (Celery's fixup), which reconfigures
    logging.
    """
    from celery import current_app

    task = current_app.tasks.get(task_name)
    if task is None:
        current_app.loader.import_default_modules()
        task = current_app.tasks.get(task_name)
    return task


def send_task(task_name: str, arg: int) -> None:
    """Send the registered task `task_name` with the one argument `arg` (a run or edition
    id); raises LookupError when no such task is registered (`_registered_task`)."""
    task = _registered_task(task_name)
    if task is None:
        raise LookupError(f"Celery task {task_name!r} is not registered")
    task.delay(arg)


def send_follow_up(task_name: str, run_id: int) -> bool:
    """Send the task named `task_name` with `run_id`; return False when no such task exists
    (logged as an error: a follow-up is configuration, `_registered_task`)."""
    task = _registered_task(task_name)
    if task is None:
        logger.error("run %s: follow-up task %r is not registered; not sent", run_id, task_name)
        return False
    task.apply_async(args=[run_id])
    return True


def rescore_after_publish(edition_id: int) -> ScoringRun | None:
    """Create and enqueue a grading run for a newly published edition (rule 8).

    Uses the judges of the benchmark's judge panel that can grade (`panel_graders`; every
    active judge only when no panel is set): the judges whose grades make its figures, not
    every active judge (issue 26). Only responses whose effective key entry changed (or
    that were never graded) end up needed. Returns None (with a log line) when the edition
    is gone or no judge can grade.
    """
    edition = KeyEdition.objects.filter(pk=edition_id).first()
    if edition is None:
        logger.warning("rescore_after_publish: no key edition %s", edition_id)
        return None
    judges, notes = panel_graders(edition)
    if not judges:
        logger.info(
            "rescore_after_publish: no judge of %s can grade (%s)", edition, "; ".join(notes)
        )
        return None
    return scoring_run_create(edition=edition, judges=judges, kind=ScoringRun.Kind.GRADE)


# -- re-scoring after publish: an outbox, so a broker outage never fails a publish ------------


def rescore_request(*, edition: KeyEdition, user: Any = None) -> RescoreRequest:
    """Ask, in the caller's (publishing) transaction, for `edition`'s re-scoring (rule 8).

    Writes the edition's RescoreRequest and, once the transaction commits, sends
    `scoring.rescore_requested`; sending is `robust` (Django's on_commit): a broker that is
    down is logged, never raised into the publisher's request, and the periodic
    `scoring.sweep_rescore_requests` sends it again. A second call for the same edition
    returns the existing request.
    """
    request, _ = RescoreRequest.objects.get_or_create(
        edition=edition,
        defaults={"requested_by": user if getattr(user, "is_authenticated", False) else None},
    )
    edition_id = edition.pk
    transaction.on_commit(lambda: send_rescore_request(edition_id), robust=True)
    return request


def send_rescore_request(edition_id: int) -> None:
    """Send `scoring.rescore_requested(edition_id)` (RESCORE_REQUESTED_TASK) to the broker
    (raises if it is down, LookupError if no such task is registered)."""
    send_task(RESCORE_REQUESTED_TASK, edition_id)


def rescore_request_start(*, edition_id: int) -> ScoringRun | None:
    """Start the re-scoring a RescoreRequest waits for; return its run (None: none started).

    Takes the request under a row lock, so of two deliveries one starts the run and the
    other finds it started. Creates the run with the judge panel's judges that can grade
    (`rescore_after_publish`); when none can, the request is closed with a note and no run.
    Returns None when the edition has no waiting request.
    """
    with transaction.atomic():
        request = (
            RescoreRequest.objects.select_for_update()
            .filter(edition_id=edition_id, started_at__isnull=True)
            .first()
        )
        if request is None:
            return None
        run = rescore_after_publish(edition_id)
        request.started_at = timezone.now()
        request.run = run
        if run is None:
            request.note = "no judge of the judge panel (with no panel: no active judge) can grade this edition"
        request.save(update_fields=["started_at", "run", "note"])
    return run


def waiting_rescore_requests(*, older_than_seconds: float) -> list[int]:
    """Return the edition ids whose re-scoring request has waited longer than the given age."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    return list(
        RescoreRequest.objects.filter(started_at__isnull=True, requested_at__lt=cutoff)
        .order_by("requested_at")
        .values_list("edition_id", flat=True)
    )


# -- self-healing: the periodic heal_runs task ----------------------------------------------


def heal_runs(*, now: Any = None) -> dict[str, Any]:
    """Free dead leases and send stalled runs to the workers again; return what was done.

    Run by Celery beat every SNAGLIST_HEAL_SECONDS (`scoring.heal_runs`), so a run whose
    worker was killed, or whose task messages were lost (a broker restarted without
    persistence), finishes once a worker is back, with no operator action:
    - ledger.free_dead_leases: pair leases past their time are deleted and the calls they
      covered marked lost, so the next claim of those pairs does not wait;
    - judge limiter slots (Redis) held by processes that hold no live pair lease any more
      (dead: a live worker renews its leases while its calls are out) are freed
      (judges.limits.free_dead_slots), instead of waiting out their 300 s expiry;
    - every active run stalled (no worker report for tunables.stall_seconds(run mode), the run
      page's "stalled"; scoring.runs.selectors.run_stall) is sent again (`scoring.run_start`,
      after commit: its pending pairs go out in fresh chunks; duplicates of chunks still
      queued claim nothing twice), unless it was sent again since the last report and that
      re-send's deadline has not passed (tunables.resend_due_at: the stall time, doubled per
      unanswered re-send up to SNAGLIST_HEAL_BACKOFF_CAP_SECONDS). A re-send whose task was
      lost too (its worker killed as it took it, the broker restarted) is thus sent again,
      later each time, never given up (issue 26 item 3). Each send stamps `resent_at`, adds
      one to `resend_count` (shown on the runs pages) and counts `resends_unanswered` (from 1
      again after a report); the stamp is conditional on the `resent_at` read, so two
      heal_runs at once send a run once.
    Only pending and running runs are sent again: a run stopped at its budget (or cancelled,
    or finished) never restarts by itself; its budget reservations are zeroed when it is.
    Returns {"leases": n, "calls_lost": n, "items": n, "slots": n, "resent": [run ids]}. Each send is
    logged to the run's notes.
    """
    from scoring.runs.budget import clear_reservations

    now = now or timezone.now()
    done: dict[str, Any] = free_dead_leases(now)
    done["slots"] = free_dead_limiter_slots(now)
    last_report = Coalesce("reported_at", "created_at")
    stalled = (
        ScoringRun.objects.filter(status__in=ACTIVE_STATUSES)
        .annotate(last_report=last_report)
        .filter(
            Q(mode=ScoringRun.Mode.LIVE, last_report__lt=now - timedelta(seconds=stall_seconds()))
            | Q(
                mode=ScoringRun.Mode.BATCH,
                last_report__lt=now - timedelta(seconds=stall_seconds("batch")),
            )
        )
    )
    done["resent"] = []
    for run in stalled.order_by("pk"):
        due = resend_due_at(
            resent_at=run.resent_at,
            last_report=run.last_report,
            unanswered=run.resends_unanswered,
            mode=run.mode,
        )
        if due is not None and now < due:
            continue
        unanswered = 1 if due is None else max(1, run.resends_unanswered) + 1
        with transaction.atomic():
            stamped = ScoringRun.objects.filter(pk=run.pk, resent_at=run.resent_at).update(
                resent_at=now,
                resend_count=F("resend_count") + 1,
                resends_unanswered=unanswered,
                error=append_note(
                    run.error,
                    f"sent to the workers again at {timezone.localtime(now):%H:%M:%S}"
                    + (f" (re-send {unanswered} with no report since)" if unanswered > 1 else "")
                    + f": no worker had reported on it since "
                    f"{timezone.localtime(run.last_report):%H:%M:%S}",
                ),
            )
            if not stamped:  # another heal_runs sent it meanwhile
                continue
            # no chunk of a stalled run is alive: what its killed chunks reserved is free
            clear_reservations([run.pk])
            scoring_run_enqueue(run=run)
        done["resent"].append(run.pk)
    if done["resent"] or done["leases"] or done["slots"]:
        logger.warning("heal_runs: %s", done)
    return done
