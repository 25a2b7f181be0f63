"""The ledger of judge calls and the run items' claims and settles: exactly-once, in the database.

- A pair is claimed by a conditional update of its RunItem (state pending, no live
  lease), so two deliveries of one task cannot both call the judge for it, AND by taking
  its cross-run lease (scoring.models.PairLease, unique per pair and prompt version), so
  two runs cannot both have it in flight: a pair another run holds is left to it, and the
  run waits and reuses the grade when it lands (`claim_group` for grade pairs,
  `start_call` for audit pairs). Settling or releasing a pair deletes its lease.
- The JudgeCall ledger row is written (outcome "started") BEFORE the backend is called
  (`started_rows`, `start_call`) and settled afterwards, in the same transaction as the
  grade and the run counters. A "started" row found when a pair is claimed again was in
  flight when its worker was killed: it is marked "lost" (sent, outcome unknown: never counted as paid; no grade) and the pair is
  called once more (`mark_lost_many`), whichever run claims it next (a claim that takes
  over a dead worker's expired pair lease marks that pair's unfinished calls lost).
- `finished_pair` turns a judge's answer or failure into what to settle; the batch
  settler (scoring.runs.services.batching) writes grade pairs, `settle_item` one audit pair.

Below the transports; above the work vocabulary, the backends and the vendor SQL.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F

from questions.models import KeyEntry, Response
from scoring.models import AuditVerdict, Grade, Judge, JudgeCall, PairLease, RunItem, ScoringRun
from scoring.runs.services.tunables import pair_lease_seconds
from scoring.runs.services.vendor_sql import claim_items, insert_rows, lease_pairs, mark_calls_lost
from scoring.runs.services.work import (
    CallRef,
    ChunkOutcome,
    Finished,
    PairBusy,
    PairUnavailable,
    WorkItem,
    append_note,
    is_database_error,
)

logger = logging.getLogger(__name__)


def claim_pairs(
    run_id: int, pairs: Sequence[tuple[RunItem, Judge]]
) -> tuple[dict[int, int], set[int]]:
    """Claim run items and their pairs across runs in one transaction; return (claimed,
    taken_over).

    pairs: (run item, its judge) each, all grade items or all audit items of run `run_id`.
    An item is claimed when its RunItem is pending with no live lease (attempts + 1) AND
    no other run's item holds its pair (response, judge, key entry, judge's prompt
    version) under a live PairLease. claimed: {item id: its claims so far, this one
    included}; taken_over: the claimed item ids whose pair lease was taken from an expired
    holder (a dead worker's; its unfinished call is lost). An item whose pair another run
    holds is left unclaimed, its RunItem as it was. Three statements at most.
    """
    if not pairs:
        return {}, set()
    lease = pair_lease_seconds()
    with transaction.atomic():
        claimed = claim_items([item.pk for item, _ in pairs], lease_seconds=lease)
        leased = lease_pairs(
            [
                (item.pk, item.response_id, judge.pk, item.key_entry_id, judge.prompt_version)
                for item, judge in pairs
                if item.pk in claimed
            ],
            run_id=run_id,
            lease_seconds=lease,
        )
        held_elsewhere = [pk for pk in claimed if pk not in leased]
        if held_elsewhere:
            RunItem.objects.filter(pk__in=held_elsewhere).update(
                lease_until=None, attempts=F("attempts") - 1
            )
    taken_over = {pk for pk, previous in leased.items() if previous is not None}
    return {pk: claimed[pk] for pk in leased}, taken_over


USAGE_COLUMNS = ("input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens")


def usage_columns(usage: Any) -> dict[str, int | None]:
    """Return the JudgeCall usage columns for a judges.Usage: {column: tokens or
    None}; empty for no usage (the columns stay NULL: unknown)."""
    if usage is None:
        return {}
    return {column: getattr(usage, column) for column in USAGE_COLUMNS}


def _free_leases(item_ids: Sequence[int]) -> None:
    """Delete the cross-run pair leases of these run items (settled or released)."""
    PairLease.objects.filter(item_id__in=list(item_ids)).delete()


def release_item(item: RunItem) -> None:
    """Give up the lease on a still pending item (and its pair's lease across runs) so that
    any worker of any run may claim it at once."""
    release_items([item.pk])


def release_items(item_ids: Sequence[int]) -> None:
    """release_item for several items at once: one UPDATE and one DELETE (none for an
    empty list)."""
    if not item_ids:
        return
    RunItem.objects.filter(pk__in=list(item_ids), state=RunItem.State.PENDING).update(
        lease_until=None
    )
    _free_leases(item_ids)


def free_pair_leases(item_ids: Sequence[int]) -> None:
    """Delete the cross-run pair leases of these run items (settled, or given back) in one
    DELETE; none for an empty list. A chunk frees the leases of the pairs it settled once,
    when it ends (scoring.runs.services.chunks), not per settle batch."""
    if item_ids:
        _free_leases(item_ids)


def settle_item(
    *,
    run: ScoringRun,
    item: RunItem,
    state: str,
    call: JudgeCall | CallRef | None = None,
    call_outcome: str = "",
    detail: str = "",
    usage: Any = None,
) -> bool:
    """Move one item from pending to `state` and bump the run counters; False if already settled.

    `call` (its ledger row) gets `call_outcome` and `detail` when both are given, and the
    tokens in `usage` (a judges.Usage; None leaves them unknown). Used for
    audit pairs (verdicts, reuses and failures); grade pairs are settled in batches
    (scoring.runs.services.batching).

    Runs inside the caller's transaction, so the grade, the ledger and the counters commit
    together or not at all.
    """
    moved = RunItem.objects.filter(pk=item.pk, state=RunItem.State.PENDING).update(
        state=state, lease_until=None, detail=detail[:2000]
    )
    _free_leases([item.pk])
    if call is not None and call_outcome:
        JudgeCall.objects.filter(pk=call.pk).update(
            outcome=call_outcome, detail=detail[:2000], **usage_columns(usage)
        )
    if not moved:
        return False
    bump: dict[str, Any] = {"done": F("done") + 1}
    if state in (RunItem.State.GRADED, RunItem.State.UNPARSED):
        bump["graded"] = F("graded") + 1
    if state == RunItem.State.UNPARSED:
        bump["unparsed"] = F("unparsed") + 1
    if state == RunItem.State.REUSED:
        bump["reused"] = F("reused") + 1
    if state == RunItem.State.FAILED:
        bump["failed"] = F("failed") + 1
    ScoringRun.objects.filter(pk=run.pk).update(**bump)
    return True


def run_item_for(
    run: ScoringRun, response_id: int | None, judge_id: int, key_entry_id: int
) -> RunItem:
    """Return the run's item for a pair, creating it (and counting it needed) if missing."""
    lookup = {"run": run, "judge_id": judge_id, "key_entry_id": key_entry_id}
    lookup["response_id"] = response_id
    item = RunItem.objects.filter(**lookup).first()
    if item is not None:
        return item
    try:
        with transaction.atomic():
            item = RunItem.objects.create(**lookup)
            ScoringRun.objects.filter(pk=run.pk).update(needed=F("needed") + 1)
    except IntegrityError:
        item = RunItem.objects.get(**lookup)
    return item


# The ledger's note on a call that was in flight when its worker died (sent, outcome unknown).
LOST_DETAIL = "in flight when its worker stopped; called again"


def _mark_lost_calls(*, judge: Judge, response_id: int | None, key_entry_id: int) -> int:
    """Mark earlier calls for this pair that never produced a grade as lost (sent, outcome unknown)."""
    return JudgeCall.objects.filter(
        judge=judge,
        response_id=response_id,
        key_entry_id=key_entry_id,
        prompt_version=judge.prompt_version,
        outcome__in=(JudgeCall.Outcome.STARTED, JudgeCall.Outcome.OK),
    ).update(outcome=JudgeCall.Outcome.LOST, detail=LOST_DETAIL)


def _graded_outcome(result: Any, judge: Judge) -> tuple[str, str, str]:
    """Return (item state, rationale, detail) for a judge's GradeResult: "unparsed" with a
    rationale saying why when it holds no grade (counted as unparsed, never as 0), and a note
    when the backend answered with another prompt version than the Judge row's."""
    state = RunItem.State.GRADED if result.grade is not None else RunItem.State.UNPARSED
    rationale = result.rationale or ""
    if result.grade is None and not rationale:
        rationale = f"unparsed: {result.parse_error or 'no grade found'}"
    detail = result.parse_error or ""
    if result.prompt_version and result.prompt_version != judge.prompt_version:
        detail = append_note(detail, f"backend prompt {result.prompt_version}")
    return state, rationale, detail


def start_call(
    run: ScoringRun, item: RunItem, judge: Judge, response: Response | None, key_entry: KeyEntry
) -> JudgeCall | None:
    """Claim `item` (and its pair across runs) and write its ledger row before the judge is
    asked; return the row, or None when the pair's verdict landed meanwhile (another run's
    call, settled between the caller's look and this claim: nothing to pay for; the caller
    settles the pair as reused).

    An earlier unfinished call of the same pair (a killed worker's) is marked lost first.
    Raises PairBusy when another worker (of this run or another) holds the pair. Used by
    the audit path; grade pairs are claimed in groups (claim_group) and their rows written
    by started_rows.
    """
    claimed, _ = claim_pairs(run.pk, [(item, judge)])
    if item.pk not in claimed:
        raise PairBusy(item.pk)
    if (
        response is None
        and AuditVerdict.objects.filter(
            key_entry=key_entry, auditor=judge, prompt_version=judge.prompt_version
        ).exists()
    ):
        return None
    _mark_lost_calls(
        judge=judge, response_id=response.pk if response else None, key_entry_id=key_entry.pk
    )
    return JudgeCall.objects.create(
        run=run,
        judge=judge,
        response=response,
        key_entry=key_entry,
        prompt_version=judge.prompt_version,
        outcome=JudgeCall.Outcome.STARTED,
    )


def judge_failed(
    run: ScoringRun, item: RunItem, call: JudgeCall | CallRef, detail: str, *, retryable: bool
) -> str:
    """Record a judge's failure on a claimed pair; return "failed" or raise PairUnavailable.

    retryable: the ledger row is marked "retry", the pair released for a later attempt and
    PairUnavailable raised; otherwise the pair and its ledger row are settled as failed
    with `detail` (one transaction).
    """
    if retryable:
        JudgeCall.objects.filter(pk=call.pk).update(
            outcome=JudgeCall.Outcome.RETRY, detail=detail[:2000]
        )
        RunItem.objects.filter(pk=item.pk).update(lease_until=None, detail=detail[:2000])
        _free_leases([item.pk])
        raise PairUnavailable(detail)
    with transaction.atomic():
        settle_item(
            run=run,
            item=item,
            state=RunItem.State.FAILED,
            call=call,
            call_outcome=JudgeCall.Outcome.FAILED,
            detail=detail,
        )
    return RunItem.State.FAILED


def claim_group(
    group: Sequence[WorkItem], outcome: ChunkOutcome, lock: threading.Lock
) -> list[WorkItem]:
    """Claim a group of grade work items; return the claimed items, in order.

    Their pending pairs are leased in this run and across runs with one transaction
    (claim_pairs); pairs leased elsewhere (another delivery, another run) go to
    outcome.busy (under `lock`), and so do pairs whose grade landed after the chunk looked
    (one SELECT after the claim: another run settled them; their leases are given back, and
    the chunk's next delivery settles them as reused without a call). The unfinished earlier
    calls of the pairs claimed before (by this run: a killed worker's, say) or taken over
    from a dead worker's expired lease (of any run) are marked lost.

    A pair claimed for the first time, from no holder, has no earlier unfinished call: the
    lookup, ~0.7 ms of PostgreSQL's CPU per claim of 32 and almost always empty, runs only
    for the re-claimed and taken-over ones."""
    claimed, taken_over = claim_pairs(group[0].item.run_id, [(w.item, w.judge) for w in group])
    mine = [w for w in group if w.item.pk in claimed]
    landed = graded_meanwhile(mine)
    if landed:
        _free_leases([w.item.pk for w in mine if w.key in landed])
        RunItem.objects.filter(pk__in=[w.item.pk for w in mine if w.key in landed]).update(
            lease_until=None
        )
        mine = [w for w in mine if w.key not in landed]
    with lock:
        outcome.busy.extend(list(w.key) for w in group if w.item.pk not in claimed)
        outcome.busy.extend(list(key) for key in landed)
    mark_lost_many(
        [
            (w.judge, w.key.response_id, w.key.key_entry_id)
            for w in mine
            if claimed[w.item.pk] > 1 or w.item.pk in taken_over
        ]
    )
    return mine


def grades_present(
    keys: Iterable[tuple[int | None, int, int]], versions: dict[int, str], run_ids: set[int]
) -> set[tuple[int | None, int, int]]:
    """Return the pairs of `keys` that have a Grade at their judge's prompt version
    (`versions`: {judge pk: current prompt version}): one SELECT.

    A null (unparsed) grade counts only when one of `run_ids` wrote it: another run's null
    grade is there to be asked again (issue 17; pairs.rescore_needed_pairs chose the pair
    because it has asks left). The one rule for "already graded" of a chunk's pairs.
    """
    wanted = set(keys)
    if not wanted:
        return set()
    rows = Grade.objects.filter(
        judge_id__in=list(versions),
        response_id__in={k[0] for k in wanted},
        key_entry_id__in={k[2] for k in wanted},
    ).values_list("response_id", "judge_id", "key_entry_id", "prompt_version", "grade", "run_id")
    return {
        (r, j, e)
        for r, j, e, v, g, run_id in rows
        if versions.get(j) == v and (g is not None or run_id in run_ids)
    } & wanted


def graded_meanwhile(work: Sequence[WorkItem]) -> set[tuple[int | None, int, int]]:
    """Return the keys of the grade work items graded by now (grades_present; none for an
    empty list)."""
    if not work:
        return set()
    return grades_present(
        (w.key for w in work),
        {w.judge.pk: w.judge.prompt_version for w in work},
        {w.item.run_id for w in work},
    )


def mark_lost_many(
    pairs: Sequence[tuple[Judge, int | None, int]], *, other_than_run: int | None = None
) -> int:
    """Mark the unfinished earlier calls ("started" or "ok" ledger rows at the judge's
    current prompt version) of several pairs lost; return how many rows were marked.

    pairs: (judge, response id or None, key entry id) each. other_than_run: a run id whose
    own calls are left as they are (None: every run's). On PostgreSQL, for grade pairs, ONE
    UPDATE (vendor_sql.mark_calls_lost); otherwise one SELECT (usually empty) and at most
    one UPDATE.
    """
    from django.db import connection

    if not pairs:
        return 0
    if connection.vendor == "postgresql" and all(r is not None for _, r, _ in pairs):
        return mark_calls_lost(
            [(j.pk, r, e, j.prompt_version) for j, r, e in pairs],
            detail=LOST_DETAIL,
            other_than_run=other_than_run,
        )
    want = {(j.pk, r, e, j.prompt_version) for j, r, e in pairs}
    calls = JudgeCall.objects.filter(
        judge_id__in={j.pk for j, _, _ in pairs},
        response_id__in={r for _, r, _ in pairs},
        key_entry_id__in={e for _, _, e in pairs},
        outcome__in=(JudgeCall.Outcome.STARTED, JudgeCall.Outcome.OK),
    )
    if other_than_run is not None:
        calls = calls.exclude(run_id=other_than_run)
    rows = calls.values_list("pk", "judge_id", "response_id", "key_entry_id", "prompt_version")
    ids = [pk for pk, j, r, e, v in rows if (j, r, e, v) in want]
    if not ids:
        return 0
    return JudgeCall.objects.filter(pk__in=ids).update(
        outcome=JudgeCall.Outcome.LOST, detail=LOST_DETAIL
    )


_STARTED_COLUMNS = (
    "run_id",
    "judge_id",
    "response_id",
    "key_entry_id",
    "prompt_version",
    "outcome",
    "detail",
)


def started_rows(run: ScoringRun, work: Sequence[WorkItem], *, mode: str = "") -> list[CallRef]:
    """Write the "started" ledger rows of grade pairs' calls in ONE INSERT (to commit before
    the calls go out); return references to them in `work`'s order. mode: "batch" for calls
    sent in a vendor batch (priced at batch prices, scoring.runs.costs); "" leaves the column's
    default (live)."""
    extra = (mode,) if mode else ()
    rows = [
        (
            run.pk,
            w.judge.pk,
            w.response.pk,
            w.key_entry.pk,
            w.judge.prompt_version,
            JudgeCall.Outcome.STARTED,
            "",
            *extra,
        )
        for w in work
    ]
    columns = _STARTED_COLUMNS + (("mode",) if mode else ())
    return [CallRef(pk) for pk in insert_rows(JudgeCall, columns, rows)]


def retry_later(pairs: Sequence[tuple[int, int]], detail: str) -> None:
    """Give back several claimed pairs whose calls brought no answer, to be asked again:
    the bulk form of judge_failed(retryable=True), without the raise. pairs: (run item id,
    ledger row id) each; the ledger rows become "retry" (not billed) with `detail`, the items
    lose their lease (still pending) and their pairs' cross-run leases are deleted. Three
    UPDATE/DELETE statements; runs inside the caller's transaction."""
    if not pairs:
        return
    JudgeCall.objects.filter(pk__in=[c for _, c in pairs]).update(
        outcome=JudgeCall.Outcome.RETRY, detail=detail[:2000]
    )
    items = [i for i, _ in pairs]
    RunItem.objects.filter(pk__in=items, state=RunItem.State.PENDING).update(
        lease_until=None, holder="", detail=detail[:2000]
    )
    _free_leases(items)


def finished_pair(
    run: ScoringRun,
    work: WorkItem,
    call: JudgeCall | CallRef,
    final_attempt: bool,
    *,
    result: Any = None,
    error: BaseException | None = None,
) -> Finished:
    """Turn a judge's answer (`result`, a GradeResult) or its failure (`error`) on a claimed
    grade pair into what to settle for it (the batch settler writes it).

    JudgeUnavailable while retries remain: the pair is released, its ledger row marked
    "retry", and PairUnavailable raised. A bad configuration or a backend bug fails the pair
    with the reason. A database error releases the pair and is raised again.
    """
    from judges import JudgeConfigError, JudgeUnavailable

    judge, key_entry, response, item = work.judge, work.key_entry, work.response, work.item
    failed = RunItem.State.FAILED
    if isinstance(error, JudgeUnavailable):
        if not final_attempt:
            judge_failed(run, item, call, str(error), retryable=True)  # raises PairUnavailable
        return Finished(item.pk, failed, call.pk, JudgeCall.Outcome.FAILED, str(error))
    if isinstance(error, JudgeConfigError):
        return Finished(
            item.pk, failed, call.pk, JudgeCall.Outcome.FAILED, f"configuration: {error}"
        )
    if error is not None:
        if is_database_error(error):
            release_item(item)
            raise error
        # A backend bug fails this pair, not the chunk.
        logger.error("judge %s raised on response %s", judge.judge_id, response.pk, exc_info=error)
        return Finished(
            item.pk, failed, call.pk, JudgeCall.Outcome.FAILED, f"{type(error).__name__}: {error}"
        )

    state, rationale, detail = _graded_outcome(result, judge)
    grade = {
        "response_id": response.pk,
        "judge_id": judge.pk,
        "key_entry_id": key_entry.pk,
        "prompt_version": judge.prompt_version,
        "grade": result.grade,
        "rationale": rationale,
        "flag": bool(result.flag),
        "flag_reason": result.flag_reason or "",
        "raw_output": result.raw_output or "",
        "stop_reason": (result.stop_reason or "")[:50],
        "run_id": run.pk,
    }
    return Finished(
        item.pk, state, call.pk, JudgeCall.Outcome.OK, detail, grade, getattr(result, "usage", None)
    )


def free_dead_leases(now: Any) -> dict[str, int]:
    """Free the leases whose time has run out (their holder stopped renewing them: a killed
    worker's) and mark the calls they covered lost; return {"leases": pair leases deleted,
    "calls_lost": ledger rows marked lost, "items": run items unleased}.

    A pair lease past its `lease_until` is deleted together with (one transaction) the
    "started" ledger rows of its run for its pair, which become "lost" (sent, outcome unknown, no grade:
    LOST_DETAIL); pending run items past their lease are unleased, so the run page no longer
    counts them as being graded. Called by the periodic heal_runs (scoring.runs.services.runs).
    A worker alive but past its lease still settles its call (outcome set by id).
    """
    dead = list(
        PairLease.objects.filter(lease_until__lt=now).values_list(
            "pk", "run_id", "judge_id", "response_id", "key_entry_id", "prompt_version"
        )
    )
    lost = 0
    with transaction.atomic():
        deleted, _ = PairLease.objects.filter(
            pk__in=[row[0] for row in dead], lease_until__lt=now
        ).delete()
        for _, run_id, judge_id, response_id, key_entry_id, version in dead:
            lost += JudgeCall.objects.filter(
                run_id=run_id,
                judge_id=judge_id,
                response_id=response_id,
                key_entry_id=key_entry_id,
                prompt_version=version,
                outcome=JudgeCall.Outcome.STARTED,
            ).update(outcome=JudgeCall.Outcome.LOST, detail=LOST_DETAIL)
        items = RunItem.objects.filter(state=RunItem.State.PENDING, lease_until__lt=now).update(
            lease_until=None
        )
    return {"leases": deleted, "calls_lost": lost, "items": items}


def live_holders(now: Any) -> set[str]:
    """Return the processes ("host:pid") that hold a live lease on a pending pair now: the
    workers still at work (their heartbeat renews their leases). Two queries."""
    items = RunItem.objects.filter(state=RunItem.State.PENDING, lease_until__gte=now)
    pairs = PairLease.objects.filter(lease_until__gte=now)
    return set(items.values_list("holder", flat=True).distinct()) | set(
        pairs.values_list("holder", flat=True).distinct()
    )


def free_dead_limiter_slots(now: Any) -> int:
    """Free the judge limiter slots of processes without a live pair lease; return how many.

    judges.limits.free_dead_slots over every judge's lease set, a holder alive when
    it holds a live lease on a pending pair now (live_holders). Called by heal_runs and by
    every live worker's heartbeat (RunHeartbeat's `reclaim`), so a killed worker's slots
    free up even while every worker thread waits on them (issue 26 item 3). No Redis: 0.
    """
    from judges.limits import free_dead_slots
    from scoring.runs.services.backends import redis_client

    client = redis_client()
    if client is None:
        return 0
    alive = live_holders(now)
    return free_dead_slots(client, lambda holder: holder in alive)
