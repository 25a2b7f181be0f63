"""Celery tasks of re-scoring and key-audit runs: ids in, services do the work.

- `scoring.run_start(run_id)`: mark the run running and fan its pending pairs out in
  chunks of SNAGLIST_RESCORE_CHUNK (500; see scoring.runs.services.tunables) to
  `scoring.grade_chunk`. Sending it again is how a run resumes (`rescore --resume`):
  settled pairs are skipped.
- `scoring.grade_chunk(run_id, pairs)`: settle each pair ([response id or null, judge id,
  key entry id]) by the run's kind, once the run's budget (scoring.runs.budget) admits the
  chunk's calls (refused: the run stops, "stopped at budget"); the chunk that settles
  the last pair closes the run (DB counters, no chord: we have no result backend).
- `scoring.rescore_requested(edition_id)`: start a published edition's re-scoring (the
  publish wrote a RescoreRequest; this creates the run). `scoring.sweep_rescore_requests`
  (Celery beat, every minute) sends it again for requests still waiting, e.g. because the
  broker was down when the edition was published.
- `scoring.heal_runs()` (Celery beat, every 30 s): frees dead pair leases and sends stalled
  runs (no worker report for 3 heartbeats) to the workers again.

Every task is acks_late (settings), idempotent, and bounded by time limits below the
broker's visibility timeout. Retries: transient database errors (autoretry, backoff),
pairs whose judge stayed unavailable (backoff, capped, then failed), pairs leased by
another worker or another run (every BUSY_RECHECK_SECONDS, until the holder settles them -
their grades are then reused - or its lease runs out).
"""

from __future__ import annotations

import logging
import random
import time
from datetime import timedelta

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.db import InterfaceError, OperationalError
from django.db.models import Max
from django.utils import timezone

from engine.chunking import chunk_bounds
from scoring.models import Judge, PairLease, RunItem, ScoringRun
from scoring.runs import services
from scoring.runs.budget import RunBudget
from scoring.runs.services.heartbeat import report_run
from scoring.runs.services.tunables import max_chunk_retries, retry_base_seconds

logger = logging.getLogger(__name__)

TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError)
CHUNK_SOFT_LIMIT = 1500
CHUNK_HARD_LIMIT = 1560
# A chunk whose pairs are in flight elsewhere (another run) looks again this often.
BUSY_RECHECK_SECONDS = 2.0


@shared_task(
    name=services.RUN_START_TASK,
    bind=True,
    acks_late=True,
    autoretry_for=TRANSIENT_DB_ERRORS,
    retry_backoff=2,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=10,
    soft_time_limit=600,
    time_limit=660,
)
def run_start(self, run_id: int) -> None:
    """Start (or resume) a run: send its pending pairs out in chunks; close it if none remain."""
    run = ScoringRun.objects.select_related("benchmark").filter(pk=run_id).first()
    if run is None:
        logger.warning("scoring.run_start: run %s does not exist", run_id)
        return
    if not services.scoring_run_begin(run=run):
        logger.info("scoring.run_start: run %s is %s, nothing to do", run_id, run.status)
        return
    report_run(run_id)  # a worker has the run
    pairs = services.pending_pairs(run=run)
    for start, end in chunk_bounds(len(pairs), services.chunk_size()):
        grade_chunk.delay(run_id, pairs[start:end])
    services.scoring_run_finish(run=run)


