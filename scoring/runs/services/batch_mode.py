"""Batch mode (issue 20): a batch-mode run's grade pairs sent through their judge's vendor
batch API (judges.batch), settled through the live path's ledger and settler.

Exactly once, step by step:
1. Intent. In ONE transaction a chunk claims a judge's pairs exactly as the live path does
   (ledger.claim_group: RunItem and cross-run PairLease), writes a JudgeBatch (status
   "preparing", its pairs {custom_id: [run item id, ledger row id]}), the pairs' "started"
   ledger rows (mode "batch") and hands the pairs' leases to the batch (holder
   "batch:<pk>", batch_lease_seconds). A crash before the commit leaves nothing behind.
2. Submit. The request lines (built by the live backend's own builder) go to the vendor,
   tagged with the batch's tag: OpenAI batch metadata, and the prefix of every custom_id.
   The sender holds the batch's row lock meanwhile and the poller skips locked batches, so
   a batch being sent is never taken for one lost in a crash.
3. Record. The vendor's batch id is stored, status "submitted".
   A crash between 2 and 3 leaves a "preparing" batch without id. The poller first looks
   for it at the vendor by its tag (BatchAPI.find) and adopts what it finds; it sends the
   batch again only when the vendor has none with that tag. For Anthropic, whose batches
   carry no metadata, a recent batch still running cannot be told apart, so the decision
   waits until it has ended. A batch is therefore paid once, unless the vendor's listing
   leaves out a batch it accepted (its list is newest first; we read 200 back).
4. Poll (`poll_batches`, the `scoring.poll_batches` beat task). A batch whose run was
   cancelled is cancelled at the vendor (BatchAPI.cancel, once: while the vendor's status
   is still one a cancel can stop, as retrieved at that poll; a refused cancel is noted and
   the poll goes on); it then ends with the requests the vendor had run, which are
   settled like any others (they are billed); the rest are released, not queued again, and
   a batch of a cancelled run that was never confirmed sent is not sent. Every open batch's leases
   are renewed and its run reported on (heal_runs leaves its pairs alone, and the run page
   does not call the run stalled); the batch is retrieved, and an ended one is settled
   under a row lock on its JudgeBatch, in ONE transaction that ends with its status
   "settled". Each succeeded result goes through the live path's parser
   (ChatBackend.grade_result) and ledger.finished_pair into a BatchSettler: the grade
   INSERT skips a pair graded meanwhile, items move only from pending, and ledger rows are
   updated by id with their usage. So a batch polled twice, its results fetched twice or
   settled again after a crash stores each grade once, and each request has one ledger
   row: it is paid once.
5. Requests that brought no reply (errored, expired, cancelled, or missing from the
   results). Their ledger rows become "retry" (not billed) and the pairs still held by
   the batch are released and sent again, live or in the next batch
   (SNAGLIST_BATCH_FAILED_RETRY). A pair claimed BATCH_MAX_ATTEMPTS times is settled failed.
   A vendor that refuses a whole batch (a bad request: JudgeConfigError) fails its pairs,
   as the live path does. A cut-off reply (max_tokens) is settled as unparsed; the
   unparsed-retry rule of issue 17 asks it again in a later run.
Between the transports (this sits beside them) and the batch settler.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from questions.models import KeyEntry, Response
from scoring.models import Judge, JudgeBatch, JudgeCall, PairLease, RunItem, ScoringRun
from scoring.runs.services import backends as _backends
from scoring.runs.services.backends import grading_input
from scoring.runs.services.batching import BatchSettler
from scoring.runs.services.heartbeat import report_run
from scoring.runs.services.ledger import claim_group, finished_pair, retry_later, started_rows
from scoring.runs.services.tunables import (
    BATCH_MAX_ATTEMPTS,
    batch_failed_retry,
    batch_lease_seconds,
)
from scoring.runs.services.work import (
    CallRef,
    ChunkOutcome,
    Finished,
    PairKey,
    WorkItem,
    append_note,
)

logger = logging.getLogger(__name__)

OPEN_BATCH = (JudgeBatch.Status.PREPARING, JudgeBatch.Status.SUBMITTED)
# The ledger detail's end for a request a cancelled run's batch brought no reply for: given
# back, not billed, and not sent again (runs_selectors.ledger_summary counts these apart).
NOT_SENT_AGAIN = "not sent again: its run was cancelled"


def batch_holder(batch_pk: int) -> str:
    """Return the lease holder name of a batch's pairs: "batch:<pk>" (RunItem.holder and
    PairLease.holder), renewed by the poller rather than by a worker's heartbeat."""
    return f"batch:{batch_pk}"


