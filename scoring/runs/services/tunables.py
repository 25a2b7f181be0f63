"""The tunables of re-scoring in one place: chunk size, lease, threads, retries, batches, polling.

Chunk size, lease, thread cap and the chunk retries (scoring.runs.tasks) are deployment settings (config/settings.py reads and
validates them once at start-up from SNAGLIST_* environment variables, with their
defaults and the measurements behind them); the functions below read them from
django.conf.settings at call time, so a test's `settings` fixture override applies. The
constants are measured choices (bench/README.md), not settings. This module is the bottom
of scoring.runs.services: it imports nothing of the package.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings

from scoring.models import Judge

# Calls a model judge may have in flight from one chunk when its row sets no `concurrency`.
DEFAULT_JUDGE_CONCURRENCY = 8
# A chunk adds a thread only for this many pending pairs per thread (a thread opens a
# database connection, about 1 ms of CPU here and a backend process in PostgreSQL).
PAIRS_PER_THREAD = 4

# A grade run settles finished pairs in batches: every SETTLE_BATCH pairs or SETTLE_SECONDS,
# whichever comes first, one transaction writes their grades (one INSERT), moves their items
# and ledger rows (one UPDATE per distinct state) and bumps the run counters once.
SETTLE_BATCH = 32
SETTLE_SECONDS = 0.2
# A thread claims up to this many of the chunk's pairs with one conditional UPDATE; a pair
# claimed but not yet called when its worker dies only waits out its lease (no ledger row).
CLAIM_BATCH = 4

# The event-loop path claims a chunk's pairs all at once (one UPDATE of the run items and one
# INSERT of their cross-run leases: statements per chunk, not per few pairs), in parts of at
# most this many pairs: the lease INSERT binds 8 values a pair, within PostgreSQL's 65,535
# and SQLite's 32,766 bound parameters. A claimed pair not yet called when its worker dies
# waits out its lease (no ledger row), as a thread's CLAIM_BATCH does.
CHUNK_CLAIM_MAX = 2000
# How often the event-loop path asks the database whether the run was cancelled.
STOP_CHECK_SECONDS = 0.5
# The event-loop path's thread looks at finished calls this often (or sooner, once enough
# have finished to submit a batch): a wake-up per finished call cost more CPU than the call.
ASYNC_POLL_SECONDS = 0.02


def chunk_size() -> int:
    """Return how many pairs one `scoring.grade_chunk` task settles (SNAGLIST_RESCORE_CHUNK)."""
    return int(settings.SNAGLIST_RESCORE_CHUNK)


def pair_lease_seconds() -> float:
    """Return how long, in seconds, a claimed pair stays reserved for the worker that claimed it
    (SNAGLIST_PAIR_LEASE_SECONDS).

    A live worker's heartbeat (scoring.runs.services.heartbeat) renews its leases every
    SNAGLIST_WORKER_HEARTBEAT_SECONDS while a task runs, so this need only outlast a few
    heartbeats, not a judge call with its retries; a killed worker's pairs free up this long
    after its last beat.
    """
    return float(settings.SNAGLIST_PAIR_LEASE_SECONDS)


def chunk_threads_cap() -> int:
    """Return how many threads one process may add to grade chunks concurrently
    (SNAGLIST_JUDGE_THREADS; 0 means chunks run on their task's thread only).

    Each thread holds its own database connection while its chunk runs, so this (plus the
    worker's own threads) bounds the worker's PostgreSQL connections.
    """
    return int(settings.SNAGLIST_JUDGE_THREADS)


def judge_window(judge: Judge, pending: int) -> int:
    """Return how many of a judge's calls one chunk keeps in flight: its row's
    backend_settings["concurrency"] (DEFAULT_JUDGE_CONCURRENCY if unset), no more than
    `pending` (its pairs in the chunk), at least 1."""
    limit = (judge.backend_settings or {}).get("concurrency") or DEFAULT_JUDGE_CONCURRENCY
    return max(1, min(pending, int(limit)))


def max_chunk_retries() -> int:
    """Return how often a chunk is sent again for pairs still owed
    (SNAGLIST_RESCORE_MAX_RETRIES; 0: the first attempt is the final one)."""
    return int(settings.SNAGLIST_RESCORE_MAX_RETRIES)


def eager_retry_seconds() -> float:
    """Return how long an in-process (eager) run asks again for pairs whose judge is
    unavailable before they fail, in seconds (SNAGLIST_EAGER_RETRY_SECONDS; 0: one last round at once, then they fail)."""
    return float(settings.SNAGLIST_EAGER_RETRY_SECONDS)


def retry_base_seconds() -> float:
    """Return the first backoff, in seconds, for an unavailable judge
    (SNAGLIST_RESCORE_RETRY_BASE_SECONDS); scoring.runs.tasks doubles it per retry, capped at 600 s."""
    return float(settings.SNAGLIST_RESCORE_RETRY_BASE_SECONDS)


def unparsed_retries() -> int:
    """Times a pair with a null (unparsed) grade is asked again, one ask per run (issue 17)."""
    return int(settings.SNAGLIST_UNPARSED_RETRIES)


# A run is stalled when no worker has reported on it for this many heartbeats.
STALL_HEARTBEATS = 3


def heartbeat_seconds() -> float:
    """Return the seconds between a worker's reports on a run while a task of it runs
    (SNAGLIST_WORKER_HEARTBEAT_SECONDS)."""
    return float(settings.SNAGLIST_WORKER_HEARTBEAT_SECONDS)


def stall_seconds(mode: str = "live") -> float:
    """Return after how many seconds without a worker's report a run counts as stalled:
    STALL_HEARTBEATS heartbeats; for a batch-mode run (`mode` "batch", whose pairs wait at
    the vendor and are reported on by the batch poller at each poll) at least two polls
    and a heartbeat."""
    seconds = STALL_HEARTBEATS * heartbeat_seconds()
    if mode == "batch":
        seconds = max(seconds, 2 * batch_poll_seconds() + heartbeat_seconds())
    return seconds


def heal_backoff_cap_seconds() -> float:
    """Return the longest wait, in seconds, between two unanswered re-sends of a stalled run
    (SNAGLIST_HEAL_BACKOFF_CAP_SECONDS)."""
    return float(settings.SNAGLIST_HEAL_BACKOFF_CAP_SECONDS)


def resend_due_at(*, resent_at: Any, last_report: Any, unanswered: int, mode: str = "live") -> Any:
    """Return when a stalled run whose last re-send brought no report is sent again, or None
    when heal_runs may send it as soon as it is stalled (never sent again, or a worker has
    reported on it since: `last_report`, its reported_at or else created_at, is later than
    `resent_at`).

    The deadline (issue 26 item 3) is resent_at + stall_seconds(mode) x 2^(unanswered - 1),
    capped at heal_backoff_cap_seconds(): 30 s, 60 s, 120 s, ... with the default heartbeat.
    unanswered: re-sends since the last report (ScoringRun.resends_unanswered; taken as 1
    when a re-send is on record but the count is not, as for runs re-sent before it was
    kept). Datetimes in, datetime or None out.
    """
    if resent_at is None or resent_at < last_report:
        return None
    exponent = min(max(1, unanswered) - 1, 32)  # 2^32 x any stall is past any cap
    wait = min(stall_seconds(mode) * 2**exponent, heal_backoff_cap_seconds())
    return resent_at + timedelta(seconds=wait)


# A pair is sent in a vendor batch at most this often; then it is settled as failed.
BATCH_MAX_ATTEMPTS = 3


def batch_poll_seconds() -> float:
    """Return the seconds between polls of the open vendor batches
    (SNAGLIST_BATCH_POLL_SECONDS, the `scoring.poll_batches` beat interval)."""
    return float(settings.SNAGLIST_BATCH_POLL_SECONDS)


def batch_lease_seconds() -> float:
    """Return how long a pair sent in a vendor batch stays leased to its batch: renewed by the
    poller at each poll, so three polls (at least one pair lease) before a dead poller's
    pairs free up."""
    return max(pair_lease_seconds(), 3 * batch_poll_seconds())


def batch_failed_retry() -> str:
    """Return where a batch request that brought no reply goes next: "live" or "batch"
    (SNAGLIST_BATCH_FAILED_RETRY)."""
    return str(settings.SNAGLIST_BATCH_FAILED_RETRY)