@shared_task(
    name="scoring.grade_chunk",
    bind=True,
    acks_late=True,
    autoretry_for=TRANSIENT_DB_ERRORS,
    retry_backoff=2,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=None,  # bounded by max_chunk_retries() below; autoretry keeps its own cap
    soft_time_limit=CHUNK_SOFT_LIMIT,
    time_limit=CHUNK_HARD_LIMIT,
)
def grade_chunk(
    self,
    run_id: int,
    pairs: list[list[int | None]],
    judge_retries: int | None = None,
    live: bool = False,
) -> dict[str, int]:
    """Settle a chunk of a run's pairs; return {state: count} for this delivery.

    judge_retries: how often the chunk was sent again because a judge was unavailable
    (None: the delivery's retry count, as sent by run_start). Pairs leased elsewhere (a
    duplicate delivery, another run with the pair in flight) are sent again until their
    holder settles or its lease runs out, without counting towards the judge's retry cap.
    live: grade through the live APIs even in a batch-mode run (pairs a vendor batch brought
    no reply for, sent again live by `poll_batches`).
    """
    run = ScoringRun.objects.select_related("benchmark", "edition").filter(pk=run_id).first()
    if run is None:
        logger.warning("scoring.grade_chunk: run %s does not exist", run_id)
        return {}
    if run.status not in services.ACTIVE_STATUSES:
        return {}
    retries = (self.request.retries or 0) if judge_retries is None else judge_retries
    if self.request.is_eager:
        return _settle_eagerly(run, pairs, retries, live)
    final = retries >= max_chunk_retries()
    try:
        with services.RunHeartbeat(run_id, reclaim=services.free_dead_limiter_slots):
            outcome = services.settle_chunk(
                run=run, pairs=pairs, final_attempt=final, budget=RunBudget(run), live=live
            )
    except SoftTimeLimitExceeded:
        # Settled pairs are skipped next time; the one interrupted keeps its lease and its
        # "started" ledger row, so it is counted as lost when it is claimed again.
        logger.warning("scoring.grade_chunk: run %s chunk hit its time limit; re-sent", run_id)
        raise self.retry(countdown=1, max_retries=None) from None
    services.scoring_run_finish(run=run)
    again = outcome.unavailable + outcome.busy
    if again and not outcome.stopped:
        raise self.retry(
            args=(run_id, again, retries + 1 if outcome.unavailable else retries),
            countdown=_countdown(run_id, outcome, retries),
            max_retries=None,
        )
    return outcome.settled


def _settle_eagerly(
    run: ScoringRun, pairs: list, retries: int, live: bool = False
) -> dict[str, int]:
    """Eager mode (no broker, the zero set-up default): retry unavailable pairs in a loop.

    Celery's eager retry raises instead of re-sending, and there is no countdown, so the
    retry cap is applied here in a loop that sleeps judge_backoff(retries) (capped at
    EAGER_BACKOFF_CAP_SECONDS) between rounds: a judge answering 529 is not asked again
    back to back. The run's retries are bounded in time too (issue 30 item 15): once
    SNAGLIST_EAGER_RETRY_SECONDS have gone by since its first wait (the waits and the
    rounds; over all its chunks), a last wait is cut to what is left and the next round is
    the final one, its unavailable pairs failed. Each wait is logged (a warning: on the
    console of `rescore --wait`) with the judges waited for, why and until when. Leased
    pairs are left pending.
    """
    from django.db import connection

    settled: dict[str, int] = {}
    again = pairs
    # The heartbeat renews this process's pair leases from a thread of its own: not inside
    # the caller's transaction (the thread could not see its rows) nor on SQLite (one writer).
    threaded = connection.vendor != "sqlite" and not connection.in_atomic_block
    out_of_time = False
    while again:
        final = out_of_time or retries >= max_chunk_retries()
        with services.RunHeartbeat(run.pk, threaded=threaded):
            outcome = services.settle_chunk(
                run=run, pairs=again, final_attempt=final, budget=RunBudget(run), live=live
            )
        for state, n in outcome.settled.items():
            settled[state] = settled.get(state, 0) + n
        if outcome.busy:
            logger.warning(
                "scoring.grade_chunk: run %s: %d pair(s) leased elsewhere; resume later",
                run.pk,
                len(outcome.busy),
            )
        if outcome.stopped:
            break
        if outcome.unavailable:  # back off, as a worker's retry countdown would
            wait, out_of_time = _eager_wait(run, outcome.unavailable, retries)
            eager_sleep(wait)
        again, retries = outcome.unavailable, retries + 1
    services.scoring_run_finish(run=run)
    return settled


