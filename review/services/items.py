"""Review items and claims: create (triage), claim, claim next, renew, release, reassign.

Claims are conditional UPDATEs that must change exactly one row; "next item" uses
SELECT ... FOR UPDATE SKIP LOCKED on PostgreSQL.
"""

from __future__ import annotations

import hashlib
import logging

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from core.actions import Action
from core.services import audit_log
from questions.models import Benchmark, Question
from review import permissions
from review.errors import (
    InvalidInputError,
    InvalidTransitionError,
    NotAllowedError,
    RateLimitedError,
)
from review.models import (
    Evidence,
    ReaderReport,
    ReviewItem,
    Source,
    fingerprint_of,
)
from review.priority import evidence_priority
from review.services.common import (
    _bump,
    _check_version,
    _claim_deadline,
    _item_entry,
    _item_state,
    _lock_item,
    _log_item,
    _require,
)

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------ items and claims


def review_item_create(
    *,
    question: Question,
    source: str,
    detail: dict | None = None,
    user=None,
) -> tuple[ReviewItem, bool, bool]:
    """Put a question in the queue, or add the evidence to its open item.

    Returns (item, item_created, evidence_added). One item that is not closed per
    question (constraint `reviewitem_one_open_per_question`); evidence is unique per
    item by fingerprint, so repeating a call adds nothing. A manual item needs an
    editor; triage passes user=None (the system).
    """
    source = Source(source)
    detail = detail or {}
    if user is not None and source == Source.MANUAL:
        _require(permissions.can_report_problem(user), "only a reviewer may report a problem")
    elif user is not None:
        _require(permissions.can_run_triage(user), "only an editor may add items to the queue")
    with transaction.atomic():
        item = (
            ReviewItem.objects.select_for_update(of=("self",))
            .select_related("benchmark", "question", "claimed_by")
            .filter(question=question)
            .exclude(status__in=ReviewItem.CLOSED)
            .first()
        )
        created = item is None
        if created:
            first = evidence_priority([(source.value, detail)])
            try:
                with transaction.atomic():
                    item = ReviewItem.objects.create(
                        benchmark_id=question.benchmark_id,
                        question=question,
                        source=source,
                        sources=[source.value],
                        priority=first.points,
                        reasons=first.reasons,
                    )
            except IntegrityError:  # a concurrent triage created it first
                return review_item_create(question=question, source=source, detail=detail)
            item = ReviewItem.objects.select_related("benchmark", "question").get(pk=item.pk)
        fp = fingerprint_of(source.value, detail)
        evidence_added = False
        if not Evidence.objects.filter(item=item, fingerprint=fp).exists():
            Evidence.objects.create(item=item, kind=source, detail=detail, fingerprint=fp)
            evidence_added = True
        before = None if created else _item_state(item)
        sources = list(item.sources)
        if source.value not in sources:
            sources.append(source.value)
        # The one ranking rule (review.priority) over every piece of evidence the item holds.
        ranked = evidence_priority(item.evidence.values_list("kind", "detail"))
        priority, primary = ranked.points, ranked.primary
        if (
            created
            or sources != item.sources
            or priority != item.priority
            or ranked.reasons != item.reasons
        ):
            item.sources, item.priority, item.source = sources, priority, primary
            item.reasons = ranked.reasons
            if created:
                item.save(update_fields=["sources", "priority", "source", "reasons", "updated_at"])
            else:
                _bump(
                    item, sources=sources, priority=priority, source=primary, reasons=ranked.reasons
                )
        if created:
            _log_item(user, Action.REVIEW_ITEM_CREATE, item, None, source=source.value)
        elif before != _item_state(item) or evidence_added:
            _log_item(user, Action.REVIEW_ITEM_ADD_EVIDENCE, item, before, evidence=source.value)
    return item, created, evidence_added


