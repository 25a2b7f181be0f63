"""Settling a chunk of a run's pairs: the one entry point of the grade_chunk task.

`settle_chunk` reads the chunk's rows once and sends its pairs down ONE path per kind:
- grade pairs: pairs already graded are settled as reused, and the rest graded by a
  transport, the judge event loop (aio_transport) when every backend supports it,
  threads otherwise; both claim through the ledger and settle through the batch settler;
- audit pairs: threads, each pair claimed, called and settled on its own
  (threads.audit_pair).
Above the transports; below the run lifecycle.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from questions.models import KeyEntry, Response
from scoring.models import AuditVerdict, Judge, RunItem, ScoringRun
from scoring.runs.services import backends as _backends
from scoring.runs.services.aio_transport import async_ready, grade_on_loop
from scoring.runs.services.backends import BrokenBackend
from scoring.runs.services.batch_mode import send_in_batches
from scoring.runs.services.batching import BatchSettler
from scoring.runs.services.ledger import grades_present, run_item_for
from scoring.runs.services.threads import audit_with_threads, grade_with_threads
from scoring.runs.services.work import ChunkOutcome, Finished, PairKey, WorkItem

logger = logging.getLogger(__name__)


def settle_chunk(
    *,
    run: ScoringRun,
    pairs: Sequence[Sequence[int | None]],
    final_attempt: bool = True,
    backends: dict[int, Any] | None = None,
    budget: Any = None,
    live: bool = False,
) -> ChunkOutcome:
    """Settle each pair of a chunk (grade or audit by the run's kind); stop if the run stops.

    pairs: [[response id or None, judge id, key entry id], ...] (JSON from the task).
    backends: {judge pk: backend} to use (and fill) instead of scoring.runs.services.backends'
    cache. budget: the run's budget check (scoring.runs.budget.RunBudget) or None: the pairs
    about to be sent are passed to its admit() first, which returns those that fit (all,
    or the first part of them near the cap: the others stay pending and outcome.stopped is
    set, as when none fits and the run is stopped at once); its release() follows their
    settling (and stops a run whose chunk was cut).
    Returns the ChunkOutcome: pairs held by another worker, or whose judge is
    unavailable while retries remain (`final_attempt` False), are returned in `busy` /
    `unavailable` for the task to send again later; a pair naming a missing row is logged
    and skipped. Inputs, items and existing grades are read once per chunk, not per pair.
    A batch-mode run's grade pairs go to their judges' vendor batches
    (batch_mode.send_in_batches) unless `live` (pairs sent again after a batch brought no
    reply for them, SNAGLIST_BATCH_FAILED_RETRY "live").
    Raises database errors (and a task's time limit) after settling what finished.
    """
    outcome = ChunkOutcome()
    keys = [PairKey(r, int(j), int(e)) for r, j, e in pairs]
    if not keys:
        return outcome
    found = RunItem.objects.filter(
        run=run,
        key_entry_id__in={k.key_entry_id for k in keys},
        judge_id__in={k.judge_id for k in keys},
    )
    if run.kind == ScoringRun.Kind.GRADE:
        found = found.filter(response_id__in={k.response_id for k in keys})
    items = {(i.response_id, i.judge_id, i.key_entry_id): i for i in found}
    judges = Judge.objects.in_bulk({k.judge_id for k in keys})
    entries = KeyEntry.objects.select_related("question", "citation_document").in_bulk(
        {k.key_entry_id for k in keys}
    )
    responses = Response.objects.in_bulk({k.response_id for k in keys if k.response_id is not None})
    present = _present_results(run, keys, judges)
    backends = {} if backends is None else backends
    work: list[WorkItem] = []
    for key in keys:
        response_id, judge_id, entry_id = key
        judge, entry = judges.get(judge_id), entries.get(entry_id)
        response = responses.get(response_id) if response_id is not None else None
        if judge is None or entry is None or (response_id is not None and response is None):
            logger.warning("run %s: pair %s refers to a missing row; skipped", run.pk, tuple(key))
            continue
        item = items.get(key) or run_item_for(run, response_id, judge_id, entry_id)
        if item.state != RunItem.State.PENDING:
            continue
        try:
            if judge_id not in backends:
                backends[judge_id] = _backends.judge_backend(judge)
        except Exception as exc:  # noqa: BLE001 - bad config fails the pair with its reason
            backends[judge_id] = BrokenBackend(exc)
        work.append(WorkItem(key, judge, entry, response, item, key not in present))
    kwargs = {"run": run, "work": work, "judges": judges, "backends": backends}
    if run.kind == ScoringRun.Kind.GRADE:
        return _grade_chunk(
            **kwargs, final_attempt=final_attempt, outcome=outcome, budget=budget, live=live
        )
    cut = False
    if budget is not None:
        absent = [w for w in work if w.absent]
        admitted = budget.admit(absent)
        cut = len(admitted) < len(absent)
        if absent and not admitted:
            outcome.stopped = True
            return outcome
        kept = {id(w) for w in admitted}
        kwargs["work"] = [w for w in work if not w.absent or id(w) in kept]
    try:
        return audit_with_threads(**kwargs, final_attempt=final_attempt, outcome=outcome)
    finally:
        if budget is not None:
            budget.release()
        outcome.stopped = outcome.stopped or cut


def _grade_chunk(
    *,
    run: ScoringRun,
    work: list[WorkItem],
    judges: dict[int, Judge],
    backends: dict[int, Any],
    final_attempt: bool,
    outcome: ChunkOutcome,
    budget: Any = None,
    live: bool = False,
) -> ChunkOutcome:
    """Grade a chunk's pending pairs, at most once each, in few statements.

    - pairs that already have a grade are settled as reused in one batch;
    - the rest go to a transport, which claims them in groups through the ledger, writes a
      "started" ledger row per call before it (a pair another run has in flight is left to
      it: returned in outcome.busy, and reused when its grade has landed) and hands the results to a BatchSettler
      (grade, ledger, counters in one transaction per batch), once the run's budget
      (if any) admitted them: near the cap only the first part that fits is sent and
      outcome.stopped is set (none, when not one fits);
    - on an error the pairs that finished before it are settled, then the error is raised;
    - the cross-run leases of the pairs settled are deleted once, when the chunk ends (one
      DELETE; BatchSettler's defer_leases), on an error too; a pair whose call was still in
      flight at an error keeps its lease (and its "started" row: lost when claimed again).
    """
    lock = threading.Lock()
    settler = BatchSettler(run, outcome, lock, defer_leases=True)
    try:
        result = _grade_pairs(
            run, work, judges, backends, final_attempt, outcome, settler, budget, live
        )
    except BaseException:
        try:  # the pairs settled before the error give their leases back too
            settler.free_leases()
        except Exception:  # noqa: BLE001 - the first error is the one to report
            logger.exception("run %s: freeing settled pairs' leases after an error failed", run.pk)
        raise
    settler.free_leases()
    return result


def _grade_pairs(
    run: ScoringRun,
    work: list[WorkItem],
    judges: dict[int, Judge],
    backends: dict[int, Any],
    final_attempt: bool,
    outcome: ChunkOutcome,
    settler: BatchSettler,
    budget: Any,
    live: bool,
) -> ChunkOutcome:
    """_grade_chunk's work, settling through `settler` (whose leases the caller frees)."""
    lock = settler.outcome_lock
    absent = []
    for w in work:
        if w.absent:
            absent.append(w)
        else:
            settler.add(
                Finished(w.item.pk, RunItem.State.REUSED, None, "", "grade already present")
            )
    settler.flush()
    if absent and run.mode == ScoringRun.Mode.BATCH and not live:
        absent = send_in_batches(
            run=run, work=absent, backends=backends, outcome=outcome, lock=lock
        )
    if not absent:
        return outcome
    cut = False
    if budget is not None:
        admitted = budget.admit(absent)
        cut = len(admitted) < len(absent)
        if not admitted:
            outcome.stopped = True
            return outcome
        absent = admitted
    try:
        return _send(run, absent, judges, backends, final_attempt, outcome, settler)
    finally:
        if budget is not None:
            budget.release()
        outcome.stopped = outcome.stopped or cut


def _send(
    run: ScoringRun,
    absent: list[WorkItem],
    judges: dict[int, Judge],
    backends: dict[int, Any],
    final_attempt: bool,
    outcome: ChunkOutcome,
    settler: BatchSettler,
) -> ChunkOutcome:
    """Send the grade pairs that lack a grade down one transport and settle them (the
    finished ones first when an error is raised)."""
    on_loop = async_ready(backends[w.key.judge_id] for w in absent)
    transport = grade_on_loop if on_loop else grade_with_threads
    try:
        transport(
            run=run,
            work=absent,
            judges=judges,
            backends=backends,
            final_attempt=final_attempt,
            outcome=outcome,
            settler=settler,
        )
    except BaseException:
        try:  # keep what was paid for: settle the pairs that finished before the error
            settler.flush()
        except Exception:  # noqa: BLE001 - the first error is the one to report
            logger.exception("run %s: settling finished pairs after an error failed", run.pk)
        raise
    settler.flush()
    return outcome


def _present_results(
    run: ScoringRun, keys: Sequence[PairKey], judges: dict[int, Judge]
) -> set[tuple]:
    """Return the chunk's pairs that already have a grade (or verdict) at the judge's current
    prompt version — a null grade only when this run wrote it: one query for the whole
    chunk instead of one per pair."""
    versions = {j.pk: j.prompt_version for j in judges.values()}
    wanted = set(keys)
    if run.kind == ScoringRun.Kind.AUDIT:
        rows = AuditVerdict.objects.filter(
            auditor_id__in=list(versions), key_entry_id__in={k.key_entry_id for k in keys}
        ).values_list("auditor_id", "key_entry_id", "prompt_version")
        return {(None, a, e) for a, e, v in rows if versions.get(a) == v} & wanted
    return grades_present(keys, versions, {run.pk})