# {(run id, its creation time): (time.monotonic() of its first eager wait, seconds waited
# since)}: the clock of SNAGLIST_EAGER_RETRY_SECONDS, one per run over its chunks (eager:
# all in this process); the creation time keeps a reused id (a test database) apart.
_EAGER_RETRY_CLOCKS: dict[tuple, tuple[float, float]] = {}


def _eager_wait(run: ScoringRun, unavailable: list, retries: int) -> tuple[float, bool]:
    """Return (seconds to wait before the next round, whether that round is the last one
    the run's SNAGLIST_EAGER_RETRY_SECONDS allow) and log what the wait is for: the
    judges, their latest reason (the ledger's "retry" rows), the retry and when the pairs
    are given up. Time used = the larger of the seconds since the run's first wait and
    the seconds waited (eager_sleep may be replaced, as the tests do)."""
    from scoring.models import JudgeCall
    from scoring.runs.services.tunables import eager_retry_seconds

    now = time.monotonic()
    clock = (run.pk, run.created_at)
    started, waited = _EAGER_RETRY_CLOCKS.get(clock, (now, 0.0))
    left = max(0.0, eager_retry_seconds() - max(now - started, waited))
    wait = min(judge_backoff(retries, cap=EAGER_BACKOFF_CAP_SECONDS), left)
    last = wait >= left or retries + 1 >= max_chunk_retries()
    _EAGER_RETRY_CLOCKS[clock] = (started, waited + wait)
    judges = dict(
        Judge.objects.filter(pk__in={p[1] for p in unavailable}).values_list("pk", "judge_id")
    )
    reason = (
        JudgeCall.objects.filter(run=run, outcome=JudgeCall.Outcome.RETRY)
        .order_by("-id")
        .values_list("detail", flat=True)
        .first()
    )
    until = timezone.localtime() + timedelta(seconds=wait)
    logger.warning(
        "run %s: waiting %.0f s for judge %s (unavailable: %s) before asking its %d pair(s) "
        "again at %s; %s",
        run.pk,
        wait,
        ", ".join(sorted(judges.values())),
        (reason or "no reason given")[:200],
        len(unavailable),
        f"{until:%H:%M:%S}",
        "that is the last try: pairs still unavailable then fail (SNAGLIST_EAGER_RETRY_SECONDS "
        f"{eager_retry_seconds():g} s or SNAGLIST_RESCORE_MAX_RETRIES {max_chunk_retries()})"
        if last
        else f"retry {retries + 1} of at most {max_chunk_retries()}, within "
        f"{eager_retry_seconds():g} s in all (SNAGLIST_EAGER_RETRY_SECONDS)",
    )
    return wait, wait >= left


# In eager mode the caller (a command, a web request) waits out the backoff itself.
EAGER_BACKOFF_CAP_SECONDS = 60.0
# The eager loop's sleep; a test replaces it to record the waits instead of sleeping.
eager_sleep = time.sleep


def judge_backoff(retries: int, cap: float = 600.0) -> float:
    """Seconds to wait before a chunk's pairs go to an unavailable judge again, after
    `retries` earlier retries: "equal jitter" exponential backoff, uniform in
    [ceiling / 2, ceiling] with ceiling = min(cap, SNAGLIST_RESCORE_RETRY_BASE_SECONDS x
    2**retries) (AWS Architecture Blog, "Exponential Backoff And Jitter", 2015)."""
    ceiling = min(cap, retry_base_seconds() * (2**retries))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def _countdown(run_id: int, outcome: services.ChunkOutcome, retries: int) -> float:
    """Seconds before the chunk is sent again: the judge's backoff when a judge was
    unavailable; for pairs leased elsewhere, until the last of their leases (this run's or
    another run's) runs out, but at most BUSY_RECHECK_SECONDS, since a live holder usually
    settles well before its lease ends."""
    delays = [0.0]
    if outcome.unavailable:
        delays.append(judge_backoff(retries))
    if outcome.busy:
        pairs = {
            "key_entry_id__in": {p[2] for p in outcome.busy},
            "judge_id__in": {p[1] for p in outcome.busy},
        }
        mine = RunItem.objects.filter(run_id=run_id, state=RunItem.State.PENDING, **pairs)
        until = max(
            [
                t
                for t in (
                    mine.aggregate(last=Max("lease_until"))["last"],
                    PairLease.objects.filter(**pairs).aggregate(last=Max("lease_until"))["last"],
                )
                if t is not None
            ],
            default=None,
        )
        wait = (until - timezone.now()).total_seconds() if until else 0.0
        delays.append(min(BUSY_RECHECK_SECONDS, max(0.5, wait + 0.5)))
    return max(delays)