def review_items_file(
    *, found: dict[int, list[tuple[str, dict]]], questions: dict[int, Question], user=None
) -> dict[int, tuple[bool, int]]:
    """Triage's writer: file many questions' evidence at once, as review_item_create would.

    `found` is {question pk: [(source, detail), ...]} in filing order; `questions` holds
    those Question objects (with their benchmark). The result, the items' fields and the
    audit-log entries are those of calling review_item_create once per piece of evidence in
    that order (an item created by the first piece, logged `review_item.create`; each later
    piece that changes the item or adds evidence bumps its version and is logged
    `review_item.add_evidence`), but in a fixed number of statements: the open items locked
    in one query, their evidence fingerprints in one, then bulk inserts and one bulk update.
    Returns {question pk: (item created, pieces of evidence added)}. When a concurrent writer
    created an open item for one of the questions meanwhile (the one-open-item constraint
    refuses the bulk insert), it files them one by one with review_item_create instead.
    Triage is the system: `user` is logged as the actor and is not checked here (triage_run
    checks it).
    """
    from core.models import AuditLogEntry

    if not found:
        return {}
    with transaction.atomic():
        open_items = {
            item.question_id: item
            for item in ReviewItem.objects.select_for_update(of=("self",))
            .select_related("benchmark", "question", "claimed_by")
            .filter(question_id__in=list(found))
            .exclude(status__in=ReviewItem.CLOSED)
        }
        held: dict[int, list[tuple[str, dict]]] = {}
        fps: dict[int, set[str]] = {}
        for item in open_items.values():
            held[item.pk], fps[item.pk] = [], set()
        for item_id, kind, detail, fp in (
            Evidence.objects.filter(item_id__in=list(held))
            .order_by("pk")
            .values_list("item_id", "kind", "detail", "fingerprint")
        ):
            held[item_id].append((kind, detail))
            fps[item_id].add(fp)
        new_items = []
        for qpk, pieces in found.items():
            if qpk in open_items:
                continue
            source, detail = Source(pieces[0][0]), pieces[0][1] or {}
            first = evidence_priority([(source.value, detail)])
            question = questions[qpk]
            new_items.append(
                ReviewItem(
                    benchmark_id=question.benchmark_id,
                    question=question,
                    source=source,
                    sources=[source.value],
                    priority=first.points,
                    reasons=first.reasons,
                )
            )
        try:
            with transaction.atomic():
                ReviewItem.objects.bulk_create(new_items)
        except IntegrityError:  # a concurrent writer made one of them: the careful path
            return _file_one_by_one(found, questions)
        created_for = {item.question_id for item in new_items}
        for item in new_items:
            item.benchmark = questions[item.question_id].benchmark
            open_items[item.question_id] = item
            held[item.pk], fps[item.pk] = [], set()
        batch = _FilingBatch(user=user, held=held, fps=fps, now=timezone.now())
        result: dict[int, tuple[bool, int]] = {}
        for qpk, pieces in found.items():
            item, added_here = open_items[qpk], 0
            for n, (source_value, detail) in enumerate(pieces):
                created = qpk in created_for and n == 0
                added_here += batch.add(item, Source(source_value), detail or {}, created)
            result[qpk] = (qpk in created_for, added_here)
        evidence, entries, changed = batch.evidence, batch.entries, batch.changed
        Evidence.objects.bulk_create(evidence, batch_size=2000)
        ReviewItem.objects.bulk_update(
            list(changed.values()),
            ["sources", "priority", "source", "reasons", "version", "updated_at"],
            batch_size=500,
        )
        AuditLogEntry.objects.bulk_create(entries, batch_size=2000)
    return result


class _FilingBatch:
    """review_items_file's in-memory step: one piece of evidence on one item, exactly as
    review_item_create would file it; the rows to write collect in `evidence`, `entries`
    (audit log) and `changed` (items by pk)."""

    def __init__(self, *, user, held, fps, now) -> None:
        self.user, self.held, self.fps, self.now = user, held, fps, now
        self.evidence: list[Evidence] = []
        self.entries: list = []
        self.changed: dict[int, ReviewItem] = {}

    def add(self, item: ReviewItem, source: Source, detail: dict, created: bool) -> int:
        """File one piece on `item` (`created`: the piece that made it); 1 if it was new."""
        fp = fingerprint_of(source.value, detail)
        added = fp not in self.fps[item.pk]
        if added:
            self.fps[item.pk].add(fp)
            self.held[item.pk].append((source.value, detail))
            self.evidence.append(Evidence(item=item, kind=source, detail=detail, fingerprint=fp))
        before = None if created else _item_state(item)
        sources = list(item.sources)
        if source.value not in sources:
            sources.append(source.value)
        ranked = evidence_priority(self.held[item.pk])
        if (
            created
            or sources != item.sources
            or ranked.points != item.priority
            or ranked.reasons != item.reasons
        ):
            item.sources, item.priority = sources, ranked.points
            item.source, item.reasons = ranked.primary, ranked.reasons
            if not created:
                item.version += 1
            item.updated_at = self.now
            self.changed[item.pk] = item
        if created:
            self.entries.append(
                _item_entry(self.user, Action.REVIEW_ITEM_CREATE, item, None, source=source)
            )
        elif before != _item_state(item) or added:
            self.entries.append(
                _item_entry(
                    self.user, Action.REVIEW_ITEM_ADD_EVIDENCE, item, before, evidence=source
                )
            )
        return int(added)


