"""The event-loop transport: a chunk's grade calls in flight on the judge event loop.

Grade runs whose judges are openai/anthropic backends (over their own transport) call them
as coroutines on the process's judge loop (judges.aio), while the task's thread
does all the database work in batches. Beside the threaded transport
(scoring.runs.services.threads), above the batch settler and the ledger.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from scoring.models import Judge, ScoringRun
from scoring.runs.services.backends import grading_input
from scoring.runs.services.batching import BatchSettler
from scoring.runs.services.ledger import claim_group, finished_pair, release_items, started_rows
from scoring.runs.services.tunables import (
    ASYNC_POLL_SECONDS,
    CHUNK_CLAIM_MAX,
    STOP_CHECK_SECONDS,
    judge_window,
)
from scoring.runs.services.work import ChunkOutcome, PairUnavailable, WorkItem, run_stopped


def async_ready(backends: Iterable[Any]) -> bool:
    """Return True when every one of `backends` can grade on the judge event loop (has a
    true `supports_async`: the openai and anthropic backends); the reference judge, a
    refused configuration (BrokenBackend) and test doubles take the threaded transport."""
    return all(getattr(backend, "supports_async", False) for backend in backends)


def grade_on_loop(
    *,
    run: ScoringRun,
    work: list[WorkItem],
    judges: dict[int, Judge],
    backends: dict[int, Any],
    final_attempt: bool,
    outcome: ChunkOutcome,
    settler: BatchSettler,
) -> None:
    """Grade a chunk's pairs that lack a grade (`work`) with their calls in flight on the
    judge event loop; finished pairs go to `settler`, what happened is counted in `outcome`.

    judges / backends: {judge pk: Judge row / its backend (async_ready)}.
    This thread does all the database work, in batches, and the loop only the HTTP:
    - each judge has up to 2 x `judge_window` calls handed to the loop for this chunk: the
      window's worth in flight (its Redis limiter still caps it across workers, and the
      backend's semaphore per process) and as many again queued behind them, so a freed slot
      is taken at once by a call already on the loop;
    - calls are handed over in batches of at least half a window (or whatever is left, or at
      once when fewer than a window are on the loop), and this thread wakes when a batch has
      finished or every ASYNC_POLL_SECONDS, not per call;
    - the chunk's pairs are claimed all at once before the first call (ledger.claim_group:
      one conditional UPDATE of the run items and one INSERT of their cross-run leases for
      up to CHUNK_CLAIM_MAX pairs; pairs leased elsewhere go to outcome.busy), and the
      unfinished earlier calls of those claimed before marked lost; the heartbeat keeps
      the leases alive while the calls go out;
    - every call still gets its own "started" ledger row, committed before the call is
      handed over; the rows of the calls handed over together are one INSERT;
    - pairs whose judge is unavailable while retries remain go to outcome.unavailable;
    - the run is checked for a cancel every STOP_CHECK_SECONDS: then nothing more is
      submitted, the calls on the loop are waited for and settled (a queued one still goes
      out: it was recorded as started), and pairs claimed but not handed over are released
      (one UPDATE and one DELETE).
    On an error here (database, soft time limit) the calls still in flight are cancelled
    (their pairs keep lease and "started" row and count as lost when claimed again) and the
    error is raised; the caller flushes `settler`.
    """
    _LoopChunk(
        run=run,
        work=work,
        judges=judges,
        backends=backends,
        final_attempt=final_attempt,
        outcome=outcome,
        settler=settler,
    ).grade()


class _LoopChunk:
    """The state of one chunk on the event loop: per judge, pairs pending (until the
    chunk's claim), ready (claimed, not handed over) and in flight; calls finished and not
    yet settled."""

    def __init__(
        self,
        *,
        run: ScoringRun,
        work: list[WorkItem],
        judges: dict[int, Judge],
        backends: dict[int, Any],
        final_attempt: bool,
        outcome: ChunkOutcome,
        settler: BatchSettler,
    ) -> None:
        self.run = run
        self.backends = backends
        self.final_attempt = final_attempt
        self.outcome = outcome
        self.settler = settler
        self.scale = list(run.benchmark.grade_scale or [0, 1, 2])
        self.pending: dict[int, deque] = {}
        for w in work:
            self.pending.setdefault(w.key.judge_id, deque()).append(w)
        pending = self.pending
        self.slots = {jid: judge_window(judges[jid], len(q)) for jid, q in pending.items()}
        self.window = {jid: min(len(pending[jid]), 2 * self.slots[jid]) for jid in pending}
        self.batch = {jid: max(1, self.slots[jid] // 2) for jid in pending}
        self.ready: dict[int, deque] = {jid: deque() for jid in pending}
        self.in_flight = dict.fromkeys(pending, 0)
        # appended on the loop's thread, popped here (deque operations are atomic)
        self.done: deque = deque()
        self.wake = threading.Event()
        self.wake_after = min(self.batch.values(), default=1)
        self.tasks: list = []

    def _claim_all(self) -> None:
        """Claim every pending pair of the chunk, CHUNK_CLAIM_MAX per claim_group, into
        `ready` (in order, per judge)."""
        group = [w for q in self.pending.values() for w in q]
        for q in self.pending.values():
            q.clear()
        for start in range(0, len(group), CHUNK_CLAIM_MAX):
            part = group[start : start + CHUNK_CLAIM_MAX]
            for w in claim_group(part, self.outcome, self.settler.outcome_lock):
                self.ready[w.key.judge_id].append(w)

    def _finished(self, item: tuple) -> None:  # on the loop's thread
        self.done.append(item)
        if len(self.done) >= self.wake_after:
            self.wake.set()

    def _submit(self) -> None:
        from judges import aio

        launch: list[WorkItem] = []
        for jid in self.pending:
            room = self.window[jid] - self.in_flight[jid]
            if room <= 0 or (room < self.batch[jid] and self.in_flight[jid] >= self.slots[jid]):
                continue
            take = min(room, len(self.ready[jid]))
            launch.extend(self.ready[jid].popleft() for _ in range(take))
            self.in_flight[jid] += take
        if not launch:
            return
        calls = started_rows(self.run, launch)
        coros = [self.backends[w.key.judge_id].agrade(grading_input(w, self.scale)) for w in launch]
        aio.start_all(
            coros,
            lambda i, task, launch=launch, calls=calls: self._finished((launch[i], calls[i], task)),
            self.tasks,
        )

    def _settle(self, w: WorkItem, call: Any, task: Any) -> None:
        self.in_flight[w.key.judge_id] -= 1
        error = None if task.cancelled() else task.exception()
        try:
            self.settler.add(
                finished_pair(
                    self.run,
                    w,
                    call,
                    self.final_attempt,
                    result=None if error else task.result(),
                    error=error,
                )
            )
        except PairUnavailable:
            self.outcome.unavailable.append(list(w.key))

    def grade(self) -> None:
        """Submit, wait and settle until every pair is settled or the run stopped."""
        from judges import aio

        stopped = False
        next_check = time.monotonic() + STOP_CHECK_SECONDS
        try:
            self._claim_all()
            while True:
                if not stopped:
                    self._submit()
                if not any(self.in_flight.values()):
                    if stopped or not any(self.ready.values()):
                        break
                    continue
                self.wake.wait(ASYNC_POLL_SECONDS)
                self.wake.clear()
                while self.done:
                    self._settle(*self.done.popleft())
                self.settler.flush_if_due()
                if not stopped and time.monotonic() >= next_check:
                    next_check = time.monotonic() + STOP_CHECK_SECONDS
                    stopped = run_stopped(self.run)
                    self.outcome.stopped = stopped
        except BaseException:
            aio.cancel_all(self.tasks)
            raise
        finally:
            release_items([w.item.pk for q in self.ready.values() for w in q])
