"""The threaded transport: a chunk's pairs graded (or audited) by a bounded set of threads.

Judge calls are I/O-bound, so a chunk's pairs are settled by its task's thread plus helper
threads (up to each judge's `concurrency`, within the process-wide SNAGLIST_JUDGE_THREADS),
each holding its own database connection, closed when the chunk is done. Grade pairs take
this path when a backend cannot grade on the judge event loop (the reference judge, a
refused configuration, test doubles); audit pairs always do. Beside the event-loop
transport (scoring.runs.services.aio_transport), above the batch settler and the ledger.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import transaction

from questions.models import KeyEntry
from scoring.models import AuditVerdict, Judge, JudgeCall, RunItem, ScoringRun
from scoring.runs.services import backends as _backends
from scoring.runs.services.backends import audit_input, grading_input
from scoring.runs.services.batching import BatchSettler
from scoring.runs.services.ledger import (
    claim_group,
    finished_pair,
    judge_failed,
    release_item,
    run_item_for,
    settle_item,
    start_call,
    started_rows,
)
from scoring.runs.services.tunables import (
    CLAIM_BATCH,
    PAIRS_PER_THREAD,
    chunk_threads_cap,
    judge_window,
)
from scoring.runs.services.work import (
    ChunkOutcome,
    Finished,
    PairBusy,
    PairUnavailable,
    WorkItem,
    is_database_error,
    run_stopped,
)

logger = logging.getLogger(__name__)

_THREAD_PERMITS: threading.BoundedSemaphore | None = None
_THREAD_PERMITS_LOCK = threading.Lock()


def _thread_permits() -> threading.BoundedSemaphore:
    global _THREAD_PERMITS
    with _THREAD_PERMITS_LOCK:
        if _THREAD_PERMITS is None:
            _THREAD_PERMITS = threading.BoundedSemaphore(max(0, chunk_threads_cap()))
        return _THREAD_PERMITS


def wanted_threads(work: Sequence[WorkItem], judges: dict[int, Judge]) -> int:
    """Return how many pairs of this chunk to grade at once: each judge's `concurrency` (its
    Redis limiter caps it across workers anyway), 1 for the offline reference backend; 1
    when the work must stay on this connection (inside a transaction, or on SQLite)."""
    from django.db import connection

    if connection.in_atomic_block or connection.vendor == "sqlite":
        return 1
    per_judge: dict[int, int] = {}
    for w in work:
        per_judge[w.key.judge_id] = per_judge.get(w.key.judge_id, 0) + 1
    total = sum(
        1 if judges[judge_id].backend == "reference" else judge_window(judges[judge_id], n)
        for judge_id, n in per_judge.items()
    )
    return max(1, total)


class ChunkThreads:
    """Extra threads that help the chunk's own thread settle its pairs.

    At most `wanted_threads(work, judges) - 1` helpers, each taking one of the process's
    permits (SNAGLIST_JUDGE_THREADS caps threads, and so database connections, per worker),
    and one only while the chunk has PAIRS_PER_THREAD pending pairs per thread, so a
    helper's database connection serves several pairs. `target` is the drain loop a helper
    runs; its connection is closed when it ends. Only the chunk's own thread calls top_up.
    """

    def __init__(
        self,
        run: ScoringRun,
        work: Sequence[WorkItem],
        judges: dict[int, Judge],
        target: Callable[[], None],
    ) -> None:
        self.wanted = wanted_threads(work, judges) if len(work) > 1 else 1
        self.permits = _thread_permits()
        self.pool = (
            ThreadPoolExecutor(max_workers=self.wanted - 1, thread_name_prefix=f"run{run.pk}-chunk")
            if self.wanted > 1
            else None
        )
        self.count = 0
        self._target = target

    def _helper(self) -> None:
        from django.db import connection

        try:
            self._target()
        finally:
            self.permits.release()
            connection.close()

    def top_up(self, pending: int) -> None:
        """Add helpers while `pending` pairs justify them and the process has permits."""
        while (
            self.pool is not None
            and self.count < self.wanted - 1
            and pending >= PAIRS_PER_THREAD * (self.count + 1)
            and self.permits.acquire(blocking=False)
        ):
            self.count += 1
            self.pool.submit(self._helper)

    def shutdown(self) -> None:
        """Wait for the helpers to finish."""
        if self.pool is not None:
            self.pool.shutdown(wait=True)


def _grade_one(
    run: ScoringRun, work: WorkItem, backend: Any, final_attempt: bool, scale: list
) -> Finished:
    """Write the pair's ledger row, call its judge and return what to settle (no settling here).

    Raises PairUnavailable (pair released, ledger row "retry") while retries remain, and
    database errors (pair released).
    """
    call = started_rows(run, [work])[0]
    try:
        result = backend.grade(grading_input(work, scale))
    except Exception as exc:  # noqa: BLE001 - classified by finished_pair
        return finished_pair(run, work, call, final_attempt, error=exc)
    return finished_pair(run, work, call, final_attempt, result=result)


def audit_pair(
    *,
    run: ScoringRun,
    key_entry: KeyEntry,
    auditor: Judge,
    backend: Any = None,
    final_attempt: bool = True,
    item: RunItem | None = None,
) -> str:
    """Ask one auditor for a verdict on one key entry, at most once; return the item's state.

    Returns the item's state: graded / unparsed / reused / failed. Raises PairBusy when
    another worker holds the pair, PairUnavailable when the auditor was unavailable and
    `final_attempt` is False (the caller retries later), and database errors (pair
    released); never raises for the auditor's own failure. The auditor sees question, key
    answer and citation only. The ledger row is written before the call and settled with
    the verdict in one transaction.
    """
    from judges import JudgeConfigError, JudgeUnavailable

    item = item or run_item_for(run, None, auditor.pk, key_entry.pk)
    if item.state != RunItem.State.PENDING:
        return item.state
    if AuditVerdict.objects.filter(
        key_entry=key_entry, auditor=auditor, prompt_version=auditor.prompt_version
    ).exists():
        with transaction.atomic():
            settle_item(
                run=run, item=item, state=RunItem.State.REUSED, detail="verdict already present"
            )
        return RunItem.State.REUSED
    call = start_call(run, item, auditor, None, key_entry)
    if call is None:  # another run's verdict landed between the look above and the claim
        with transaction.atomic():
            settle_item(
                run=run, item=item, state=RunItem.State.REUSED, detail="verdict already present"
            )
        return RunItem.State.REUSED
    try:
        backend = backend or _backends.judge_backend(auditor)
        result = backend.audit(audit_input(key_entry))
    except JudgeUnavailable as exc:
        return judge_failed(run, item, call, str(exc), retryable=not final_attempt)
    except JudgeConfigError as exc:
        return judge_failed(run, item, call, f"configuration: {exc}", retryable=False)
    except Exception as exc:  # noqa: BLE001
        if is_database_error(exc):
            release_item(item)
            raise
        logger.exception("auditor %s raised on key entry %s", auditor.judge_id, key_entry.pk)
        return judge_failed(run, item, call, f"{type(exc).__name__}: {exc}", retryable=False)

    state = RunItem.State.GRADED if result.verdict is not None else RunItem.State.UNPARSED
    rationale = result.rationale or ""
    if result.verdict is None and not rationale:
        rationale = f"unparsed: {result.parse_error or 'no verdict found'}"
    with transaction.atomic():
        _, created = AuditVerdict.objects.get_or_create(
            key_entry=key_entry,
            auditor=auditor,
            prompt_version=auditor.prompt_version,
            defaults={
                "verdict": result.verdict,
                "rationale": rationale,
                "raw_output": result.raw_output or "",
                "run": run,
            },
        )
        if not created:
            state = RunItem.State.REUSED
        settle_item(
            run=run,
            item=item,
            state=state,
            call=call,
            call_outcome=JudgeCall.Outcome.OK,
            detail=result.parse_error or "",
            usage=result.usage,
        )
    return state


def grade_with_threads(
    *,
    run: ScoringRun,
    work: list[WorkItem],
    judges: dict[int, Judge],
    backends: dict[int, Any],
    final_attempt: bool,
    outcome: ChunkOutcome,
    settler: BatchSettler,
) -> None:
    """Grade a chunk's pairs that lack a grade (`work`) on threads; finished pairs go to
    `settler`, and what is settled is counted in `outcome`.

    judges / backends: {judge pk: Judge row / its backend}. Each thread claims up to
    CLAIM_BATCH pairs with one conditional UPDATE (pairs leased elsewhere go to
    outcome.busy; the unfinished earlier calls of pairs this run claimed before are marked
    lost), then for each pair writes its "started" ledger row, calls the judge and hands
    the result to `settler`. Pairs whose judge is unavailable while retries remain go to
    outcome.unavailable. Every 10th pair checks for a cancelled run (outcome.stopped; the
    pairs claimed and not called are released). The first error of any thread (database,
    time limit) is raised here after the threads end; `settler` is then flushed by the
    caller.
    """
    lock = settler.outcome_lock
    scale = list(run.benchmark.grade_scale or [0, 1, 2])
    queue = list(reversed(work))
    taken = [0]
    stop = threading.Event()
    errors: list[BaseException] = []
    threads = ChunkThreads(run, work, judges, lambda: drain(main=False))

    def next_group() -> list[WorkItem]:
        with lock:
            share = max(1, min(CLAIM_BATCH, len(queue) // (threads.count + 1)))
            return [queue.pop() for _ in range(min(share, len(queue)))]

    def drain(*, main: bool) -> None:
        try:
            while not stop.is_set():
                if main:
                    threads.top_up(len(queue))
                group = next_group()
                if not group:
                    return
                mine = claim_group(group, outcome, lock)
                for i, w in enumerate(mine):
                    with lock:
                        n = taken[0]
                        taken[0] += 1
                    if stop.is_set() or (n and n % 10 == 0 and run_stopped(run)):
                        with lock:
                            outcome.stopped = True
                        stop.set()
                        for rest in mine[i:]:
                            release_item(rest.item)
                        return
                    try:
                        settler.add(
                            _grade_one(run, w, backends[w.key.judge_id], final_attempt, scale)
                        )
                    except PairUnavailable:
                        with lock:
                            outcome.unavailable.append(list(w.key))
                    except BaseException:
                        for rest in mine[i + 1 :]:
                            release_item(rest.item)
                        raise
        except BaseException as exc:  # re-raised by the chunk's own thread below
            with lock:
                errors.append(exc)
            stop.set()

    try:
        drain(main=True)
    finally:
        threads.shutdown()
    if errors:
        raise errors[0]


def audit_with_threads(
    *,
    run: ScoringRun,
    work: list[WorkItem],
    judges: dict[int, Judge],
    backends: dict[int, Any],
    final_attempt: bool,
    outcome: ChunkOutcome,
) -> ChunkOutcome:
    """Audit a chunk's pending pairs on threads, each claimed, called and settled on its own
    (audit_pair); return `outcome` with what was settled, busy, unavailable or stopped.

    judges / backends: {auditor pk: Judge row / its backend}. Every 10th pair checks for a
    cancelled run. The first error of any thread (database, time limit) is raised here
    after the threads end.
    """
    lock = threading.Lock()
    queue = list(reversed(work))
    taken = [0]
    stop = threading.Event()
    errors: list[BaseException] = []

    def settle_one(w: WorkItem) -> None:
        try:
            state = audit_pair(
                run=run,
                key_entry=w.key_entry,
                auditor=w.judge,
                backend=backends[w.key.judge_id],
                final_attempt=final_attempt,
                item=w.item,
            )
            with lock:
                outcome.count(state)
        except PairBusy:
            with lock:
                outcome.busy.append(list(w.key))
        except PairUnavailable:
            with lock:
                outcome.unavailable.append(list(w.key))

    threads = ChunkThreads(run, work, judges, lambda: drain(main=False))

    def drain(*, main: bool) -> None:
        while not stop.is_set():
            if main:
                threads.top_up(len(queue))
            with lock:
                if not queue:
                    return
                n = taken[0]
                taken[0] += 1
                w = queue.pop()
            if n and n % 10 == 0 and run_stopped(run):
                with lock:
                    outcome.stopped = True
                stop.set()
                return
            try:
                settle_one(w)
            except BaseException as exc:  # re-raised by the chunk's own thread below
                with lock:
                    errors.append(exc)
                stop.set()
                return

    try:
        drain(main=True)
    finally:
        threads.shutdown()
    if errors:
        raise errors[0]
    return outcome