def _file_one_by_one(
    found: dict[int, list[tuple[str, dict]]], questions: dict[int, Question]
) -> dict[int, tuple[bool, int]]:
    """review_items_file's careful path: review_item_create per piece of evidence."""
    result = {}
    for qpk, pieces in found.items():
        created_any, added = False, 0
        for source, detail in pieces:
            _, created, was_added = review_item_create(
                question=questions[qpk], source=source, detail=detail
            )
            created_any, added = created_any or created, added + was_added
        result[qpk] = (created_any, added)
    return result


#: Longest note on a hand-raised item (characters).
REPORT_NOTE_MAX = 2000


def review_item_report(
    *, question: Question, note: str, user=None, edition_name: str = ""
) -> tuple[ReviewItem, bool]:
    """Raise a review item by hand with `note` as its evidence (source `manual`, issue 17).

    Returns (item, created). Adds the note as evidence to the question's open item if it
    has one. `user` None is the system (the command line without --user). Raises
    InvalidInputError for an empty note or one over REPORT_NOTE_MAX characters, and
    NotAllowedError when `user` is not a reviewer. Audit-logged by review_item_create
    (review_item.create or review_item.add_evidence), in the same transaction.
    """
    note = _clean_note(note, "note")
    detail = {"note": note, "reported_by": user.get_username() if user is not None else "system"}
    if edition_name:
        detail["edition"] = edition_name
    item, created, _ = review_item_create(
        question=question, source=Source.MANUAL, detail=detail, user=user
    )
    return item, created


def _clean_note(note: str, field: str) -> str:
    """Return `note` stripped; raise InvalidInputError (under `field`) if empty or too long."""
    note = (note or "").strip()
    if not note:
        raise InvalidInputError({field: ["Say what looks wrong with the key entry."]})
    if len(note) > REPORT_NOTE_MAX:
        raise InvalidInputError(
            {field: [f"At most {REPORT_NOTE_MAX} characters, not {len(note)}."]}
        )
    return note


#: Longest "source that says so" on a reader's report (characters).
READER_SOURCE_MAX = 1000
_HOUR = 3600


def _count_within_limit(key: str, limit: int, what: str) -> None:
    """Count one more use of `key` this hour (Django cache); raise RateLimitedError past `limit`."""
    cache.add(key, 0, _HOUR)
    try:
        used = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, _HOUR)
        used = 1
    if used > limit:
        raise RateLimitedError(f"too many reports {what}: at most {limit} an hour", _HOUR)


def reader_report_create(
    *, question: Question, what: str, source_text: str = "", email: str = "", address: str
) -> tuple[ReaderReport, bool]:
    """File a reader's key-error report on a public benchmark's question (issue 22).

    No account: the report becomes evidence of kind `reported` on the question's open
    review item, or a new item (`review_item_create`, which logs it as the system). Returns
    (report, item_created). `what` obeys the hand-raised note's rule (`_clean_note`: 1 to
    REPORT_NOTE_MAX characters), `source_text` at most READER_SOURCE_MAX, `email` empty or a
    valid address of at most 254. Rate limits per hour, counted in the Django cache before
    anything is written: SNAGLIST_READER_REPORTS_PER_ADDRESS from one network `address`
    (hashed, never stored) and SNAGLIST_READER_REPORTS_PER_BENCHMARK to the benchmark.
    Raises InvalidInputError (fields `what`, `source_text`, `email`), NotAllowedError
    when the benchmark is not public, RateLimitedError past a limit.
    """
    what = _clean_note(what, "what")
    source_text = (source_text or "").strip()
    email = (email or "").strip()
    errors: dict[str, list[str]] = {}
    if len(source_text) > READER_SOURCE_MAX:
        errors["source_text"] = [f"At most {READER_SOURCE_MAX} characters, not {len(source_text)}."]
    if email:
        try:
            if len(email) > 254:
                raise ValidationError("too long")
            validate_email(email)
        except ValidationError:
            errors["email"] = ["Enter a valid email address, or leave it empty."]
    if errors:
        raise InvalidInputError(errors)
    benchmark = question.benchmark
    if not benchmark.is_public:
        raise NotAllowedError(f"{benchmark.name} does not take reports from readers")
    digest = hashlib.sha256(f"{settings.SECRET_KEY}:{address}".encode()).hexdigest()[:32]
    _count_within_limit(
        f"reader-report:address:{digest}",
        settings.SNAGLIST_READER_REPORTS_PER_ADDRESS,
        "from your address",
    )
    _count_within_limit(
        f"reader-report:benchmark:{benchmark.pk}",
        settings.SNAGLIST_READER_REPORTS_PER_BENCHMARK,
        f"about {benchmark.name}",
    )
    received = timezone.now()
    detail = {
        "note": what,
        "source": source_text,
        "reported_by": "a reader",
        "received": received.isoformat(),
    }
    with transaction.atomic():
        item, created, _ = review_item_create(
            question=question, source=Source.REPORTED, detail=detail
        )
        evidence = Evidence.objects.get(
            item=item, fingerprint=fingerprint_of(Source.REPORTED.value, detail)
        )
        report = ReaderReport.objects.create(
            item=item,
            evidence=evidence,
            question=question,
            what=what,
            source_text=source_text,
            email=email,
            created_at=received,
        )
    return report, created


