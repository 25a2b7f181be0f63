"""A worker's reports on a run: its heartbeat while a task of the run executes.

`RunHeartbeat` stamps ScoringRun.reported_at when a task of the run begins and then every
SNAGLIST_WORKER_HEARTBEAT_SECONDS from a thread of its own until the task ends, so the run
page can tell a run that moves slowly (a slow judge: reports keep coming) from one that no
worker is working on (a killed worker, lost task messages: the reports stop). Readers:
scoring.runs.selectors.run_stall.

Each beat also renews the leases this process holds on the run's pairs (RunItem and
PairLease rows whose holder is this process, work.lease_holder), so a pair lease can be
short (SNAGLIST_PAIR_LEASE_SECONDS): a live worker keeps its pairs however long a judge
call takes, and a killed worker's pairs free up one lease after its last beat. Beside the
backends; above vendor_sql.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from types import TracebackType

from django.utils import timezone

from scoring.models import PairLease, RunItem, ScoringRun
from scoring.runs.services.tunables import heartbeat_seconds, pair_lease_seconds, stall_seconds
from scoring.runs.services.work import lease_holder

logger = logging.getLogger(__name__)


def report_run(run_id: int) -> None:
    """Stamp the run's reported_at with the current time (one UPDATE)."""
    ScoringRun.objects.filter(pk=run_id).update(reported_at=timezone.now())


def renew_leases(run_id: int) -> int:
    """Extend, to a full lease from now, the live leases this process holds on the run's
    pending pairs: its RunItem leases and their PairLease rows. Returns how many run items
    were renewed. A lease already run out is left to whoever takes it over.

    The PairLease rows of pairs already settled (a chunk deletes them once, when it ends:
    batching.BatchSettler's defer_leases) are not renewed: their grade is there, so a
    lease of theirs running out lets another run see the grade and reuse it; renewing them
    rewrote up to a chunk's worth of rows per beat."""
    now = timezone.now()
    until = now + timedelta(seconds=pair_lease_seconds())
    mine = {"run_id": run_id, "holder": lease_holder(), "lease_until__gte": now}
    pending = RunItem.State.PENDING
    renewed = RunItem.objects.filter(state=pending, **mine).update(lease_until=until)
    PairLease.objects.filter(item__state=pending, **mine).update(lease_until=until)
    return renewed


class RunHeartbeat:
    """Report on a run now, then every heartbeat_seconds() report again and renew this
    process's leases on the run's pairs (renew_leases), until the `with` block ends.

    threaded=False reports once on entry only. The thread holds its
    own database connection, closed when it stops; a failed report is logged and retried at
    the next beat, never raised into the task. `reclaim(now)`, when given, runs from the same
    thread once every stall_seconds(): the caller passes ledger.free_dead_limiter_slots, so
    a live worker frees a killed worker's judge slots even when every task thread is waiting
    for them and heal_runs is queued behind those tasks (issue 26 item 3's chaos run).
    """

    def __init__(
        self,
        run_id: int,
        *,
        threaded: bool = True,
        reclaim: Callable[[datetime], int] | None = None,
    ) -> None:
        self.run_id = run_id
        self.threaded = threaded
        self.reclaim = reclaim
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> RunHeartbeat:
        report_run(self.run_id)
        if self.threaded:
            self.thread = threading.Thread(
                target=self._beat, name=f"run{self.run_id}-heartbeat", daemon=True
            )
            self.thread.start()
        return self

    def _beat(self) -> None:
        from django.db import connection

        last_reclaim = time.monotonic()
        try:
            while not self.stop.wait(heartbeat_seconds()):
                try:
                    report_run(self.run_id)
                    renew_leases(self.run_id)
                    if self.reclaim and time.monotonic() - last_reclaim >= stall_seconds():
                        last_reclaim = time.monotonic()
                        if freed := self.reclaim(timezone.now()):
                            logger.warning("run %s: freed %d dead slot(s)", self.run_id, freed)
                except Exception:  # noqa: BLE001 - a missed beat is retried at the next
                    logger.warning("run %s: heartbeat failed", self.run_id, exc_info=True)
        finally:
            connection.close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
