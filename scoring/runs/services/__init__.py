"""Re-scoring and key-audit runs: which pairs lack a grade, and grading them once (rule 8).

A package split by concern, with one direction (checked by import-linter, pyproject.toml);
each module imports only modules below it:

    candidate       the candidate panel (issue 31): its one writer, re-score, adoption
    runs            create / start / resume / cancel / close a run; follow-up tasks
    panel           the judge panel: its one writer (judge_panel_set), audit-logged
    pairs           which judges can grade; which pairs lack a current grade or verdict
    chunks          settle_chunk: a chunk's pairs down the one path of their kind
    aio_transport | threads | batch_mode
                    grade calls on the judge event loop | on threads (and audit pairs) |
                    through the vendors' batch APIs (batch mode: submit, poll, settle)
    batching        BatchSettler: finished grade pairs settled in one transaction a batch
    ledger          claims, the judge-call ledger ("started" before a call), lost calls
    backends        judge backends per Judge row (cached per process), their inputs
    vendor_sql      the hand-written SQL of the hot path, per database vendor
    work            WorkItem, PairKey, ChunkOutcome, Finished, PairBusy, PairUnavailable
    heartbeat       RunHeartbeat: a worker's reports on a run while a task of it runs
    tunables        chunk size, lease, thread cap (settings), batch sizes, poll intervals

Exactly-once, in the database: see scoring.runs.services.ledger. The reads of runs (ledger and
run summaries, the latest run) are in scoring.runs.selectors.

The names below are the package's public interface for the rest of the project (views,
API, tasks, commands, review); import them from `scoring.runs.services`.
"""

from __future__ import annotations

from scoring.runs.services.backends import citation_text, judge_backend, judge_backend_config
from scoring.runs.services.batch_mode import poll_batches
from scoring.runs.services.chunks import settle_chunk
from scoring.runs.services.heartbeat import RunHeartbeat
from scoring.runs.services.ledger import LOST_DETAIL, free_dead_limiter_slots
from scoring.runs.services.pairs import (
    active_graders,
    audit_needed_pairs,
    benchmark_graders,
    graders_for,
    panel_graders,
    rescore_needed_pairs,
)
from scoring.runs.services.runs import (
    RESCORE_REQUESTED_TASK,
    RUN_START_TASK,
    heal_runs,
    pending_pairs,
    rescore_after_publish,
    rescore_request,
    rescore_request_start,
    scoring_run_begin,
    scoring_run_cancel,
    scoring_run_create,
    scoring_run_enqueue,
    scoring_run_finish,
    scoring_run_resume,
)
from scoring.runs.services.tunables import (
    chunk_size,
    chunk_threads_cap,
    pair_lease_seconds,
)
from scoring.runs.services.work import (
    ACTIVE_STATUSES,
    ChunkOutcome,
    Pair,
    PairBusy,
    PairUnavailable,
)

__all__ = [
    "RESCORE_REQUESTED_TASK",
    "RUN_START_TASK",
    "ACTIVE_STATUSES",
    "LOST_DETAIL",
    "ChunkOutcome",
    "Pair",
    "PairBusy",
    "PairUnavailable",
    "RunHeartbeat",
    "free_dead_limiter_slots",
    "active_graders",
    "panel_graders",
    "benchmark_graders",
    "audit_needed_pairs",
    "chunk_size",
    "chunk_threads_cap",
    "citation_text",
    "graders_for",
    "heal_runs",
    "judge_backend",
    "judge_backend_config",
    "pair_lease_seconds",
    "pending_pairs",
    "poll_batches",
    "rescore_after_publish",
    "rescore_request",
    "rescore_request_start",
    "rescore_needed_pairs",
    "scoring_run_begin",
    "scoring_run_cancel",
    "scoring_run_create",
    "scoring_run_enqueue",
    "scoring_run_finish",
    "scoring_run_resume",
    "settle_chunk",
]