def reader_report_mark_spam(*, report: ReaderReport, user) -> ReaderReport:
    """Mark a reader's report as spam (a reviewer or higher); logged as `reader_report.spam`.

    A conditional UPDATE that must change one row: a report already marked raises
    InvalidTransitionError. The report and its evidence stay, the evidence marked `spam`,
    so the item's priority is ranked again without it (review.priority: spam counts for
    nothing; an item with no other evidence sinks to priority 0). Raises NotAllowedError
    for a non-reviewer.
    """
    _require(permissions.can_mark_spam(user), "only a reviewer may mark a report as spam")
    now = timezone.now()
    with transaction.atomic():
        changed = ReaderReport.objects.filter(pk=report.pk, spam=False).update(
            spam=True, spam_marked_by=user, spam_marked_at=now
        )
        if changed != 1:
            raise InvalidTransitionError(f"report {report.pk} is already marked as spam")
        marked = ReaderReport.objects.select_related("item", "question", "evidence").get(
            pk=report.pk
        )
        evidence = marked.evidence
        evidence.detail = {**evidence.detail, "spam": True}
        evidence.save(update_fields=["detail"])
        item = _lock_item(marked.item)
        ranked = evidence_priority(item.evidence.values_list("kind", "detail"))
        if (ranked.points, ranked.reasons) != (item.priority, item.reasons):
            # With no evidence left the item keeps its source: it came from a reader.
            primary = ranked.primary if ranked.points else item.source
            _bump(item, priority=ranked.points, reasons=ranked.reasons, source=primary)
        audit_log(
            actor=user,
            action=Action.READER_REPORT_SPAM,
            target_type="reader_report",
            target_id=marked.pk,
            target_label=f"report {marked.pk} on {marked.question.question_id}",
            benchmark_name=marked.item.benchmark.name,
            before={"spam": False},
            after={"spam": True, "item": marked.item_id},
        )
    return marked


def review_item_claim(*, item: ReviewItem, user) -> ReviewItem:
    """Claim a specific item for SNAGLIST_CLAIM_MINUTES.

    A conditional UPDATE (open, or a claim that has expired) that must change exactly one
    row: of two concurrent claims exactly one wins; the other gets InvalidTransitionError.
    Claiming an item one already holds renews it.
    """
    _require(permissions.can_claim(user), "only a reviewer may claim review items")
    now = timezone.now()
    with transaction.atomic():
        current = ReviewItem.objects.select_related("claimed_by").get(pk=item.pk)
        if current.is_held_by(user, now):
            return review_item_renew(item=current, user=user)
        before = _item_state(current)
        changed = ReviewItem.objects.filter(ReviewItem.claimable_q(now), pk=item.pk).update(
            status=ReviewItem.Status.CLAIMED,
            claimed_by=user,
            claimed_at=now,
            claim_expires_at=_claim_deadline(now),
            version=F("version") + 1,
            updated_at=now,
        )
        if changed != 1:
            holder = ReviewItem.objects.select_related("claimed_by").get(pk=item.pk)
            who = f" by {holder.claimed_by.get_username()}" if holder.claimed_by_id else ""
            raise InvalidTransitionError(
                f"review item {item.pk} cannot be claimed: it is {holder.get_status_display().lower()}{who}"
            )
        claimed = ReviewItem.objects.select_related("benchmark", "question", "claimed_by").get(
            pk=item.pk
        )
        _log_item(user, Action.REVIEW_ITEM_CLAIM, claimed, before)
    return claimed


