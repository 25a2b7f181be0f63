"""Settling a grade run's finished pairs in batches: one transaction per batch.

A batch's grades (one INSERT that skips pairs graded meanwhile), its run items (one UPDATE
per distinct state), its ledger rows (one UPDATE), the run counters (one UPDATE) and, unless
the chunk frees them once at its end (defer_leases), the deletion of its pairs' cross-run
leases (one DELETE) commit together.
Above the ledger, below the transports that feed it.
"""

from __future__ import annotations

import threading

from django.db import transaction

from questions.trigger_functions import REASK_MARKER_SQL
from scoring.models import Grade, RunItem, ScoringRun
from scoring.runs.services.ledger import USAGE_COLUMNS, free_pair_leases
from scoring.runs.services.tunables import SETTLE_BATCH, SETTLE_SECONDS
from scoring.runs.services.vendor_sql import insert_rows, settle_calls, settle_sql
from scoring.runs.services.work import ChunkOutcome, Finished

# A grade's pair: the columns (attnames) of its unique constraint, read from the model so
# the two cannot drift apart.
GRADE_PAIR = next(
    tuple(Grade._meta.get_field(f).attname for f in c.fields)
    for c in Grade._meta.constraints
    if c.name == "grade_unique_per_key_and_prompt"
)


class BatchSettler:
    """Collect finished grade pairs from a chunk's threads and settle them in batches.

    A batch is written when it holds SETTLE_BATCH pairs or its first pair has waited
    SETTLE_SECONDS (`add`, `flush_if_due`), and at the end of the chunk (`flush`). Each
    written pair is counted in `outcome` (under `lock`, the chunk's outcome lock, kept as
    `outcome_lock` for the transports). Thread-safe.

    defer_leases: the cross-run pair leases of the written pairs are not deleted with each
    batch but remembered, and deleted by `free_leases` (one DELETE: the chunk calls it once,
    after its last flush). A pair keeps its lease a little longer than its grade takes to
    commit, which is safe: another run that finds it leased leaves it and reuses the grade.
    False: each batch deletes its pairs' leases in its own transaction.
    """

    def __init__(
        self,
        run: ScoringRun,
        outcome: ChunkOutcome,
        lock: threading.Lock,
        *,
        defer_leases: bool = False,
    ) -> None:
        self.run = run
        self.outcome = outcome
        self.outcome_lock = lock
        self.lock = threading.Lock()
        self.pending: list[Finished] = []
        self.since = 0.0
        self.defer_leases = defer_leases
        self.leased: list[int] = []  # items written whose pair leases are still to delete

    def add(self, done: Finished) -> None:
        """Queue one finished pair; write the batch when it is full or its first pair is due."""
        import time

        with self.lock:
            if not self.pending:
                self.since = time.monotonic()
            self.pending.append(done)
            if len(self.pending) < SETTLE_BATCH and time.monotonic() - self.since < SETTLE_SECONDS:
                return
            batch, self.pending = self.pending, []
        self.write(batch)

    def flush_if_due(self) -> None:
        """Write the pending batch if its first pair has waited SETTLE_SECONDS."""
        import time

        with self.lock:
            due = bool(self.pending) and time.monotonic() - self.since >= SETTLE_SECONDS
        if due:
            self.flush()

    def flush(self) -> None:
        """Write whatever is queued now (nothing when the queue is empty)."""
        with self.lock:
            batch, self.pending = self.pending, []
        if batch:
            self.write(batch)

    def free_leases(self) -> None:
        """Delete the pair leases of the pairs written so far (defer_leases): one DELETE,
        none when there are none."""
        with self.lock:
            ids, self.leased = self.leased, []
        free_pair_leases(ids)

    def write(self, batch: list[Finished]) -> None:
        """One transaction: the batch's grades, its items, its ledger rows (with the tokens
        each call reported: one UPDATE, vendor_sql.settle_calls), the run counters and,
        unless deferred, the pairs' leases.

        A grade whose pair was graded meanwhile (another run or delivery) is skipped by the
        INSERT itself and its pair settled as reused, paying nothing more. The UPDATEs are
        plain SQL (vendor_sql.settle_sql): the ORM spent ~1 ms of CPU building each, per batch."""
        from django.db import connection

        with transaction.atomic():
            with_grade = [d for d in batch if d.grade is not None]
            if with_grade:
                columns = tuple(with_grade[0].grade)
                at = [columns.index(c) for c in GRADE_PAIR]
                rows = [[d.grade[c] for c in columns] for d in with_grade]
                # A stored null grade (an unparsed reply asked again) is replaced; a real
                # grade stored meanwhile is kept and the pair settled as reused. On
                # PostgreSQL the grade trigger lets the replacement through only with this
                # transaction's marker, and writes its audit entry (trigger_functions).
                if connection.vendor == "postgresql":
                    with connection.cursor() as cursor:
                        cursor.execute(REASK_MARKER_SQL)
                inserted = set(
                    insert_rows(
                        Grade, columns, rows, skip_conflicts=GRADE_PAIR, replace_null="grade"
                    )
                )
                for d, row in zip(with_grade, rows, strict=True):
                    if tuple(row[i] for i in at) not in inserted:
                        d.state = RunItem.State.REUSED
            items: dict[tuple[str, str], list[int]] = {}
            for d in batch:
                items.setdefault((d.state, d.detail[:2000]), []).append(d.item_id)
            sql = settle_sql(connection)
            bump: dict[str, int] = {}
            with connection.cursor() as cursor:
                for (state, detail), ids in items.items():
                    cursor.execute(
                        sql["items"] % ", ".join(["%s"] * len(ids)),
                        [state, detail, *ids, RunItem.State.PENDING],
                    )
                    moved = cursor.rowcount
                    if not moved:
                        continue
                    bump["done"] = bump.get("done", 0) + moved
                    column = {
                        RunItem.State.REUSED: "reused",
                        RunItem.State.FAILED: "failed",
                    }.get(state, "graded")
                    bump[column] = bump.get(column, 0) + moved
                    if state == RunItem.State.UNPARSED:
                        bump["unparsed"] = bump.get("unparsed", 0) + moved
                settle_calls(
                    [
                        (
                            d.call_id,
                            d.call_outcome,
                            d.detail[:2000],
                            None
                            if d.usage is None
                            else tuple(getattr(d.usage, c) for c in USAGE_COLUMNS),
                        )
                        for d in batch
                        if d.call_id is not None
                    ]
                )
                if not self.defer_leases:  # the pairs' cross-run leases go with the settle
                    cursor.execute(
                        sql["leases"] % ", ".join(["%s"] * len(batch)), [d.item_id for d in batch]
                    )
                if bump:
                    qn = connection.ops.quote_name
                    cursor.execute(
                        sql["run"] % ", ".join(f"{qn(c)} = {qn(c)} + %s" for c in bump),
                        [*bump.values(), self.run.pk],
                    )
        if self.defer_leases:
            with self.lock:
                self.leased.extend(d.item_id for d in batch)
        with self.outcome_lock:
            for d in batch:
                self.outcome.count(d.state)