def _batch_api(backend: Any) -> Any:
    from judges.batch import batch_api_for

    return batch_api_for(backend)


# -- the chunk side: claim, record intent, submit -------------------------------------------


def send_in_batches(
    *,
    run: ScoringRun,
    work: Sequence[WorkItem],
    backends: dict[int, Any],
    outcome: ChunkOutcome,
    lock: threading.Lock,
) -> list[WorkItem]:
    """Send a batch-mode chunk's ungraded pairs in one vendor batch per judge; return the
    pairs to grade live (judges whose backend has no batch API: the reference judge).

    Pairs already held by a live batch lease (a run sent again while its batch is out) are
    left to that batch: neither claimed nor counted busy. Pairs another worker or run
    holds go to outcome.busy (ledger.claim_group). A vendor unreachable at submission
    leaves the batch "preparing" for the poller to send; see the module docstring."""
    now = timezone.now()
    live: list[WorkItem] = []
    groups: dict[int, tuple[Any, list[WorkItem]]] = {}
    for w in work:
        judge_id = w.key.judge_id
        if judge_id not in groups:
            groups[judge_id] = (_batch_api(backends.get(judge_id)), [])
        api, group = groups[judge_id]
        if api is None:
            live.append(w)
        elif not (
            w.item.holder.startswith("batch:") and w.item.lease_until and w.item.lease_until > now
        ):
            group.append(w)
    scale = list(run.benchmark.grade_scale or [0, 1, 2])
    for api, group in groups.values():
        if api is None or not group:
            continue
        batch, mine = _record_intent(run, api, group, outcome, lock)
        if batch is not None:
            outcome.batched += len(mine)
            _submit(batch, api, mine, scale)
    return live


def _record_intent(
    run: ScoringRun,
    api: Any,
    group: list[WorkItem],
    outcome: ChunkOutcome,
    lock: threading.Lock,
) -> tuple[JudgeBatch | None, list[WorkItem]]:
    """Claim a judge's pairs and write their JudgeBatch and "started" ledger rows in one
    transaction; return (the batch, the claimed pairs), or (None, []) when none was claimed."""
    from judges.batch import custom_id

    judge = group[0].judge
    with transaction.atomic():
        mine = claim_group(group, outcome, lock)
        if not mine:
            return None, []
        batch = JudgeBatch.objects.create(
            run=run,
            judge=judge,
            prompt_version=judge.prompt_version,
            vendor=api.vendor,
            requests=len(mine),
        )
        calls = started_rows(run, mine, mode=ScoringRun.Mode.BATCH)
        batch.pairs = {
            custom_id(
                batch.tag, w.key.response_id, judge.pk, w.key.key_entry_id, judge.prompt_version
            ): [w.item.pk, call.pk]
            for w, call in zip(mine, calls, strict=True)
        }
        batch.save(update_fields=["pairs"])
        _hold(batch.pk, [w.item.pk for w in mine])
    return batch, mine


def _hold(batch_pk: int, item_ids: list[int]) -> None:
    """Lease these pending items and their pair leases to the batch for batch_lease_seconds."""
    until = timezone.now() + timedelta(seconds=batch_lease_seconds())
    holder = batch_holder(batch_pk)
    RunItem.objects.filter(pk__in=item_ids, state=RunItem.State.PENDING).update(
        holder=holder, lease_until=until
    )
    PairLease.objects.filter(item_id__in=item_ids).update(holder=holder, lease_until=until)


def _submit(batch: JudgeBatch, api: Any, work: Sequence[WorkItem], scale: list) -> None:
    """Send the batch's requests to the vendor and record its id (steps 2 and 3), under the
    batch's row lock, unless it has been sent meanwhile. A vendor
    unreachable leaves the batch "preparing" with a note (the poller sends it); a refusal
    fails its pairs (_refused)."""
    from judges import JudgeConfigError, JudgeUnavailable

    ids = {item: cid for cid, (item, _call) in batch.pairs.items()}
    requests = [api.request(ids[w.item.pk], grading_input(w, scale)) for w in work]
    # The batch's row lock is held while the vendor is asked, so the poller (which skips
    # locked batches) cannot take a batch being sent for one lost in a crash and send it
    # again; a crash ends the transaction and frees the row for the poller's look-up.
    with transaction.atomic():
        unsent = JudgeBatch.objects.select_for_update().filter(pk=batch.pk, vendor_batch_id="")
        if not unsent.exists():
            return  # sent meanwhile (by the poller)
        try:
            state = api.submit(requests, batch.tag)
        except JudgeUnavailable as exc:
            _note(batch.pk, f"not sent yet: {exc}")
            return
        except JudgeConfigError as exc:
            _refused(batch, str(exc))
            return
        record_submitted(batch.pk, state)