def review_item_claim_next(
    *, user, benchmark: Benchmark | None = None, source: str = ""
) -> ReviewItem | None:
    """Claim the highest-priority claimable item (optionally of one benchmark/source).

    PostgreSQL: SELECT ... FOR UPDATE SKIP LOCKED, so two reviewers pressing "next" at once
    get different items. SQLite (one writer at a time): try candidates in order with the
    conditional update until one sticks. Returns None when nothing is claimable.
    """
    _require(permissions.can_claim(user), "only a reviewer may claim review items")
    now = timezone.now()
    candidates = ReviewItem.objects.filter(ReviewItem.claimable_q(now))
    if benchmark is not None:
        candidates = candidates.filter(benchmark=benchmark)
    if source:
        candidates = candidates.filter(source=source)
    candidates = candidates.order_by("-priority", "id")
    if connection.vendor == "postgresql":
        with transaction.atomic():
            # The related rows come with the locked one (of=self: only the item is locked),
            # so the claim reads nothing again after its update.
            item = (
                candidates.select_related("benchmark", "question", "claimed_by")
                .select_for_update(skip_locked=True, of=("self",))
                .first()
            )
            if item is None:
                return None
            before = _item_state(item)
            _bump(
                item,
                status=ReviewItem.Status.CLAIMED,
                claimed_by=user,
                claimed_at=now,
                claim_expires_at=_claim_deadline(now),
            )
            _log_item(user, Action.REVIEW_ITEM_CLAIM, item, before, via="next")
            return item
    for pk in candidates.values_list("pk", flat=True)[:50]:
        try:
            return review_item_claim(item=ReviewItem(pk=pk), user=user)
        except InvalidTransitionError:
            continue
    return None


def review_item_renew(*, item: ReviewItem, user) -> ReviewItem:
    """Extend one's own live claim by SNAGLIST_CLAIM_MINUTES from now."""
    with transaction.atomic():
        locked = _lock_item(item)
        _require(permissions.holds_claim(user, locked), "you do not hold a claim on this item")
        before = _item_state(locked)
        _bump(locked, claim_expires_at=_claim_deadline())
        _log_item(user, Action.REVIEW_ITEM_RENEW, locked, before)
    return locked


def review_item_release(*, item: ReviewItem, user, version: int | None = None) -> ReviewItem:
    """Give a claimed item back to the queue (its holder, or an editor)."""
    with transaction.atomic():
        locked = _lock_item(item)
        _require(permissions.can_release(user, locked), "you may not release this item")
        _check_version(locked, version)
        if locked.status != ReviewItem.Status.CLAIMED:
            raise InvalidTransitionError("only a claimed item can be released")
        before = _item_state(locked)
        _bump(
            locked,
            status=ReviewItem.Status.OPEN,
            claimed_by=None,
            claimed_at=None,
            claim_expires_at=None,
        )
        _log_item(user, Action.REVIEW_ITEM_RELEASE, locked, before)
    return locked


def review_item_reassign(
    *, item: ReviewItem, user, assignee, version: int | None = None
) -> ReviewItem:
    """Give an open or claimed item to another reviewer (editor only); a fresh claim starts."""
    from core.roles import Role, has_role

    _require(permissions.can_reassign(user), "only an editor may reassign review items")
    if not has_role(assignee, Role.REVIEWER):
        raise InvalidInputError({"assignee": [f"{assignee.get_username()} is not a reviewer"]})
    with transaction.atomic():
        locked = _lock_item(item)
        _check_version(locked, version)
        if locked.status not in (ReviewItem.Status.OPEN, ReviewItem.Status.CLAIMED):
            raise InvalidTransitionError(
                f"an item that is {locked.get_status_display().lower()} cannot be reassigned"
            )
        before = _item_state(locked)
        now = timezone.now()
        _bump(
            locked,
            status=ReviewItem.Status.CLAIMED,
            claimed_by=assignee,
            claimed_at=now,
            claim_expires_at=_claim_deadline(now),
        )
        _log_item(user, Action.REVIEW_ITEM_REASSIGN, locked, before)
    return locked
