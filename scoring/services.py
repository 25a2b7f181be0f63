"""Re-scoring and key-audit runs: which pairs lack a grade, and grading them once (rule 8).

A run is for one key edition and a set of judges (kind "grade") or auditors (kind
"audit"). At creation it stores one RunItem per pair that lacks a Grade (or
AuditVerdict) against the edition's *current effective* key entry and the judge's
*current* prompt_version; every other pair is counted as reused and never re-bought.

Exactly-once, in the database:
- A pair is claimed by a conditional update of its RunItem (state pending, no live
  lease), so two deliveries of one task cannot both call the judge for it.
- The JudgeCall ledger row is written (outcome "started") BEFORE the backend is called
  and settled afterwards, in the same transaction as the Grade and the run counters.
  A "started" row found when a pair is claimed again was in flight when its worker was
  killed: it is marked "lost" (paid, no grade) and the pair is called once more.
- Grades are unique per (response, judge, key entry, prompt version), so a grade that
  another run wrote meanwhile is reused, not duplicated.
- Grade runs settle finished pairs in small batches (every 32 pairs or 200 ms): the
  batch's grades, ledger rows, items and run counters commit in one transaction.
- Run counters move with F() expressions in the transaction that settles the pair(s); the
  last pair to settle flips the run to complete/failed with a conditional update, and
  only that caller sends the follow-up task (`on_complete`).

Never imports review/: a caller that wants work done after a run passes a task name.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Model, Q
from django.template.defaultfilters import pluralize
from django.utils import timezone

from questions.errors import DomainError, InvalidTransitionError
from questions.models import AuditExclusion, KeyEdition, KeyEntry, Response
from questions.selectors import edition_ancestry_ids, key_entries_for_edition
from scoring.models import AuditVerdict, Grade, Judge, JudgeCall, RunItem, ScoringRun

logger = logging.getLogger(__name__)

Pair = tuple[int | None, int, int]  # (response id or None for an audit, judge id, key entry id)

# Pairs per grade_chunk task. Each chunk ends by draining its calls and the next begins by
# loading its rows, so small chunks leave judge slots idle: on the throughput bench
# (bench/README.md) chunks of 50 gave 1.48x the floor, 250 1.29x, 500 1.25x, 1,000 1.23-1.27x.
# 500 calls at 16 in flight and 5 s a call take ~160 s, well inside the task's time limit.
DEFAULT_CHUNK_SIZE = 500
ACTIVE_STATUSES = (ScoringRun.Status.PENDING, ScoringRun.Status.RUNNING)


def _setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


def chunk_size() -> int:
    """Return how many pairs one `scoring.grade_chunk` task settles (SNAGLIST_RESCORE_CHUNK)."""
    return int(
        _setting(
            "SNAGLIST_RESCORE_CHUNK", os.environ.get("SNAGLIST_RESCORE_CHUNK", DEFAULT_CHUNK_SIZE)
        )
    )


def pair_lease_seconds() -> float:
    """Return how long a claimed pair stays reserved for the worker that claimed it.

    Longer than one judge call with all its retries (timeout x attempts + backoff), so a
    live worker never loses its pair; a killed worker's pair frees up after this long.
    """
    return float(
        _setting("SNAGLIST_PAIR_LEASE_SECONDS", os.environ.get("SNAGLIST_PAIR_LEASE_SECONDS", 900))
    )


# -- which judges ----------------------------------------------------------------------------


def graders_for(
    judges: Iterable[Judge], *, role: str = Judge.Role.JUDGE
) -> tuple[list[Judge], list[str]]:
    """Split judges into those that can grade (active, with a backend, right role) and notes.

    Returns (judges that can work, human-readable notes about each one skipped).
    A judge with an empty backend carries imported grades only (bundle-format.md).
    """
    usable: list[Judge] = []
    notes: list[str] = []
    for judge in judges:
        if judge.role != role:
            kind = judge.get_role_display().lower()
            article = "an" if kind[:1] in "aeiou" else "a"
            notes.append(f"{judge.judge_id}: skipped, it is {article} {kind}")
        elif not judge.backend:
            notes.append(f"{judge.judge_id}: skipped, no backend (imported grades only)")
        elif not judge.active:
            notes.append(f"{judge.judge_id}: skipped, inactive")
        else:
            usable.append(judge)
    return usable, notes


def active_graders(
    edition: KeyEdition, *, role: str = Judge.Role.JUDGE
) -> tuple[list[Judge], list[str]]:
    """Return the benchmark's judges (or auditors) that can grade, and notes on the others."""
    return graders_for(
        Judge.objects.filter(benchmark_id=edition.benchmark_id, role=role), role=role
    )


# -- which pairs -----------------------------------------------------------------------------


def _scored_entries(edition: KeyEdition) -> dict[int, int]:
    """Return {question pk: effective key entry pk} for the questions scored in `edition`.

    Scored: the effective entry is neither a removal nor excluded by the key audit (rule 4,
    AuditExclusion of that entry).
    """
    entries = key_entries_for_edition(edition)
    excluded = set(
        AuditExclusion.objects.filter(
            key_entry__edition__benchmark_id=edition.benchmark_id
        ).values_list("key_entry_id", flat=True)
    )
    return {qid: e.pk for qid, e in entries.items() if not e.removed and e.pk not in excluded}


def rescore_needed_pairs(*, edition: KeyEdition, judges: Sequence[Judge]) -> list[Pair]:
    """Return (response id, judge id, key entry id) for every pair lacking a current grade.

    A pair is a response to a scored question whose effective entry in `edition` is not a
    removal, and a judge from `judges` that can grade. It is needed when no Grade exists
    for (response, judge, that key entry, the judge's current prompt_version). Four
    queries whatever the size: edition tree, entries, scored questions, responses, grades.
    Sorted by response then judge, so chunks give every judge work.
    """
    judges, _ = graders_for(judges)
    if not judges:
        return []
    entry_of = _scored_entries(edition)
    responses = list(
        Response.objects.filter(question_id__in=list(entry_of)).values_list("pk", "question_id")
        if len(entry_of) < 5000
        else Response.objects.filter(question__benchmark_id=edition.benchmark_id).values_list(
            "pk", "question_id"
        )
    )
    version = {j.pk: j.prompt_version for j in judges}
    have = {
        (r, j, e)
        for r, j, e, v in Grade.objects.filter(
            judge_id__in=list(version), key_entry__edition_id__in=edition_ancestry_ids(edition)
        ).values_list("response_id", "judge_id", "key_entry_id", "prompt_version")
        if version.get(j) == v
    }
    needed: list[Pair] = []
    for response_id, question_id in sorted(responses):
        entry_id = entry_of.get(question_id)
        if entry_id is None:
            continue
        for judge_id in sorted(version):
            if (response_id, judge_id, entry_id) not in have:
                needed.append((response_id, judge_id, entry_id))
    return needed


def audit_needed_pairs(*, edition: KeyEdition, auditors: Sequence[Judge]) -> list[Pair]:
    """Return (None, auditor id, key entry id) for each entry lacking a current verdict.

    Entries: the effective, non-removed entries of scored questions in `edition`.
    """
    auditors, _ = graders_for(auditors, role=Judge.Role.AUDITOR)
    if not auditors:
        return []
    entry_ids = sorted(_scored_entries(edition).values())
    version = {a.pk: a.prompt_version for a in auditors}
    have = {
        (a, e)
        for a, e, v in AuditVerdict.objects.filter(
            auditor_id__in=list(version), key_entry__edition_id__in=edition_ancestry_ids(edition)
        ).values_list("auditor_id", "key_entry_id", "prompt_version")
        if version.get(a) == v
    }
    return [
        (None, auditor_id, entry_id)
        for entry_id in entry_ids
        for auditor_id in sorted(version)
        if (auditor_id, entry_id) not in have
    ]


def _total_pairs(edition: KeyEdition, judges: Sequence[Judge], kind: str) -> int:
    entries = _scored_entries(edition)
    if kind == ScoringRun.Kind.AUDIT:
        return len(entries) * len(judges)
    n_responses = Response.objects.filter(question_id__in=list(entries)).count()
    return n_responses * len(judges)


# -- runs ------------------------------------------------------------------------------------


