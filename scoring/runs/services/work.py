"""The vocabulary of a re-scoring chunk: pairs, work items, outcomes and the errors between them.

Bottom of scoring.runs.services beside tunables: models in, nothing of the package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from questions.models import KeyEntry, Response
from scoring.models import Judge, RunItem, ScoringRun

Pair = tuple[int | None, int, int]  # (response id or None for an audit, judge id, key entry id)

# A run that may still settle pairs.
ACTIVE_STATUSES = (ScoringRun.Status.PENDING, ScoringRun.Status.RUNNING)


class PairKey(NamedTuple):
    """A pair as the tasks send it: (response id or None for an audit, judge id, key entry id).

    `list(key)` is its JSON form ([response id or null, judge id, key entry id]).
    """

    response_id: int | None
    judge_id: int
    key_entry_id: int


@dataclass(frozen=True, slots=True)
class WorkItem:
    """One pending pair of a chunk with the rows needed to grade it, read once per chunk.

    key: the pair; judge: the judge (or auditor); key_entry: with its question and
    citation document loaded; response: None for an audit; item: the run's item of the
    pair; absent: True when the chunk found no grade (or verdict) of the pair at the judge's
    current prompt version (a grade written meanwhile is still caught by the unique
    constraint).
    """

    key: PairKey
    judge: Judge
    key_entry: KeyEntry
    response: Response | None
    item: RunItem
    absent: bool


class PairBusy(Exception):
    """The pair is leased by another worker right now; try again after its lease."""


class PairUnavailable(Exception):
    """The judge stayed unavailable past its retry cap; the pair may be retried later."""


@dataclass
class ChunkOutcome:
    """What happened to a chunk's pairs: settled states, and pairs to try again later.

    settled: {RunItem state: pairs settled in it}; busy: pairs leased by another worker;
    unavailable: pairs whose judge was unavailable while retries remain (both as JSON
    lists [response id or None, judge id, key entry id]); stopped: the run was cancelled
    (or finished) while the chunk ran; batched: pairs sent in a vendor batch (batch mode),
    settled later by the batch poller.
    """

    settled: dict[str, int] = field(default_factory=dict)
    busy: list[list[int | None]] = field(default_factory=list)
    unavailable: list[list[int | None]] = field(default_factory=list)
    stopped: bool = False
    batched: int = 0

    def count(self, state: str) -> None:
        """Count one pair settled in `state`."""
        self.settled[state] = self.settled.get(state, 0) + 1


@dataclass(frozen=True)
class CallRef:
    """A ledger row (scoring.models.JudgeCall) written in bulk: its id is all the settle path
    needs of it."""

    pk: int


@dataclass
class Finished:
    """A pair whose judge answered (or failed for good), waiting to be settled in a batch.

    item_id: its RunItem; state: the RunItem state to settle it in (graded, unparsed,
    reused, failed; a batch may turn graded/unparsed into reused); call_id / call_outcome:
    its ledger row and the JudgeCall outcome to give it (None / "" when no call was made);
    detail: the note for both; grade: the Grade row to insert as {field attname: value}, or
    None; usage: the tokens the call was billed for (judges.Usage), None when the
    backend reported none or no answer came (stored as unknown).
    """

    item_id: int
    state: str
    call_id: int | None
    call_outcome: str
    detail: str = ""
    grade: dict[str, Any] | None = None
    usage: Any = None


def run_stopped(run: ScoringRun) -> bool:
    """Return True when the run is no longer pending or running (cancelled or finished);
    one query."""
    status = ScoringRun.objects.filter(pk=run.pk).values_list("status", flat=True).first()
    return status not in ACTIVE_STATUSES


def is_database_error(exc: BaseException) -> bool:
    """Return True for a database error (DatabaseError, InterfaceError): such an error
    releases the pair and is raised again, never counted as the judge's failure."""
    from django.db import DatabaseError, InterfaceError

    return isinstance(exc, DatabaseError | InterfaceError)


def lease_holder() -> str:
    """Return this worker process's name for the leases it holds: "host:pid" (computed at
    each call, so a forked pool process names itself); the same name prefixes its judge
    limiter slots (judges.limits.process_holder, the one definition)."""
    from judges.limits import process_holder

    return process_holder()


def append_note(text: str, note: str) -> str:
    """Return `text` with `note` on a line of its own (no blank line when `text` is empty)."""
    return f"{text}\n{note}".strip()