def record_submitted(batch_pk: int, state: Any) -> None:
    """Store the vendor's id and state of a batch it has accepted (step 3), unless one is
    stored already. state: a judges.batch.BatchState."""
    JudgeBatch.objects.filter(pk=batch_pk, vendor_batch_id="").update(
        vendor_batch_id=state.batch_id,
        status=JudgeBatch.Status.SUBMITTED,
        submitted_at=timezone.now(),
        vendor_status=state.vendor_status,
        counts=state.counts,
    )


def _note(batch_pk: int, note: str) -> None:
    batch = JudgeBatch.objects.filter(pk=batch_pk).values_list("detail", flat=True).first()
    JudgeBatch.objects.filter(pk=batch_pk).update(detail=append_note(batch or "", note)[-2000:])


def _refused(batch: JudgeBatch, reason: str) -> None:
    """The vendor refused the whole batch (a bad request): fail its pairs with the reason,
    as the live path fails a pair on a configuration error; the batch becomes "failed"."""
    with transaction.atomic():
        settler = BatchSettler(batch.run, ChunkOutcome(), threading.Lock())
        detail = f"configuration: batch refused: {reason}"
        for item_id, call_id in batch.pairs.values():
            settler.add(
                Finished(item_id, RunItem.State.FAILED, call_id, JudgeCall.Outcome.FAILED, detail)
            )
        settler.flush()
        JudgeBatch.objects.filter(pk=batch.pk).update(
            status=JudgeBatch.Status.FAILED, detail=detail[:2000], ended_at=timezone.now()
        )


# -- the poller --------------------------------------------------------------------------------


@dataclass
class PollReport:
    """What one poll did: polled (batches looked at), settled (batch ids settled),
    runs (run ids with pairs settled: the task closes those that are done), again
    ({"live"|"batch": {run id: [[response id, judge id, key entry id], ...]}}: pairs to send
    again), notes (vendor trouble, asked again at the next poll)."""

    polled: int = 0
    settled: list[int] = field(default_factory=list)
    runs: set[int] = field(default_factory=set)
    again: dict[str, dict[int, list[list[int | None]]]] = field(
        default_factory=lambda: {"live": {}, "batch": {}}
    )
    notes: list[str] = field(default_factory=list)


def poll_batches() -> PollReport:
    """Look at every open batch once (poll_batch); return the PollReport. Vendor errors of
    one batch (unreachable, refused) are noted on it and leave it for the next poll;
    database errors are raised."""
    from judges import JudgeError

    report = PollReport()
    for pk in (
        JudgeBatch.objects.filter(status__in=OPEN_BATCH).order_by("pk").values_list("pk", flat=True)
    ):
        try:
            poll_batch(pk, report)
        except JudgeError as exc:
            _note(pk, f"poll: {exc}")
            report.notes.append(f"batch {pk}: {exc}")
    return report


def renew_batch_leases(batch: JudgeBatch) -> int:
    """Extend the leases of the batch's pending pairs (run items and pair leases held by
    it) to a full batch lease from now and report on its run; return the items renewed."""
    until = timezone.now() + timedelta(seconds=batch_lease_seconds())
    holder = batch_holder(batch.pk)
    renewed = RunItem.objects.filter(holder=holder, state=RunItem.State.PENDING).update(
        lease_until=until
    )
    PairLease.objects.filter(holder=holder).update(lease_until=until)
    report_run(batch.run_id)
    return renewed