@shared_task(
    name=services.RESCORE_REQUESTED_TASK,
    acks_late=True,
    autoretry_for=TRANSIENT_DB_ERRORS,
    retry_backoff=5,
    max_retries=5,
    soft_time_limit=600,
    time_limit=660,
)
def rescore_requested(edition_id: int) -> int | None:
    """Start the re-scoring a published edition's request waits for; return the run id.

    Sent after the publishing transaction commits, and again by `sweep_rescore_requests`
    while the request waits; a duplicate delivery finds the request started and does
    nothing (services.rescore_request_start). None: nothing was started.
    """
    run = services.rescore_request_start(edition_id=edition_id)
    return run.pk if run is not None else None


# A request younger than this may still have its own task in flight: the sweep leaves it.
SWEEP_MIN_AGE_SECONDS = 30


# Both limits are set: a time_limit below the global soft limit (CELERY_TASK_SOFT_TIME_LIMIT,
# 3300 s) alone makes apply_async refuse the task, so beat could never send it.
@shared_task(
    name="scoring.sweep_rescore_requests", acks_late=True, soft_time_limit=240, time_limit=300
)
def sweep_rescore_requests() -> list[int]:
    """Send `rescore_requested` again for every request waiting longer than 30 s.

    Run by Celery beat every minute (settings.CELERY_BEAT_SCHEDULE): what heals a publish
    whose task never reached the broker. Returns the edition ids it sent for.
    """
    from scoring.runs.services.runs import send_rescore_request, waiting_rescore_requests

    edition_ids = waiting_rescore_requests(older_than_seconds=SWEEP_MIN_AGE_SECONDS)
    for edition_id in edition_ids:
        send_rescore_request(edition_id)
    return edition_ids


@shared_task(name="scoring.heal_runs", acks_late=True, soft_time_limit=240, time_limit=300)
def heal_runs() -> dict:
    """Free dead pair leases and send stalled runs to the workers again
    (services.heal_runs). Run by Celery beat every SNAGLIST_HEAL_SECONDS (30 s)."""
    return services.heal_runs()


@shared_task(name="scoring.poll_batches", acks_late=True, soft_time_limit=540, time_limit=600)
def poll_batches() -> dict:
    """Poll the vendor batches still out and settle the ended ones
    (scoring.runs.services.batch_mode.poll_batches); send again the pairs they brought no reply
    for (live, or in a new batch: SNAGLIST_BATCH_FAILED_RETRY) and close the runs they
    finished. Run by Celery beat every SNAGLIST_BATCH_POLL_SECONDS (60 s). Returns
    {"polled", "settled": [batch ids], "again": {"live"|"batch": {run id: pairs}}, "notes"}.
    """
    report = services.poll_batches()
    for where, runs in report.again.items():
        for run_id, pairs in runs.items():
            grade_chunk.delay(run_id, pairs, live=where == "live")
    for run in ScoringRun.objects.filter(pk__in=report.runs):
        services.scoring_run_finish(run=run)
    return {
        "polled": report.polled,
        "settled": report.settled,
        "again": {w: {str(r): p for r, p in runs.items()} for w, runs in report.again.items()},
        "notes": report.notes,
    }