def scoring_run_create(
    *,
    edition: KeyEdition,
    judges: Sequence[Judge],
    kind: str = ScoringRun.Kind.GRADE,
    user: Any = None,
    on_complete: str = "",
    enqueue: bool = True,
) -> ScoringRun:
    """Create a run for the pairs that lack a grade (or verdict) and enqueue it after commit.

    Judges that cannot grade (no backend, inactive, wrong role) are skipped with a note in
    `run.error`. needed = pairs to grade now, reused = pairs already graded. A run that
    needs nothing completes as soon as its start task runs. `on_complete` names a task
    sent with the run id when the run finishes. Raises DomainError when no judge can grade.
    """
    role = Judge.Role.AUDITOR if kind == ScoringRun.Kind.AUDIT else Judge.Role.JUDGE
    usable, notes = graders_for(judges, role=role)
    if not usable:
        raise DomainError(
            f"no {role} of {edition} can grade: " + ("; ".join(notes) or f"no {role} selected")
        )
    if kind == ScoringRun.Kind.AUDIT:
        pairs = audit_needed_pairs(edition=edition, auditors=usable)
    else:
        pairs = rescore_needed_pairs(edition=edition, judges=usable)
    total = _total_pairs(edition, usable, kind)
    with transaction.atomic():
        run = ScoringRun.objects.create(
            benchmark_id=edition.benchmark_id,
            edition=edition,
            kind=kind,
            needed=len(pairs),
            reused=max(0, total - len(pairs)),
            error="\n".join(notes),
            on_complete=on_complete or "",
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        run.judges.set(usable)
        RunItem.objects.bulk_create(
            [RunItem(run=run, response_id=r, judge_id=j, key_entry_id=e) for r, j, e in pairs],
            batch_size=2000,
        )
        if enqueue:
            scoring_run_enqueue(run=run)
    return run


def scoring_run_enqueue(*, run: ScoringRun) -> None:
    """Send `scoring.run_start` for the run once the current transaction commits."""
    from scoring.tasks import run_start

    run_id = run.pk
    transaction.on_commit(lambda: run_start.delay(run_id))


def scoring_run_begin(*, run: ScoringRun) -> bool:
    """Mark a pending run running (sets started_at); return False if it is not active."""
    now = timezone.now()
    ScoringRun.objects.filter(pk=run.pk, status=ScoringRun.Status.PENDING).update(
        status=ScoringRun.Status.RUNNING, started_at=now
    )
    run.refresh_from_db()
    return run.status == ScoringRun.Status.RUNNING


def pending_pairs(*, run: ScoringRun) -> list[list[int | None]]:
    """Return the JSON-able pairs of the run that are not settled yet."""
    return [
        [r, j, e]
        for r, j, e in RunItem.objects.filter(run=run, state=RunItem.State.PENDING)
        .order_by("id")
        .values_list("response_id", "judge_id", "key_entry_id")
    ]


def scoring_run_resume(*, run: ScoringRun, user: Any = None) -> ScoringRun:
    """Re-enqueue an unfinished run: its pending pairs are sent again (duplicates are no-ops).

    Raises InvalidTransitionError for a finished or cancelled run.
    """
    if run.status not in ACTIVE_STATUSES:
        raise InvalidTransitionError(f"run {run.pk} is {run.status}: nothing to resume")
    with transaction.atomic():
        scoring_run_enqueue(run=run)
    return run


def scoring_run_cancel(*, run: ScoringRun, user: Any = None) -> ScoringRun:
    """Cancel an active run: no new pair is started; pairs already settled are kept.

    Raises InvalidTransitionError when the run already finished.
    """
    changed = ScoringRun.objects.filter(pk=run.pk, status__in=ACTIVE_STATUSES).update(
        status=ScoringRun.Status.CANCELLED,
        finished_at=timezone.now(),
        error=_append_note(
            run.error, f"cancelled by {getattr(user, 'username', None) or 'system'}"
        ),
    )
    run.refresh_from_db()
    if not changed:
        raise InvalidTransitionError(f"run {run.pk} is {run.status}: it cannot be cancelled")
    return run


def _append_note(text: str, note: str) -> str:
    return f"{text}\n{note}".strip()


def scoring_run_finish(*, run: ScoringRun) -> bool:
    """Close the run if every pair is settled; return True only for the caller that closed it.

    complete when no pair failed, failed otherwise (the failed pairs still lack a grade, so
    the next run picks them up). The closer sends the run's `on_complete` task after commit.
    """
    now = timezone.now()
    with transaction.atomic():
        base = ScoringRun.objects.filter(
            pk=run.pk, status__in=ACTIVE_STATUSES, done__gte=F("needed")
        )
        closed = base.filter(failed=0).update(status=ScoringRun.Status.COMPLETE, finished_at=now)
        if not closed:
            closed = base.filter(failed__gt=0).update(
                status=ScoringRun.Status.FAILED, finished_at=now
            )
        if closed:
            run.refresh_from_db()
            if run.status == ScoringRun.Status.FAILED:
                ScoringRun.objects.filter(pk=run.pk).update(
                    error=_append_note(
                        run.error,
                        f"{run.failed} pair{pluralize(run.failed)} failed; a new run will retry them",
                    )
                )
            _after_finish(run)
    if closed:
        run.refresh_from_db()
    return bool(closed)


def _after_finish(run: ScoringRun) -> None:
    run_id, follow_up = run.pk, run.on_complete

    complete = run.status == ScoringRun.Status.COMPLETE
    kind_grade = run.kind == ScoringRun.Kind.GRADE

    def send() -> None:
        from celery import current_app

        if complete and kind_grade:
            from scoring.tasks import refresh_leaderboard

            refresh_leaderboard.delay(run_id)
        if follow_up:
            current_app.signature(follow_up, args=[run_id]).apply_async()

    transaction.on_commit(send)


def leaderboard_refresh(*, run: ScoringRun) -> None:
    """Compute the finished run's edition leaderboard into the cache (the board is versioned
    by its data, so this only warms it); a failure is logged, never raised."""
    try:
        from scoring.selectors import board_for_edition

        board_for_edition(run.edition)
    except Exception:  # noqa: BLE001 - a cache warm-up must not undo a finished run
        logger.exception("leaderboard refresh after run %s failed", run.pk)


def latest_run(edition: KeyEdition, *, kind: str = ScoringRun.Kind.GRADE) -> ScoringRun | None:
    """Return the edition's newest run of `kind`: the leaderboard marks its figures stale while
    that run is pending/running or when it failed."""
    return (
        ScoringRun.objects.filter(edition=edition, kind=kind).order_by("-created_at", "-id").first()
    )


def rescore_after_publish(edition_id: int) -> ScoringRun | None:
    """Create and enqueue a grading run for a newly published edition (rule 8).

    Uses every active judge of the benchmark that can grade; only responses whose
    effective key entry changed (or that were never graded) end up needed. Returns None
    (with a log line) when the edition is gone or no judge can grade.
    """
    edition = KeyEdition.objects.filter(pk=edition_id).first()
    if edition is None:
        logger.warning("rescore_after_publish: no key edition %s", edition_id)
        return None
    judges, notes = active_graders(edition)
    if not judges:
        logger.info(
            "rescore_after_publish: no judge of %s can grade (%s)", edition, "; ".join(notes)
        )
        return None
    return scoring_run_create(edition=edition, judges=judges, kind=ScoringRun.Kind.GRADE)


def audit_run_start(
    *,
    edition: KeyEdition,
    auditors: Sequence[Judge] | None = None,
    user: Any = None,
    on_complete: str = "",
) -> ScoringRun:
    """Create and enqueue an audit run; `on_complete` (a task name) gets the run id when done.

    The review workflow passes e.g. "review.tasks.triage_after_audit" so triage follows
    the audit without scoring importing review (architecture.md).
    """
    if auditors is None:
        auditors, _ = active_graders(edition, role=Judge.Role.AUDITOR)
    return scoring_run_create(
        edition=edition,
        judges=auditors,
        kind=ScoringRun.Kind.AUDIT,
        user=user,
        on_complete=on_complete,
    )


# -- backends --------------------------------------------------------------------------------

_REDIS_CLIENT: Any = None


def _redis_client() -> Any | None:
    global _REDIS_CLIENT
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return None
    if _REDIS_CLIENT is None:
        import redis

        _REDIS_CLIENT = redis.Redis.from_url(url)
    return _REDIS_CLIENT


def judge_backend_config(judge: Judge) -> dict[str, Any]:
    """Return the scoring.judges config for a Judge row (secrets stay in the environment).

    The row's backend, model, base_url and api_key_env (the NAME of the variable) plus the
    backend_settings keys the judges package knows (temperature, max_tokens, strictness,
    concurrency, rpm, ...); unknown keys are dropped here rather than failing every pair.
    """
    from scoring.judges import CONFIG_KEYS

    config = {k: v for k, v in (judge.backend_settings or {}).items() if k in CONFIG_KEYS}
    config["backend"] = judge.backend
    if judge.backend == "reference" and "strictness" not in config:
        # A bundle names the reference variant in `model` ("reference-strict"); bundles
        # carry no backend_settings, so the name is the only place the strictness travels.
        config["strictness"] = "strict" if judge.model.endswith("strict") else "lenient"
    if judge.model:
        config["model"] = judge.model
    if judge.base_url:
        config["base_url"] = judge.base_url
    if judge.api_key_env:
        config["api_key_env"] = judge.api_key_env
    return config


_BACKENDS: dict[tuple, Any] = {}
_BACKENDS_LOCK = threading.Lock()
_BACKENDS_MAX = 64


def judge_backend(judge: Judge) -> Any:
    """Return a judge backend for a Judge row, rate-limited across workers (Redis) if configured.

    One backend (with its pooled HTTP client and its limiter) is kept per judge configuration
    per process and shared by threads, so a worker does not open a new connection pool per
    chunk; a changed row (other model, URL, settings, key variable name) gets a new one.
    The API key itself is never part of the cache: backends read it at each call.
    Raises scoring.judges.JudgeConfigError for a bad configuration.
    """
    from scoring.judges import JudgeConfig, get_backend, limiter_for

    raw = judge_backend_config(judge)
    judge_key = f"{judge.benchmark_id}:{judge.judge_id}"
    cache_key = (judge_key, repr(sorted(raw.items())), getattr(settings, "REDIS_URL", ""))
    with _BACKENDS_LOCK:
        backend = _BACKENDS.get(cache_key)
    if backend is not None:
        return backend
    config = JudgeConfig.from_dict(raw)
    limiter = limiter_for(config, _redis_client(), judge_key)
    backend = get_backend(config, limiter=limiter)
    with _BACKENDS_LOCK:
        if len(_BACKENDS) >= _BACKENDS_MAX:
            _BACKENDS.pop(next(iter(_BACKENDS)))  # oldest; its pool closes when collected
        backend = _BACKENDS.setdefault(cache_key, backend)
    return backend


def citation_text(entry: KeyEntry) -> str:
    """Return "<document> (<edition>) <locator>: <quote>" for a key entry ("" if uncited)."""
    if not entry.has_citation:
        return ""
    doc = entry.citation_document
    head = (doc.short_title or doc.title) if doc else entry.citation_doc_id
    if doc and doc.edition:
        head = f"{head} ({doc.edition})"
    head = f"{head} {entry.citation_locator}".strip()
    quote = (entry.citation_quote or "").strip()
    return f"{head}: {quote}" if quote else head


# -- settling one pair -----------------------------------------------------------------------


class PairBusy(Exception):
    """The pair is leased by another worker right now; try again after its lease."""


class PairUnavailable(Exception):
    """The judge stayed unavailable past its retry cap; the pair may be retried later."""


@dataclass
class ChunkOutcome:
    """What happened to a chunk's pairs: settled states, and pairs to try again later."""

    settled: dict[str, int] = field(default_factory=dict)
    busy: list[list[int | None]] = field(default_factory=list)
    unavailable: list[list[int | None]] = field(default_factory=list)
    stopped: bool = False

    def count(self, state: str) -> None:
        self.settled[state] = self.settled.get(state, 0) + 1


def _claim(item: RunItem) -> bool:
    now = timezone.now()
    claimed = (
        RunItem.objects.filter(pk=item.pk, state=RunItem.State.PENDING)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .update(
            lease_until=now + timedelta(seconds=pair_lease_seconds()), attempts=F("attempts") + 1
        )
    )
    return claimed == 1


def _release(item: RunItem) -> None:
    RunItem.objects.filter(pk=item.pk, state=RunItem.State.PENDING).update(lease_until=None)


def _settle(
    *,
    run: ScoringRun,
    item: RunItem,
    state: str,
    call: JudgeCall | _CallRef | None = None,
    call_outcome: str = "",
    detail: str = "",
) -> bool:
    """Move the item from pending to `state` and bump the run counters; False if already settled.

    Runs inside the caller's transaction, so the grade, the ledger and the counters commit
    together or not at all.
    """
    moved = RunItem.objects.filter(pk=item.pk, state=RunItem.State.PENDING).update(
        state=state, lease_until=None, detail=detail[:2000]
    )
    if call is not None and call_outcome:
        JudgeCall.objects.filter(pk=call.pk).update(outcome=call_outcome, detail=detail[:2000])
    if not moved:
        return False
    bump: dict[str, Any] = {"done": F("done") + 1}
    if state in (RunItem.State.GRADED, RunItem.State.UNPARSED):
        bump["graded"] = F("graded") + 1
    if state == RunItem.State.UNPARSED:
        bump["unparsed"] = F("unparsed") + 1
    if state == RunItem.State.REUSED:
        bump["reused"] = F("reused") + 1
    if state == RunItem.State.FAILED:
        bump["failed"] = F("failed") + 1
    ScoringRun.objects.filter(pk=run.pk).update(**bump)
    return True


def _item_for(
    run: ScoringRun, response_id: int | None, judge_id: int, key_entry_id: int
) -> RunItem:
    """Return the run's item for a pair, creating it (and counting it needed) if missing."""
    lookup = {"run": run, "judge_id": judge_id, "key_entry_id": key_entry_id}
    lookup["response_id"] = response_id
    item = RunItem.objects.filter(**lookup).first()
    if item is not None:
        return item
    try:
        with transaction.atomic():
            item = RunItem.objects.create(**lookup)
            ScoringRun.objects.filter(pk=run.pk).update(needed=F("needed") + 1)
    except IntegrityError:
        item = RunItem.objects.get(**lookup)
    return item


# The ledger's note on a call that was in flight when its worker died (paid, no result).
LOST_DETAIL = "in flight when its worker stopped; called again"


def _mark_lost_calls(*, judge: Judge, response_id: int | None, key_entry_id: int) -> int:
    """Mark earlier calls for this pair that never produced a grade as lost (paid, no result)."""
    return JudgeCall.objects.filter(
        judge=judge,
        response_id=response_id,
        key_entry_id=key_entry_id,
        prompt_version=judge.prompt_version,
        outcome__in=(JudgeCall.Outcome.STARTED, JudgeCall.Outcome.OK),
    ).update(outcome=JudgeCall.Outcome.LOST, detail=LOST_DETAIL)


def _graded_outcome(result: Any, judge: Judge) -> tuple[str, str, str]:
    """Return (item state, rationale, detail) for a judge's GradeResult: "unparsed" with a
    rationale saying why when it holds no grade (counted as unparsed, never as 0), and a note
    when the backend answered with another prompt version than the Judge row's."""
    state = RunItem.State.GRADED if result.grade is not None else RunItem.State.UNPARSED
    rationale = result.rationale or ""
    if result.grade is None and not rationale:
        rationale = f"unparsed: {result.parse_error or 'no grade found'}"
    detail = result.parse_error or ""
    if result.prompt_version and result.prompt_version != judge.prompt_version:
        detail = _append_note(detail, f"backend prompt {result.prompt_version}")
    return state, rationale, detail


def grade_pair(
    *,
    run: ScoringRun,
    response: Response,
    judge: Judge,
    key_entry: KeyEntry,
    backend: Any = None,
    final_attempt: bool = True,
    item: RunItem | None = None,
    grade_absent: bool = False,
) -> str:
    """Grade one response with one judge against one key entry, at most once; return the state.

    Returns the item's state: graded / unparsed / reused / failed, or pending when the judge
    was unavailable and `final_attempt` is False (the caller retries later).
    Raises PairBusy when another worker holds the pair. Never raises for a judge failure.
    `grade_absent`: the caller already looked (settle_chunk does, once per chunk) and found
    no grade; a grade written meanwhile is still caught by the unique constraint.
    """
    from scoring.judges import GradingInput, JudgeConfigError, JudgeUnavailable

    item = item or _item_for(run, response.pk, judge.pk, key_entry.pk)
    if item.state != RunItem.State.PENDING:
        return item.state
    grade_key = {
        "response_id": response.pk,
        "judge_id": judge.pk,
        "key_entry_id": key_entry.pk,
        "prompt_version": judge.prompt_version,
    }
    if not grade_absent and Grade.objects.filter(**grade_key).exists():
        with transaction.atomic():
            _settle(run=run, item=item, state=RunItem.State.REUSED, detail="grade already present")
        return RunItem.State.REUSED
    call = _start_call(run, item, judge, response, key_entry)
    try:
        backend = backend or judge_backend(judge)
        question = key_entry.question
        result = backend.grade(
            GradingInput(
                question=question.text,
                key_answer=key_entry.answer,
                citation_text=citation_text(key_entry),
                response=response.text,
                scale=list(run.benchmark.grade_scale or [0, 1, 2]),
            )
        )
    except JudgeUnavailable as exc:
        return _judge_failed(run, item, call, str(exc), retryable=not final_attempt)
    except JudgeConfigError as exc:
        return _judge_failed(run, item, call, f"configuration: {exc}", retryable=False)
    except Exception as exc:  # noqa: BLE001 - a backend bug fails this pair, not the chunk
        if _is_database_error(exc):
            _release(item)
            raise
        logger.exception("judge %s raised on response %s", judge.judge_id, response.pk)
        return _judge_failed(run, item, call, f"{type(exc).__name__}: {exc}", retryable=False)

    state, rationale, detail = _graded_outcome(result, judge)
    settled = {
        "run": run,
        "item": item,
        "call": call,
        "call_outcome": JudgeCall.Outcome.OK,
        "detail": detail,
    }
    try:
        # Insert straight away (no SELECT first): the unique constraint on (response, judge,
        # key entry, prompt version) is what keeps one grade per pair.
        with transaction.atomic():
            Grade.objects.create(
                **grade_key,
                grade=result.grade,
                rationale=rationale,
                flag=bool(result.flag),
                flag_reason=result.flag_reason or "",
                raw_output=result.raw_output or "",
                stop_reason=(result.stop_reason or "")[:50],
                run=run,
            )
            _settle(state=state, **settled)
    except IntegrityError:
        # Another run or delivery wrote this pair's grade meanwhile: reuse it, pay nothing more.
        if not Grade.objects.filter(**grade_key).exists():
            raise
        state = RunItem.State.REUSED
        with transaction.atomic():
            _settle(state=state, **settled)
    return state


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

    Same contract as grade_pair (the auditor sees question, key answer and citation only).
    """
    from scoring.judges import AuditInput, JudgeConfigError, JudgeUnavailable

    item = item or _item_for(run, None, auditor.pk, key_entry.pk)
    if item.state != RunItem.State.PENDING:
        return item.state
    if AuditVerdict.objects.filter(
        key_entry=key_entry, auditor=auditor, prompt_version=auditor.prompt_version
    ).exists():
        with transaction.atomic():
            _settle(
                run=run, item=item, state=RunItem.State.REUSED, detail="verdict already present"
            )
        return RunItem.State.REUSED
    call = _start_call(run, item, auditor, None, key_entry)
    try:
        backend = backend or judge_backend(auditor)
        result = backend.audit(
            AuditInput(
                question=key_entry.question.text,
                key_answer=key_entry.answer,
                citation_text=citation_text(key_entry),
            )
        )
    except JudgeUnavailable as exc:
        return _judge_failed(run, item, call, str(exc), retryable=not final_attempt)
    except JudgeConfigError as exc:
        return _judge_failed(run, item, call, f"configuration: {exc}", retryable=False)
    except Exception as exc:  # noqa: BLE001
        if _is_database_error(exc):
            _release(item)
            raise
        logger.exception("auditor %s raised on key entry %s", auditor.judge_id, key_entry.pk)
        return _judge_failed(run, item, call, f"{type(exc).__name__}: {exc}", retryable=False)

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
        _settle(
            run=run,
            item=item,
            state=state,
            call=call,
            call_outcome=JudgeCall.Outcome.OK,
            detail=result.parse_error or "",
        )
    return state


def _start_call(
    run: ScoringRun, item: RunItem, judge: Judge, response: Response | None, key_entry: KeyEntry
) -> JudgeCall:
    """Claim `item` and write its ledger row before the judge is asked; return the row.

    An earlier unfinished call of the same pair (a killed worker's) is marked lost first.
    Raises PairBusy when another worker holds the item's lease."""
    if not _claim(item):
        raise PairBusy(item.pk)
    _mark_lost_calls(
        judge=judge, response_id=response.pk if response else None, key_entry_id=key_entry.pk
    )
    return JudgeCall.objects.create(
        run=run,
        judge=judge,
        response=response,
        key_entry=key_entry,
        prompt_version=judge.prompt_version,
        outcome=JudgeCall.Outcome.STARTED,
    )


def _is_database_error(exc: BaseException) -> bool:
    from django.db import DatabaseError, InterfaceError

    return isinstance(exc, DatabaseError | InterfaceError)


def _judge_failed(
    run: ScoringRun, item: RunItem, call: JudgeCall | _CallRef, detail: str, *, retryable: bool
) -> str:
    if retryable:
        JudgeCall.objects.filter(pk=call.pk).update(
            outcome=JudgeCall.Outcome.RETRY, detail=detail[:2000]
        )
        RunItem.objects.filter(pk=item.pk).update(lease_until=None, detail=detail[:2000])
        raise PairUnavailable(detail)
    with transaction.atomic():
        _settle(
            run=run,
            item=item,
            state=RunItem.State.FAILED,
            call=call,
            call_outcome=JudgeCall.Outcome.FAILED,
            detail=detail,
        )
    return RunItem.State.FAILED


def chunk_threads_cap() -> int:
    """Return how many threads one process may add to grade chunks concurrently (SNAGLIST_JUDGE_THREADS).

    Each thread holds its own database connection while its chunk runs, so this (plus the
    worker's own threads) bounds the worker's PostgreSQL connections.
    """
    return int(_setting("SNAGLIST_JUDGE_THREADS", os.environ.get("SNAGLIST_JUDGE_THREADS", 64)))


_THREAD_PERMITS: threading.BoundedSemaphore | None = None
_THREAD_PERMITS_LOCK = threading.Lock()


def _thread_permits() -> threading.BoundedSemaphore:
    global _THREAD_PERMITS
    with _THREAD_PERMITS_LOCK:
        if _THREAD_PERMITS is None:
            _THREAD_PERMITS = threading.BoundedSemaphore(max(0, chunk_threads_cap()))
        return _THREAD_PERMITS


# Calls a model judge may have in flight from one chunk when its row sets no `concurrency`.
DEFAULT_JUDGE_CONCURRENCY = 8
# A chunk adds a thread only for this many pending pairs per thread (a thread opens a
# database connection, about 1 ms of CPU here and a backend process in PostgreSQL).
PAIRS_PER_THREAD = 4


def _wanted_threads(work: Sequence[tuple], judges: dict[int, Judge]) -> int:
    """Return how many pairs of this chunk to grade at once: each judge's `concurrency` (its
    Redis limiter caps it across workers anyway), 1 for the offline reference backend; 1
    when the work must stay on this connection (inside a transaction, or on SQLite)."""
    from django.db import connection

    if connection.in_atomic_block or connection.vendor == "sqlite":
        return 1
    per_judge: dict[int, int] = {}
    for entry in work:
        per_judge[entry[0][1]] = per_judge.get(entry[0][1], 0) + 1
    total = sum(
        1 if judges[judge_id].backend == "reference" else _judge_window(judges[judge_id], n)
        for judge_id, n in per_judge.items()
    )
    return max(1, total)


def _judge_window(judge: Judge, pending: int) -> int:
    """Return how many of a judge's calls one chunk keeps in flight: its `concurrency`
    (DEFAULT_JUDGE_CONCURRENCY if unset), no more than it has pairs, at least 1."""
    limit = (judge.backend_settings or {}).get("concurrency") or DEFAULT_JUDGE_CONCURRENCY
    return max(1, min(pending, int(limit)))


class _ChunkThreads:
    """Extra threads that help the chunk's own thread settle its pairs.

    At most `_wanted_threads(work, judges) - 1` helpers, each taking one of the process's
    permits (SNAGLIST_JUDGE_THREADS caps threads, and so database connections, per worker),
    and one only while the chunk has PAIRS_PER_THREAD pending pairs per thread, so a
    helper's database connection serves several pairs. `target` is the drain loop a helper
    runs; its connection is closed when it ends. Only the chunk's own thread calls top_up.
    """

    def __init__(
        self, run: ScoringRun, work: Sequence[tuple], judges: dict[int, Judge], target
    ) -> None:
        self.wanted = _wanted_threads(work, judges) if len(work) > 1 else 1
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


def settle_chunk(
    *,
    run: ScoringRun,
    pairs: Sequence[Sequence[int | None]],
    final_attempt: bool = True,
    backends: dict[int, Any] | None = None,
) -> ChunkOutcome:
    """Settle each pair of a chunk (grade or audit by the run's kind); stop if the run stops.

    pairs: [[response id or None, judge id, key entry id], ...] (JSON from the task).
    Pairs held by another worker, or whose judge is unavailable while retries remain, are
    returned in `busy` / `unavailable` for the task to send again later.

    Judge calls are I/O-bound, so the chunk's pairs are graded by a bounded set of threads
    (up to each judge's `concurrency`, within the process-wide SNAGLIST_JUDGE_THREADS); each
    audit pair is claimed, called and settled on its own as in audit_pair; grade pairs go
    through _grade_chunk_batched (grouped claims, one ledger row per call written before
    it, batched settles). Every extra thread closes its database connection when the chunk
    is done. Inputs, items and existing grades are read once per chunk, not per pair.
    """
    outcome = ChunkOutcome()
    keys = [(p[0], int(p[1]), int(p[2])) for p in pairs]
    if not keys:
        return outcome
    found = RunItem.objects.filter(
        run=run, key_entry_id__in={k[2] for k in keys}, judge_id__in={k[1] for k in keys}
    )
    if run.kind == ScoringRun.Kind.GRADE:
        found = found.filter(response_id__in={k[0] for k in keys})
    items = {(i.response_id, i.judge_id, i.key_entry_id): i for i in found}
    judges = Judge.objects.in_bulk({k[1] for k in keys})
    entries = KeyEntry.objects.select_related("question", "citation_document").in_bulk(
        {k[2] for k in keys}
    )
    responses = Response.objects.in_bulk({k[0] for k in keys if k[0] is not None})
    present = _present_results(run, keys, judges)
    backends = {} if backends is None else backends
    work: list[tuple] = []
    for key in keys:
        response_id, judge_id, entry_id = key
        judge, entry = judges.get(judge_id), entries.get(entry_id)
        response = responses.get(response_id) if response_id is not None else None
        if judge is None or entry is None or (response_id is not None and response is None):
            logger.warning("run %s: pair %s refers to a missing row; skipped", run.pk, key)
            continue
        item = items.get(key) or _item_for(run, response_id, judge_id, entry_id)
        if item.state != RunItem.State.PENDING:
            continue
        try:
            if judge_id not in backends:
                backends[judge_id] = judge_backend(judge)
        except Exception as exc:  # noqa: BLE001 - bad config fails the pair with its reason
            backends[judge_id] = _BrokenBackend(exc)
        work.append((key, judge, entry, response, item, key not in present))
    if run.kind == ScoringRun.Kind.GRADE:
        return _grade_chunk_batched(
            run=run,
            work=work,
            judges=judges,
            backends=backends,
            final_attempt=final_attempt,
            outcome=outcome,
        )

    lock = threading.Lock()
    queue = list(reversed(work))
    taken = [0]
    stop = threading.Event()
    errors: list[BaseException] = []

    def settle_one(entry: tuple) -> None:
        key, judge, key_entry, response, item, absent = entry
        try:
            if run.kind == ScoringRun.Kind.AUDIT:
                state = audit_pair(
                    run=run,
                    key_entry=key_entry,
                    auditor=judge,
                    backend=backends[key[1]],
                    final_attempt=final_attempt,
                    item=item,
                )
            else:
                state = grade_pair(
                    run=run,
                    response=response,
                    judge=judge,
                    key_entry=key_entry,
                    backend=backends[key[1]],
                    final_attempt=final_attempt,
                    item=item,
                    grade_absent=absent,
                )
            with lock:
                outcome.count(state)
        except PairBusy:
            with lock:
                outcome.busy.append(list(key))
        except PairUnavailable:
            with lock:
                outcome.unavailable.append(list(key))

    threads = _ChunkThreads(run, work, judges, lambda: drain(main=False))

    def drain(*, main: bool) -> None:
        while not stop.is_set():
            if main:
                threads.top_up(len(queue))
            with lock:
                if not queue:
                    return
                n = taken[0]
                taken[0] += 1
                entry = queue.pop()
            if n and n % 10 == 0 and _run_stopped(run):
                with lock:
                    outcome.stopped = True
                stop.set()
                return
            try:
                settle_one(entry)
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


# -- grading a chunk in batches ------------------------------------------------------------

# A grade run settles finished pairs in batches: every SETTLE_BATCH pairs or SETTLE_SECONDS,
# whichever comes first, one transaction writes their grades (one INSERT), moves their items
# and ledger rows (one UPDATE per distinct state) and bumps the run counters once.
SETTLE_BATCH = 32
SETTLE_SECONDS = 0.2
# A thread claims up to this many of the chunk's pairs with one conditional UPDATE; a pair
# claimed but not yet called when its worker dies only waits out its lease (no ledger row).
CLAIM_BATCH = 4


def _claim_many(item_ids: Sequence[int]) -> dict[int, int]:
    """Lease the pending, unleased items among `item_ids` in one UPDATE ... RETURNING;
    return {item id: its claims so far (attempts, this one included)} of those leased."""
    from django.db import connection

    if not item_ids:
        return {}
    now = timezone.now()
    ops = connection.ops
    table = connection.ops.quote_name(RunItem._meta.db_table)
    marks = ", ".join(["%s"] * len(item_ids))
    sql = (
        f"UPDATE {table} SET lease_until = %s, attempts = attempts + 1 "
        f"WHERE id IN ({marks}) AND state = %s AND (lease_until IS NULL OR lease_until < %s) "
        "RETURNING id, attempts"
    )
    params = [
        ops.adapt_datetimefield_value(now + timedelta(seconds=pair_lease_seconds())),
        *item_ids,
        RunItem.State.PENDING,
        ops.adapt_datetimefield_value(now),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return dict(cursor.fetchall())


def _claim_group(
    group: Sequence[tuple], outcome: ChunkOutcome, lock: threading.Lock
) -> list[tuple]:
    """Claim a group of work entries: lease their pending pairs with one UPDATE, add the
    pairs leased elsewhere to outcome.busy (under `lock`), mark the unfinished earlier calls
    of the pairs claimed before (by this run: a killed worker's, say) lost; return the
    claimed entries, in order.

    A pair claimed for the first time in its run has no earlier call of this run, and the
    other runs' unfinished calls of the chunk's pairs were marked lost when the chunk began
    (_grade_chunk_batched): the lookup, ~0.7 ms of PostgreSQL's CPU per claim of 32 and
    almost always empty, runs only for the re-claimed ones."""
    claimed = _claim_many([e[4].pk for e in group])
    mine = [e for e in group if e[4].pk in claimed]
    with lock:
        outcome.busy.extend(list(e[0]) for e in group if e[4].pk not in claimed)
    _mark_lost_many([(e[1], e[0][0], e[0][2]) for e in mine if claimed[e[4].pk] > 1])
    return mine


def _json_columns(fields: Sequence[Any], connection: Any) -> str:
    """Return the SELECT list that reads one row per element of json_array_elements(...) AS r
    (each element a JSON array of the row's values in `fields` order): element i as
    r->>i, cast to its field's type; text stays text, so the column's own assignment rules
    (a varchar's length among them) apply as for any INSERT or comparison."""
    return ", ".join(
        f"r->>{i}"
        if f.get_internal_type() in ("CharField", "TextField")
        else f"(r->>{i})::{f.cast_db_type(connection)}"
        for i, f in enumerate(fields)
    )


_INSERT_SQL: dict[tuple, tuple[str, str | None, str, bool]] = {}


def _insert_sql(
    model: type[Model],
    columns: tuple[str, ...],
    connection: Any,
    skip_conflicts: tuple[str, ...] = (),
) -> tuple[str, str | None, str, bool]:
    """Return (head "INSERT INTO t (columns) ", the rows' clause on PostgreSQL or None
    elsewhere, the tail: " RETURNING id", or with skip_conflicts " ON CONFLICT (those
    columns) DO NOTHING RETURNING those columns", whether created_at is stamped) for
    _insert_rows, built once per model, columns, conflict columns and database vendor
    (building them asks every field for its SQL type)."""
    key = (model, columns, skip_conflicts, connection.vendor)
    if key not in _INSERT_SQL:
        meta = model._meta
        qn = connection.ops.quote_name
        fields = [meta.get_field(name) for name in columns]
        stamped = (
            any(f.attname == "created_at" for f in meta.concrete_fields)
            and "created_at" not in columns
        )
        targets = [qn(f.column) for f in fields] + ([qn("created_at")] if stamped else [])
        clause = None
        if connection.vendor == "postgresql":
            clause = (
                f"SELECT {_json_columns(fields, connection)}{', %s' if stamped else ''} "
                "FROM json_array_elements(%s::json) AS r"
            )
        tail = f" RETURNING {qn(meta.pk.column)}"
        if skip_conflicts:
            unique = ", ".join(qn(meta.get_field(c).column) for c in skip_conflicts)
            tail = f" ON CONFLICT ({unique}) DO NOTHING RETURNING {unique}"
        _INSERT_SQL[key] = (
            f"INSERT INTO {qn(meta.db_table)} ({', '.join(targets)}) ",
            clause,
            tail,
            stamped,
        )
    return _INSERT_SQL[key]


def _insert_rows(
    model: type[Model],
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    skip_conflicts: tuple[str, ...] = (),
) -> list[Any]:
    """INSERT `rows` (values in `columns` order; column names are field attnames such as
    "run_id") into `model`'s table with ONE statement; return the new ids in the rows' order.
    `created_at` (auto_now_add) is filled in with the current time.

    skip_conflicts: the columns of a unique constraint (e.g. a grade's pair). Rows that
    would break it are skipped (ON CONFLICT ... DO NOTHING: no error, no savepoint needed),
    and what is returned is the tuple of those columns' values of each row inserted
    (unordered) instead of the ids.

    Why not QuerySet.bulk_create: for the rows of a grade run's hot path (the "started"
    ledger rows, the grades) it spent ~0.1 ms of CPU per row on per-object field
    preparation, as much as the rest of a judge call's database work. On PostgreSQL the rows
    go as ONE parameter, a JSON array of rows (INSERT ... SELECT FROM json_array_elements),
    encoded by the json module's C encoder (DjangoJSONEncoder for dates, decimals and UUIDs):
    psycopg's client-side binding of one array per column dumped each value in Python
    (32 grades: 2.5-2.9 ms of CPU, against 1.2-1.3 ms as JSON). Elsewhere (SQLite >= 3.35)
    a multi-row VALUES list. Both end in RETURNING id; the ids are returned sorted, since one
    sequence numbers the rows in order. No signals are sent (nor does bulk_create send
    them); constraints and triggers apply as usual (IntegrityError propagates).
    """
    from django.core.serializers.json import DjangoJSONEncoder
    from django.db import connection

    if not rows:
        return []
    head, clause, returning, stamped = _insert_sql(
        model, tuple(columns), connection, skip_conflicts
    )
    now = timezone.now()
    if clause is not None:
        params: list[Any] = ([now] if stamped else []) + [json.dumps(rows, cls=DjangoJSONEncoder)]
    else:
        stamp = [connection.ops.adapt_datetimefield_value(now)] if stamped else []
        marks = "(" + ", ".join(["%s"] * (len(columns) + len(stamp))) + ")"
        clause = "VALUES " + ", ".join([marks] * len(rows))
        params = [value for row in rows for value in (*row, *stamp)]
    with connection.cursor() as cursor:
        cursor.execute(head + clause + returning, params)
        if skip_conflicts:
            return [tuple(row) for row in cursor.fetchall()]
        return sorted(row[0] for row in cursor.fetchall())


def _mark_lost_many(
    pairs: Sequence[tuple[Judge, int | None, int]], *, other_than_run: int | None = None
) -> int:
    """_mark_lost_calls for several pairs; return how many ledger rows were marked lost.
    other_than_run: a run id whose own calls are left as they are (None: every run's).

    On PostgreSQL (grade pairs) one UPDATE matching (judge, response, key entry, prompt
    version) against one array per column (it probes the ledger's call_pair_idx once per
    pair; the planner expects as many rows from unnest as there are, where it expects 100
    from a JSON parameter and then hashes the whole ledger instead); otherwise one SELECT
    (usually empty) and at most one UPDATE.
    """
    from django.db import connection

    if not pairs:
        return 0
    if connection.vendor == "postgresql" and all(r is not None for _, r, _ in pairs):
        meta = JudgeCall._meta
        qn = connection.ops.quote_name
        names = ("judge_id", "response_id", "key_entry_id", "prompt_version")
        fields = [meta.get_field(n) for n in names]
        arrays = ", ".join(f"%s::{f.db_type(connection)}[]" for f in fields)
        sql = (
            f"UPDATE {qn(meta.db_table)} SET {qn('outcome')} = %s, {qn('detail')} = %s "
            f"WHERE {qn('outcome')} IN (%s, %s) AND ({', '.join(qn(f.column) for f in fields)}) "
            f"IN (SELECT * FROM unnest({arrays}))"
            + (f" AND {qn('run_id')} <> %s" if other_than_run is not None else "")
        )
        params = [
            JudgeCall.Outcome.LOST,
            LOST_DETAIL,
            JudgeCall.Outcome.STARTED,
            JudgeCall.Outcome.OK,
            [j.pk for j, _, _ in pairs],
            [r for _, r, _ in pairs],
            [e for _, _, e in pairs],
            [j.prompt_version for j, _, _ in pairs],
        ]
        if other_than_run is not None:
            params.append(other_than_run)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.rowcount
    want = {(j.pk, r, e, j.prompt_version) for j, r, e in pairs}
    calls = JudgeCall.objects.filter(
        judge_id__in={j.pk for j, _, _ in pairs},
        response_id__in={r for _, r, _ in pairs},
        key_entry_id__in={e for _, _, e in pairs},
        outcome__in=(JudgeCall.Outcome.STARTED, JudgeCall.Outcome.OK),
    )
    if other_than_run is not None:
        calls = calls.exclude(run_id=other_than_run)
    rows = calls.values_list("pk", "judge_id", "response_id", "key_entry_id", "prompt_version")
    ids = [pk for pk, j, r, e, v in rows if (j, r, e, v) in want]
    if not ids:
        return 0
    return JudgeCall.objects.filter(pk__in=ids).update(
        outcome=JudgeCall.Outcome.LOST, detail=LOST_DETAIL
    )


@dataclass
class _Finished:
    """A pair whose judge answered (or failed for good), waiting to be settled in a batch."""

    item_id: int
    state: str
    call_id: int | None
    call_outcome: str
    detail: str = ""
    grade: dict[str, Any] | None = None


class _BatchSettler:
    """Collect finished pairs from the chunk's threads and settle them in batches."""

    def __init__(self, run: ScoringRun, outcome: ChunkOutcome, lock: threading.Lock) -> None:
        self.run = run
        self.outcome = outcome
        self.outcome_lock = lock
        self.lock = threading.Lock()
        self.pending: list[_Finished] = []
        self.since = 0.0

    def add(self, done: _Finished) -> None:
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
        with self.lock:
            batch, self.pending = self.pending, []
        if batch:
            self.write(batch)

    def write(self, batch: list[_Finished]) -> None:
        """One transaction: the batch's grades, its items, its ledger rows and the run counters.

        A grade whose pair was graded meanwhile (another run or delivery) is skipped by the
        INSERT itself and its pair settled as reused, paying nothing more. The UPDATEs are
        plain SQL (_settle_sql): the ORM spent ~1 ms of CPU building each, per batch."""
        from django.db import connection

        with transaction.atomic():
            with_grade = [d for d in batch if d.grade is not None]
            if with_grade:
                columns = tuple(with_grade[0].grade)
                at = [columns.index(c) for c in GRADE_PAIR]
                rows = [[d.grade[c] for c in columns] for d in with_grade]
                inserted = set(_insert_rows(Grade, columns, rows, skip_conflicts=GRADE_PAIR))
                for d, row in zip(with_grade, rows, strict=True):
                    if tuple(row[i] for i in at) not in inserted:
                        d.state = RunItem.State.REUSED
            items: dict[tuple[str, str], list[int]] = {}
            calls: dict[tuple[str, str], list[int]] = {}
            for d in batch:
                items.setdefault((d.state, d.detail[:2000]), []).append(d.item_id)
                if d.call_id is not None:
                    calls.setdefault((d.call_outcome, d.detail[:2000]), []).append(d.call_id)
            sql = _settle_sql(connection)
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
                for (call_outcome, detail), ids in calls.items():
                    cursor.execute(
                        sql["calls"] % ", ".join(["%s"] * len(ids)), [call_outcome, detail, *ids]
                    )
                if bump:
                    qn = connection.ops.quote_name
                    cursor.execute(
                        sql["run"] % ", ".join(f"{qn(c)} = {qn(c)} + %s" for c in bump),
                        [*bump.values(), self.run.pk],
                    )
        with self.outcome_lock:
            for d in batch:
                self.outcome.count(d.state)


# A grade's pair: the columns (attnames) of its unique constraint, read from the model so
# the two cannot drift apart.
GRADE_PAIR = next(
    tuple(Grade._meta.get_field(f).attname for f in c.fields)
    for c in Grade._meta.constraints
    if c.name == "grade_unique_per_key_and_prompt"
)

_SETTLE_SQL: dict[str, dict[str, str]] = {}


def _settle_sql(connection: Any) -> dict[str, str]:
    """Return _BatchSettler.write's UPDATE statements for this database vendor, each with a
    "%s" slot for its list of ids ("items", "calls") or of counter assignments ("run"):
    - items: move pending run items to a state (lease cleared, detail set);
    - calls: set ledger rows' outcome and detail;
    - run: add to the run's counters."""
    if connection.vendor not in _SETTLE_SQL:
        qn = connection.ops.quote_name
        _SETTLE_SQL[connection.vendor] = {
            "items": (
                f"UPDATE {qn(RunItem._meta.db_table)} SET {qn('state')} = %%s, "
                f"{qn('lease_until')} = NULL, {qn('detail')} = %%s "
                f"WHERE {qn('id')} IN (%s) AND {qn('state')} = %%s"
            ),
            "calls": (
                f"UPDATE {qn(JudgeCall._meta.db_table)} SET {qn('outcome')} = %%s, "
                f"{qn('detail')} = %%s WHERE {qn('id')} IN (%s)"
            ),
            "run": f"UPDATE {qn(ScoringRun._meta.db_table)} SET %s WHERE {qn('id')} = %%s",
        }
    return _SETTLE_SQL[connection.vendor]


def _grading_input(entry: tuple, scale: list) -> Any:
    """Return the GradingInput for a work entry (question, key answer, citation, response)."""
    from scoring.judges import GradingInput

    _, _, key_entry, response, _, _ = entry
    return GradingInput(
        question=key_entry.question.text,
        key_answer=key_entry.answer,
        citation_text=citation_text(key_entry),
        response=response.text,
        scale=scale,
    )


@dataclass(frozen=True)
class _CallRef:
    """A ledger row written by _insert_rows: its id is all the settle path needs of it."""

    pk: int


_STARTED_COLUMNS = (
    "run_id",
    "judge_id",
    "response_id",
    "key_entry_id",
    "prompt_version",
    "outcome",
    "detail",
)


def _started_rows(run: ScoringRun, entries: Sequence[tuple]) -> list[_CallRef]:
    """Write the "started" ledger rows of `entries`' calls in ONE INSERT (committed before
    the calls go out); return references to them in the entries' order."""
    rows = [
        (
            run.pk,
            judge.pk,
            response.pk,
            key_entry.pk,
            judge.prompt_version,
            JudgeCall.Outcome.STARTED,
            "",
        )
        for _, judge, key_entry, response, _, _ in entries
    ]
    return [_CallRef(pk) for pk in _insert_rows(JudgeCall, _STARTED_COLUMNS, rows)]


def _grade_one(
    run: ScoringRun, entry: tuple, backend: Any, final_attempt: bool, scale: list
) -> _Finished:
    """Write the pair's ledger row, call its judge and return what to settle (no settling here).

    Raises PairUnavailable (pair released, ledger row "retry") while retries remain, and
    database errors (pair released).
    """
    call = _started_rows(run, [entry])[0]
    try:
        result = backend.grade(_grading_input(entry, scale))
    except Exception as exc:  # noqa: BLE001 - classified by _finished_pair
        return _finished_pair(run, entry, call, final_attempt, error=exc)
    return _finished_pair(run, entry, call, final_attempt, result=result)


def _finished_pair(
    run: ScoringRun,
    entry: tuple,
    call: JudgeCall | _CallRef,
    final_attempt: bool,
    *,
    result: Any = None,
    error: BaseException | None = None,
) -> _Finished:
    """Turn a judge's answer (`result`, a GradeResult) or its failure (`error`) into what to
    settle for the pair.

    JudgeUnavailable while retries remain: the pair is released, its ledger row marked
    "retry", and PairUnavailable raised. A bad configuration or a backend bug fails the pair
    with the reason. A database error releases the pair and is raised again.
    """
    from scoring.judges import JudgeConfigError, JudgeUnavailable

    key, judge, key_entry, response, item, _ = entry
    failed = RunItem.State.FAILED
    if isinstance(error, JudgeUnavailable):
        if not final_attempt:
            _judge_failed(run, item, call, str(error), retryable=True)  # raises PairUnavailable
        return _Finished(item.pk, failed, call.pk, JudgeCall.Outcome.FAILED, str(error))
    if isinstance(error, JudgeConfigError):
        return _Finished(
            item.pk, failed, call.pk, JudgeCall.Outcome.FAILED, f"configuration: {error}"
        )
    if error is not None:
        if _is_database_error(error):
            _release(item)
            raise error
        # A backend bug fails this pair, not the chunk.
        logger.error("judge %s raised on response %s", judge.judge_id, response.pk, exc_info=error)
        return _Finished(
            item.pk, failed, call.pk, JudgeCall.Outcome.FAILED, f"{type(error).__name__}: {error}"
        )

    state, rationale, detail = _graded_outcome(result, judge)
    grade = {
        "response_id": response.pk,
        "judge_id": judge.pk,
        "key_entry_id": key_entry.pk,
        "prompt_version": judge.prompt_version,
        "grade": result.grade,
        "rationale": rationale,
        "flag": bool(result.flag),
        "flag_reason": result.flag_reason or "",
        "raw_output": result.raw_output or "",
        "stop_reason": (result.stop_reason or "")[:50],
        "run_id": run.pk,
    }
    return _Finished(item.pk, state, call.pk, JudgeCall.Outcome.OK, detail, grade)


def _grade_chunk_batched(
    *,
    run: ScoringRun,
    work: list[tuple],
    judges: dict[int, Judge],
    backends: dict[int, Any],
    final_attempt: bool,
    outcome: ChunkOutcome,
) -> ChunkOutcome:
    """Grade a chunk's pending pairs: same guarantees as grade_pair, fewer statements.

    - pairs that already have a grade are settled as reused in one batch;
    - other runs' unfinished calls of the chunk's pairs are marked lost in one UPDATE;
    - each thread claims up to CLAIM_BATCH pairs with one conditional UPDATE (pairs leased
      elsewhere go to `busy`) and marks the unfinished earlier calls of those claimed
      before (this run's) lost in one UPDATE;
    - each call still gets its own "started" ledger row, committed before the call;
    - finished pairs are settled by _BatchSettler (grade, ledger, counters in one transaction).
    """
    lock = threading.Lock()
    settler = _BatchSettler(run, outcome, lock)
    absent = []
    for entry in work:
        if entry[5]:
            absent.append(entry)
        else:
            settler.add(
                _Finished(entry[4].pk, RunItem.State.REUSED, None, "", "grade already present")
            )
    settler.flush()
    if not absent:
        return outcome
    # Other runs' unfinished calls of these pairs (a killed run's, say) are lost: marked
    # here once for the chunk; this run's own, pair by pair as they are claimed again.
    _mark_lost_many([(e[1], e[0][0], e[0][2]) for e in absent], other_than_run=run.pk)
    if _async_ready(absent, backends):
        try:
            _grade_async(
                run=run,
                absent=absent,
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

    scale = list(run.benchmark.grade_scale or [0, 1, 2])
    queue = list(reversed(absent))
    taken = [0]
    stop = threading.Event()
    errors: list[BaseException] = []
    threads = _ChunkThreads(run, absent, judges, lambda: drain(main=False))

    def next_group() -> list[tuple]:
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
                mine = _claim_group(group, outcome, lock)
                for i, entry in enumerate(mine):
                    with lock:
                        n = taken[0]
                        taken[0] += 1
                    if stop.is_set() or (n and n % 10 == 0 and _run_stopped(run)):
                        with lock:
                            outcome.stopped = True
                        stop.set()
                        for rest in mine[i:]:
                            _release(rest[4])
                        return
                    try:
                        settler.add(
                            _grade_one(run, entry, backends[entry[0][1]], final_attempt, scale)
                        )
                    except PairUnavailable:
                        with lock:
                            outcome.unavailable.append(list(entry[0]))
                    except BaseException:
                        for rest in mine[i + 1 :]:
                            _release(rest[4])
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
        try:  # keep what was paid for: settle the pairs that finished before the error
            settler.flush()
        except Exception:  # noqa: BLE001 - the first error is the one to report
            logger.exception("run %s: settling finished pairs after an error failed", run.pk)
        raise errors[0]
    settler.flush()
    return outcome


# -- grading a chunk on the judge event loop ---------------------------------------------------

# The async path claims up to this many of a judge's pairs with one UPDATE; a claimed pair
# waits here at most until one of the judge's calls ends before its own call starts.
ASYNC_CLAIM_BATCH = 32
# How often the async path asks the database whether the run was cancelled.
STOP_CHECK_SECONDS = 0.5
# The async path's thread looks at finished calls this often (or sooner, once enough have
# finished to submit a batch): a wake-up per finished call cost more CPU than the call.
ASYNC_POLL_SECONDS = 0.02


def _async_ready(work: Sequence[tuple], backends: dict[int, Any]) -> bool:
    """True when every pair's backend can grade on the judge event loop (the openai and
    anthropic backends over their own transport); the reference judge, a refused
    configuration and test doubles take the threaded path."""
    return all(getattr(backends[entry[0][1]], "supports_async", False) for entry in work)


def _grade_async(
    *,
    run: ScoringRun,
    absent: list[tuple],
    judges: dict[int, Judge],
    backends: dict[int, Any],
    final_attempt: bool,
    outcome: ChunkOutcome,
    settler: _BatchSettler,
) -> None:
    """Grade a chunk's pairs with their calls in flight on the judge event loop.

    This thread does all the database work, in batches, and the loop only the HTTP:
    - each judge has up to 2 x `_judge_window` calls handed to the loop for this chunk: the
      window's worth in flight (its Redis limiter still caps it across workers, and the
      backend's semaphore per process) and as many again queued behind them, so a freed slot
      is taken at once by a call already on the loop;
    - calls are handed over in batches of at least half a window (or whatever is left, or at
      once when fewer than a window are on the loop), and this thread wakes when a batch has
      finished or every ASYNC_POLL_SECONDS, not per call;
    - pairs are claimed ASYNC_CLAIM_BATCH at a time by one conditional UPDATE (pairs leased
      elsewhere go to `busy`), and the unfinished earlier calls of those claimed before lost;
    - every call still gets its own "started" ledger row, committed before the call is
      handed over; the rows of the calls handed over together are one INSERT;
    - finished pairs go to `settler` (grade, ledger, items, counters in one transaction);
    - the run is checked for a cancel every STOP_CHECK_SECONDS: then nothing more is
      submitted, the calls on the loop are waited for and settled (a queued one still goes
      out: it was recorded as started), and pairs claimed but not handed over are released.
    On an error here (database, soft time limit) the calls still in flight are cancelled:
    their pairs keep lease and "started" row and count as lost when claimed again.
    """
    import threading
    import time
    from collections import deque

    from scoring.judges import aio

    scale = list(run.benchmark.grade_scale or [0, 1, 2])
    pending: dict[int, deque] = {}
    for entry in absent:
        pending.setdefault(entry[0][1], deque()).append(entry)
    slots = {jid: _judge_window(judges[jid], len(q)) for jid, q in pending.items()}
    window = {jid: min(len(pending[jid]), 2 * slots[jid]) for jid in pending}
    batch = {jid: max(1, slots[jid] // 2) for jid in pending}
    ready: dict[int, deque] = {jid: deque() for jid in pending}
    in_flight = dict.fromkeys(pending, 0)
    done: deque = deque()  # appended on the loop's thread, popped here (deque ops are atomic)
    wake = threading.Event()
    wake_after = min(batch.values(), default=1)
    tasks: list = []
    stopped = False
    next_check = time.monotonic() + STOP_CHECK_SECONDS

    def claim(jid: int, room: int) -> None:
        q = pending[jid]
        group = [q.popleft() for _ in range(min(len(q), max(room, ASYNC_CLAIM_BATCH)))]
        ready[jid].extend(_claim_group(group, outcome, settler.outcome_lock))

    def finished(item: tuple) -> None:  # on the loop's thread
        done.append(item)
        if len(done) >= wake_after:
            wake.set()

    def submit() -> None:
        launch: list[tuple] = []
        for jid in pending:
            room = window[jid] - in_flight[jid]
            if room <= 0 or (room < batch[jid] and in_flight[jid] >= slots[jid]):
                continue
            if len(ready[jid]) < room and pending[jid]:
                claim(jid, room)
            take = min(room, len(ready[jid]))
            launch.extend(ready[jid].popleft() for _ in range(take))
            in_flight[jid] += take
        if not launch:
            return
        calls = _started_rows(run, launch)
        coros = [backends[e[0][1]].agrade(_grading_input(e, scale)) for e in launch]
        aio.start_all(
            coros,
            lambda i, task, launch=launch, calls=calls: finished((launch[i], calls[i], task)),
            tasks,
        )

    def settle(entry: tuple, call: JudgeCall, task: Any) -> None:
        in_flight[entry[0][1]] -= 1
        error = None if task.cancelled() else task.exception()
        try:
            settler.add(
                _finished_pair(
                    run,
                    entry,
                    call,
                    final_attempt,
                    result=None if error else task.result(),
                    error=error,
                )
            )
        except PairUnavailable:
            outcome.unavailable.append(list(entry[0]))

    try:
        while True:
            if not stopped:
                submit()
            if not any(in_flight.values()):
                if stopped or not any(pending.values()) and not any(ready.values()):
                    break
                continue
            wake.wait(ASYNC_POLL_SECONDS)
            wake.clear()
            while done:
                settle(*done.popleft())
            settler.flush_if_due()
            if not stopped and time.monotonic() >= next_check:
                next_check = time.monotonic() + STOP_CHECK_SECONDS
                stopped = _run_stopped(run)
                outcome.stopped = stopped
    except BaseException:
        aio.cancel_all(tasks)
        raise
    finally:
        for q in ready.values():
            for entry in q:
                _release(entry[4])


def _present_results(
    run: ScoringRun, keys: Sequence[tuple], judges: dict[int, Judge]
) -> set[tuple]:
    """Return the chunk's pairs that already have a grade (or verdict) at the judge's current
    prompt version: one query for the whole chunk instead of one per pair."""
    versions = {j.pk: j.prompt_version for j in judges.values()}
    wanted = set(keys)
    if run.kind == ScoringRun.Kind.AUDIT:
        rows = AuditVerdict.objects.filter(
            auditor_id__in=list(versions), key_entry_id__in={k[2] for k in keys}
        ).values_list("auditor_id", "key_entry_id", "prompt_version")
        return {(None, a, e) for a, e, v in rows if versions.get(a) == v} & wanted
    rows = Grade.objects.filter(
        judge_id__in=list(versions),
        response_id__in={k[0] for k in keys},
        key_entry_id__in={k[2] for k in keys},
    ).values_list("response_id", "judge_id", "key_entry_id", "prompt_version")
    return {(r, j, e) for r, j, e, v in rows if versions.get(j) == v} & wanted


class _BrokenBackend:
    """Stands in for a backend whose configuration was refused: every call fails the pair."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def grade(self, inp: Any) -> Any:
        from scoring.judges import JudgeConfigError

        raise JudgeConfigError(str(self.exc))

    audit = grade


def _run_stopped(run: ScoringRun) -> bool:
    status = ScoringRun.objects.filter(pk=run.pk).values_list("status", flat=True).first()
    return status not in ACTIVE_STATUSES


# -- reads for the runs page -----------------------------------------------------------------


def ledger_summary(run: ScoringRun) -> dict[str, int]:
    """Return the run's judge-call ledger: calls sent, answered, retried, failed, lost, started.

    `lost` are calls in flight when a worker was killed: paid for, no grade kept, called
    again; every other pair is paid at most once (`paid_twice` counts exceptions).
    """
    counts = dict(
        JudgeCall.objects.filter(run=run)
        .values_list("outcome")
        .annotate(n=Count("id"))
        .values_list("outcome", "n")
    )
    paid_twice = (
        JudgeCall.objects.filter(run=run, outcome=JudgeCall.Outcome.OK)
        .values("judge_id", "response_id", "key_entry_id", "prompt_version")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    return {
        "calls": sum(counts.values()),
        "ok": counts.get(JudgeCall.Outcome.OK, 0),
        "retries": counts.get(JudgeCall.Outcome.RETRY, 0),
        "failed": counts.get(JudgeCall.Outcome.FAILED, 0),
        "in_flight_at_kill": counts.get(JudgeCall.Outcome.LOST, 0),
        "in_flight": counts.get(JudgeCall.Outcome.STARTED, 0),
        "paid_twice": paid_twice,
    }


def run_summary(run: ScoringRun) -> dict[str, Any]:
    """Return the cli.md JSON shape of a run (plus kind, done and notes)."""
    return {
        "run": run.pk,
        "edition": run.edition.name,
        "kind": run.kind,
        "status": run.status,
        "needed": run.needed,
        "done": run.done,
        "graded": run.graded,
        "reused": run.reused,
        "failed": run.failed,
        "unparsed": run.unparsed,
        "judges": sorted(run.judges.values_list("judge_id", flat=True)),
        "notes": [line for line in run.error.splitlines() if line],
    }