def poll_batch(pk: int, report: PollReport) -> None:
    """Poll one open batch: renew its leases, then under its row lock send it (a
    "preparing" one: found at the vendor by its tag, or sent again unless its run was
    cancelled), or retrieve it (cancel it at the vendor instead, once, when its run was
    cancelled) and settle it once it has ended. A batch another poller holds is skipped."""
    batch = JudgeBatch.objects.select_related("run__benchmark", "judge").filter(pk=pk).first()
    if batch is None or batch.status not in OPEN_BATCH:
        return
    renew_batch_leases(batch)
    with transaction.atomic():
        locked = (
            JudgeBatch.objects.select_for_update(skip_locked=True)
            .filter(pk=pk, status__in=OPEN_BATCH)
            .first()
        )
        if locked is None:
            return
        report.polled += 1
        api = _batch_api(_backends.judge_backend(batch.judge))
        if api is None or api.vendor != locked.vendor:
            _give_back(
                locked, batch, {}, f"judge {batch.judge.judge_id} has no batch API now", report
            )
            return
        if not locked.vendor_batch_id:
            _recover(locked, batch, api, report)
            return
        state = api.retrieve(locked.vendor_batch_id)
        if batch.run.status == ScoringRun.Status.CANCELLED and state.vendor_status in (
            api.CANCELLABLE
        ):
            state = _cancel_at_vendor(pk, api, state)
        JudgeBatch.objects.filter(pk=pk).update(
            polls=F("polls") + 1, vendor_status=state.vendor_status, counts=state.counts
        )
        if state.ended:
            _settle(locked, batch, api, state, report)


def _cancel_at_vendor(pk: int, api: Any, state: Any) -> Any:
    """Cancel a cancelled run's batch at the vendor; return its state after the cancel, or
    `state` (just retrieved) when the vendor refuses it (it ended meanwhile, say): the poll
    then goes on with what it retrieved, so a refused cancel never keeps a batch open."""
    from judges import JudgeConfigError

    try:
        state = api.cancel(state.batch_id)
    except JudgeConfigError as exc:
        _note(pk, f"its run was cancelled; the vendor refused the cancel: {exc}")
        return state
    _note(pk, f"its run was cancelled: cancel sent to {api.vendor}")
    return state


def _recover(locked: JudgeBatch, batch: JudgeBatch, api: Any, report: PollReport) -> None:
    """A batch recorded but never confirmed sent (step 3 missing): adopt the vendor's batch
    with its tag, wait while the vendor cannot tell, or send it again (its pairs still held)."""
    known = set(
        JudgeBatch.objects.filter(vendor=locked.vendor)
        .exclude(vendor_batch_id="")
        .values_list("vendor_batch_id", flat=True)
    )
    found = api.find(locked.tag, locked.created_at.timestamp(), known)
    if found is False:
        _note(locked.pk, "a recent vendor batch may be this one: looking again once it ends")
        return
    if found:  # adopted; a cancelled run's batch is cancelled at the next poll
        record_submitted(locked.pk, api.retrieve(found))
        return
    if batch.run.status == ScoringRun.Status.CANCELLED:
        _give_back(locked, batch, {}, "not sent: its run was cancelled", report)
        return
    work = _held_work(locked, batch.judge)
    if not work:  # every pair was settled elsewhere meanwhile: nothing to send
        _give_back(locked, batch, {}, "not sent: its pairs were settled elsewhere", report)
        return
    scale = list(batch.run.benchmark.grade_scale or [0, 1, 2])
    locked.run = batch.run
    _submit(locked, api, work, scale)


def _held_work(batch: JudgeBatch, judge: Judge) -> list[WorkItem]:
    """Return the batch's pairs still pending and held by it, as WorkItems with their rows."""
    items = RunItem.objects.filter(
        pk__in=[item for item, _ in batch.pairs.values()],
        holder=batch_holder(batch.pk),
        state=RunItem.State.PENDING,
    ).select_related("response", "key_entry__question", "key_entry__citation_document")
    return [
        WorkItem(
            PairKey(i.response_id, i.judge_id, i.key_entry_id),
            judge,
            i.key_entry,
            i.response,
            i,
            True,
        )
        for i in items
    ]


def _settle(
    locked: JudgeBatch, batch: JudgeBatch, api: Any, state: Any, report: PollReport
) -> None:
    """Settle an ended batch in the caller's transaction (step 4): each succeeded result
    through the live path's parser, ledger.finished_pair and a BatchSettler; the others
    given back (_give_back); the batch marked settled with its counts by result kind."""
    if state.error:  # the vendor failed the whole batch (OpenAI: its validation)
        _give_back(locked, batch, {}, f"failed at the vendor: {state.error}", report)
        JudgeBatch.objects.filter(pk=locked.pk).update(vendor_status=state.vendor_status)
        return
    results = {r.custom_id: r for r in api.results(state)}
    run, judge = batch.run, batch.judge
    items = RunItem.objects.in_bulk([item for item, _ in locked.pairs.values()])
    scale = list(run.benchmark.grade_scale or [0, 1, 2])
    settler = BatchSettler(run, ChunkOutcome(), threading.Lock())
    missing: dict[str, str] = {}
    for cid, (item_id, call_id) in locked.pairs.items():
        item, result = items.get(item_id), results.get(cid)
        if item is None:
            continue
        if result is None or result.kind != "succeeded":
            kind = result.kind if result else "without result"
            missing[cid] = kind + (f": {result.error}" if result and result.error else "")
            continue
        # finished_pair reads only the pks of the key entry and response of a grade pair.
        work = WorkItem(
            PairKey(item.response_id, item.judge_id, item.key_entry_id),
            judge,
            KeyEntry(pk=item.key_entry_id),
            Response(pk=item.response_id),
            item,
            True,
        )
        grade = api.grade(result, scale)
        settler.add(finished_pair(run, work, CallRef(call_id), True, result=grade))
    settler.flush()
    _give_back(locked, batch, missing, "", report, items=items)
    kinds = Counter(r.kind for r in results.values() if r.custom_id in locked.pairs)
    kinds["without result"] = sum(1 for cid in locked.pairs if cid not in results)
    now = timezone.now()
    JudgeBatch.objects.filter(pk=locked.pk).update(
        status=JudgeBatch.Status.SETTLED,
        settled_at=now,
        ended_at=now,
        vendor_status=state.vendor_status,
        counts={k: n for k, n in kinds.items() if n},
    )
    report.settled.append(locked.pk)
    report.runs.add(run.pk)


def _give_back(
    locked: JudgeBatch,
    batch: JudgeBatch,
    missing: dict[str, str],
    reason: str,
    report: PollReport,
    *,
    items: dict[int, RunItem] | None = None,
) -> None:
    """Give back the batch's requests that brought no reply (step 5): `missing` {custom_id:
    why}, or every request with `reason` (which also closes the batch as failed). Their
    ledger rows become "retry" (not billed); a pair still held by the batch is released and
    queued in `report.again` (live or batch, SNAGLIST_BATCH_FAILED_RETRY; live when the
    judge has no batch API), or settled failed once claimed BATCH_MAX_ATTEMPTS times; the
    pairs of a cancelled run are released and not queued."""
    if reason:
        missing = dict.fromkeys(locked.pairs, reason)
    if not missing:
        return
    if items is None:
        items = RunItem.objects.in_bulk([locked.pairs[cid][0] for cid in missing])
    where = "live" if reason else batch_failed_retry()
    holder, run = batch_holder(locked.pk), batch.run
    cancelled = ScoringRun.objects.filter(pk=run.pk, status=ScoringRun.Status.CANCELLED).exists()
    settler = BatchSettler(run, ChunkOutcome(), threading.Lock())
    again: dict[str, list[tuple[int, int]]] = {}  # released pairs by ledger detail
    sent = 0
    for cid, why in missing.items():
        item_id, call_id = locked.pairs[cid]
        item = items.get(item_id)
        detail = f"batch {locked.vendor_batch_id or locked.tag}: request {why}"
        if item is None or item.holder != holder or item.state != RunItem.State.PENDING:
            JudgeCall.objects.filter(pk=call_id).update(
                outcome=JudgeCall.Outcome.RETRY, detail=detail[:2000]
            )
        elif cancelled:  # released, not billed, not asked again: the run was cancelled
            again.setdefault(f"{detail}; {NOT_SENT_AGAIN}", []).append((item_id, call_id))
        elif item.attempts >= BATCH_MAX_ATTEMPTS:
            detail += f"; given up after {item.attempts} attempts"
            settler.add(
                Finished(item_id, RunItem.State.FAILED, call_id, JudgeCall.Outcome.FAILED, detail)
            )
        else:
            # one statement set per distinct reason, not per pair (a whole batch may expire)
            again.setdefault(f"{detail}; sent again ({where})", []).append((item_id, call_id))
            report.again[where].setdefault(run.pk, []).append(item.pair())
            sent += 1
    settler.flush()
    for detail, pairs in again.items():
        retry_later(pairs, detail)
    if reason:
        JudgeBatch.objects.filter(pk=locked.pk).update(
            status=JudgeBatch.Status.FAILED, detail=reason[:2000], ended_at=timezone.now()
        )
        report.runs.add(run.pk)
    logger.info(
        "batch %s: %d request(s) without reply, %d sent again",
        locked.pk,
        len(missing),
        sent,
    )
