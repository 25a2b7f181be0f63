"""Every state change of the review workflow: one keyword-only function per action.

Each runs in one transaction, asks review.permissions (raising NotAllowedError), raises a
domain error for an illegal transition, and writes its audit log entry in the same
transaction. Side effects outside the database (re-scoring) run only after commit.

Concurrency: claims are conditional UPDATEs that must change exactly one row; "next item"
uses SELECT ... FOR UPDATE SKIP LOCKED on PostgreSQL. Edits based on a stale item
`version` raise ConflictError (HTTP 409) and write nothing.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from core.actions import Action
from core.models import AuditLogEntry
from core.services import audit_log
from questions import services as question_services
from questions.models import Benchmark, KeyEdition, KeyEntry, Question, SourceDocument
from questions.selectors import latest_published_edition
from review import permissions
from review.errors import (
    ConflictError,
    InvalidInputError,
    InvalidTransitionError,
    NotAllowedError,
)
from review.models import (
    CitationCheck,
    Evidence,
    Proposal,
    ReviewItem,
    Source,
    fingerprint_of,
)
from review.selectors import entry_for_question, working_edition
from scoring import audit_rule
from scoring import services as scoring_services

logger = logging.getLogger(__name__)

# Queue order (issue 4): both judges flagged > consensus > single auditor > other.
SOURCE_TIER = {
    "judge_flag_both": 4,
    Source.CONSENSUS_AGAINST_KEY: 3,
    Source.SINGLE_AUDITOR_FLAG: 2,
    Source.JUDGE_FLAG: 1,
    Source.SUPERSEDED_CITATION: 1,
    Source.MANUAL: 0,
}


# ------------------------------------------------------------------ audit log


def _item_state(item: ReviewItem) -> dict[str, Any]:
    return {
        "status": item.status,
        "claimed_by": item.claimed_by.get_username() if item.claimed_by_id else None,
        "claim_expires_at": item.claim_expires_at.isoformat() if item.claim_expires_at else None,
        "version": item.version,
        "priority": item.priority,
        "sources": list(item.sources),
    }


def _log_item(actor, action: str, item: ReviewItem, before: dict | None, **extra) -> None:
    after = _item_state(item)
    after.update(extra)
    audit_log(
        actor=actor,
        action=action,
        target_type="review_item",
        target_id=item.pk,
        target_label=f"{item.benchmark.name}/{item.question.question_id}",
        benchmark_name=item.benchmark.name,
        before=before,
        after=after,
    )


# ------------------------------------------------------------------ helpers


def _claim_deadline(now=None):
    return (now or timezone.now()) + timedelta(minutes=settings.SNAGLIST_CLAIM_MINUTES)


def _lock_item(item: ReviewItem) -> ReviewItem:
    return (
        ReviewItem.objects.select_for_update(of=("self",))
        .select_related("benchmark", "question", "claimed_by")
        .get(pk=item.pk)
    )


def _check_version(item: ReviewItem, version: int | None) -> None:
    """Raise ConflictError listing the changes since `version` when it is stale."""
    if version is None or int(version) == item.version:
        return
    changes = []
    for entry in AuditLogEntry.objects.filter(
        target_type="review_item", target_id=str(item.pk)
    ).order_by("created_at", "id"):
        after = entry.after or {}
        if isinstance(after, dict) and after.get("version", 0) > int(version):
            changes.append(
                {
                    "action": entry.action,
                    "actor": entry.actor_label,
                    "at": entry.created_at.isoformat(),
                    "before": entry.before,
                    "after": entry.after,
                }
            )
    raise ConflictError(
        f"review item {item.pk} changed since you loaded it (version {version}, now "
        f"{item.version}): reload and try again",
        current_version=item.version,
        changes=changes,
    )


def _require(allowed: bool, message: str) -> None:
    if not allowed:
        raise NotAllowedError(message)


def _claim_needed(item: ReviewItem, user, doing: str) -> str:
    """The refusal for acting on an item one does not hold: who holds it, if anyone else."""
    holder = item.claimed_by
    if holder is not None and holder.pk != getattr(user, "pk", None):
        return (
            f"{holder.get_username()} holds this item now (it was claimed or reassigned "
            f"after you opened it), so {doing} was not saved"
        )
    return f"claim the item before {doing} can be saved"


def _bump(item: ReviewItem, **fields) -> None:
    """Write `fields` and version+1 on a locked item; refresh the Python object."""
    for name, value in fields.items():
        setattr(item, name, value)
    item.version += 1
    item.save(update_fields=[*fields, "version", "updated_at"])


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
    if user is not None:
        _require(permissions.can_run_triage(user), "only an editor may add items to the queue")
    source = Source(source)
    detail = detail or {}
    tier = SOURCE_TIER["judge_flag_both"] if detail.get("both_judges") else SOURCE_TIER[source]
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
            try:
                with transaction.atomic():
                    item = ReviewItem.objects.create(
                        benchmark_id=question.benchmark_id,
                        question=question,
                        source=source,
                        sources=[source.value],
                        priority=tier * 100 + 1,
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
        best_tier = max(tier, item.priority // 100)
        priority = best_tier * 100 + len(sources)
        primary = item.source if item.priority // 100 >= tier and not created else source.value
        if created or sources != item.sources or priority != item.priority:
            item.sources, item.priority, item.source = sources, priority, primary
            if created:
                item.save(update_fields=["sources", "priority", "source", "updated_at"])
            else:
                _bump(item, sources=sources, priority=priority, source=primary)
        if created:
            _log_item(user, Action.REVIEW_ITEM_CREATE, item, None, source=source.value)
        elif before != _item_state(item) or evidence_added:
            _log_item(user, Action.REVIEW_ITEM_ADD_EVIDENCE, item, before, evidence=source.value)
    return item, created, evidence_added


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
            item = candidates.select_for_update(skip_locked=True).first()
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
            item = ReviewItem.objects.select_related("benchmark", "question", "claimed_by").get(
                pk=item.pk
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


# ------------------------------------------------------------------ checks and proposals


def citation_check_record(
    *,
    item: ReviewItem,
    user,
    version: int | None,
    locator_exists: str,
    supports: str,
    edition_in_force: str,
    amended: str,
    note: str = "",
    source_url: str = "",
) -> CitationCheck:
    """Record the holder's check of the key's citation against the source (rule 5)."""
    errors: dict[str, list[str]] = {}
    for name, value, choices in (
        ("locator_exists", locator_exists, CitationCheck.YesNo),
        ("supports", supports, CitationCheck.Supports),
        ("edition_in_force", edition_in_force, CitationCheck.InForce),
        ("amended", amended, CitationCheck.Amended),
    ):
        if value not in choices.values:
            errors[name] = [f"Choose one of: {', '.join(choices.labels)}."]
    if errors:
        raise InvalidInputError(errors)
    with transaction.atomic():
        locked = _lock_item(item)
        _require(
            permissions.can_check(user, locked), _claim_needed(locked, user, "the citation check")
        )
        _check_version(locked, version)
        entry = entry_for_question(locked.question, working_edition(locked.benchmark))
        check = CitationCheck.objects.create(
            item=locked,
            reviewer=user,
            key_entry=entry,
            locator_exists=locator_exists,
            supports=supports,
            edition_in_force=edition_in_force,
            amended=amended,
            note=note,
            source_url=source_url,
        )
        before = _item_state(locked)
        _bump(locked)
        after = {
            "item": locked.pk,
            "version": locked.version,
            "locator_exists": locator_exists,
            "supports": supports,
            "edition_in_force": edition_in_force,
            "amended": amended,
            "note": note,
            "source_url": source_url,
        }
        audit_log(
            actor=user,
            action=Action.CITATION_CHECK_RECORD,
            target_type="citation_check",
            target_id=check.pk,
            target_label=f"{locked.benchmark.name}/{locked.question.question_id}",
            benchmark_name=locked.benchmark.name,
            before=None,
            after=after,
        )
        _log_item(user, Action.REVIEW_ITEM_CHECK, locked, before, check=check.pk)
    return check


def _proposal_state(p: Proposal) -> dict[str, Any]:
    return {
        "item": p.item_id,
        "action": p.action,
        "status": p.status,
        "answer": p.answer,
        "citation": {
            "doc_id": p.citation_doc_id,
            "locator": p.citation_locator,
            "quote": p.citation_quote,
        },
        "reason": p.reason,
        "note": p.note,
        "author": p.author.get_username() if p.author_id else None,
        "decided_by": p.decided_by.get_username() if p.decided_by_id else None,
        "decision_comment": p.decision_comment,
        "key_entry": p.key_entry_id,
    }


def proposal_create(
    *,
    item: ReviewItem,
    user,
    version: int | None,
    action: str,
    answer: str = "",
    citation_doc_id: str = "",
    citation_locator: str = "",
    citation_quote: str = "",
    reason: str = "",
    note: str = "",
) -> Proposal:
    """Propose an outcome for a claimed item: confirm the key, a correction or a removal.

    The item waits for an editor other than the author (rule 6). A correction must
    change the answer or the citation and name a known document; corrections and
    removals need a reason. Raises InvalidInputError (field errors), NotAllowedError,
    ConflictError.
    """
    errors: dict[str, list[str]] = {}
    if action not in Proposal.Action.values:
        errors["action"] = ["Choose confirm, correction or removal."]
    if action != Proposal.Action.CONFIRM and reason not in KeyEntry.Reason.values:
        errors["reason"] = ["A correction or removal needs a reason."]
    if reason and reason not in KeyEntry.Reason.values:
        errors["reason"] = ["Unknown reason."]
    answer, citation_doc_id = answer.strip(), citation_doc_id.strip()
    citation_locator, citation_quote = citation_locator.strip(), citation_quote.strip()
    if errors:
        raise InvalidInputError(errors)
    with transaction.atomic():
        locked = _lock_item(item)
        _require(permissions.can_propose(user, locked), _claim_needed(locked, user, "a proposal"))
        _check_version(locked, version)
        if locked.status != ReviewItem.Status.CLAIMED:
            raise InvalidTransitionError("the item already has a proposal awaiting approval")
        base = entry_for_question(locked.question, working_edition(locked.benchmark))
        if action == Proposal.Action.CORRECT:
            if not answer:
                errors["answer"] = ["A correction needs the corrected answer."]
            if (
                citation_doc_id
                and not SourceDocument.objects.filter(
                    benchmark=locked.benchmark, doc_id=citation_doc_id
                ).exists()
            ):
                errors["citation_doc_id"] = [f"No source document {citation_doc_id!r}."]
            if citation_doc_id and not citation_locator:
                errors["citation_locator"] = ["Give the clause, table or diagram."]
            if (
                base is not None
                and not errors
                and (
                    answer == base.answer
                    and citation_doc_id == base.citation_doc_id
                    and citation_locator == base.citation_locator
                    and citation_quote == base.citation_quote
                )
            ):
                errors["answer"] = ["Nothing changed: change the answer or the citation."]
            if errors:
                raise InvalidInputError(errors)
        elif action != Proposal.Action.CORRECT:
            answer = citation_doc_id = citation_locator = citation_quote = ""
        proposal = Proposal.objects.create(
            item=locked,
            author=user,
            action=action,
            base_entry=base,
            answer=answer,
            citation_doc_id=citation_doc_id,
            citation_locator=citation_locator,
            citation_quote=citation_quote,
            reason=reason if action != Proposal.Action.CONFIRM else (reason or ""),
            note=note,
        )
        before = _item_state(locked)
        _bump(locked, status=ReviewItem.Status.PROPOSED, claim_expires_at=None)
        _log_proposal(user, Action.PROPOSAL_CREATE, proposal, locked, before=None)
        _log_item(user, Action.REVIEW_ITEM_PROPOSE, locked, before, proposal=proposal.pk)
    return proposal


def _lock_proposal(proposal: Proposal) -> Proposal:
    return (
        Proposal.objects.select_for_update(of=("self",))
        .select_related("author", "item", "item__benchmark", "item__question", "base_entry")
        .get(pk=proposal.pk)
    )


def draft_edition_get_or_create(*, benchmark: Benchmark, user=None) -> KeyEdition:
    """Return the benchmark's draft key edition, opening `corrected-N` on the latest published."""
    draft = KeyEdition.objects.filter(benchmark=benchmark, status=KeyEdition.Status.DRAFT).first()
    if draft is not None:
        return draft
    parent = latest_published_edition(benchmark)
    names = set(KeyEdition.objects.filter(benchmark=benchmark).values_list("name", flat=True))
    n = 1
    while f"corrected-{n}" in names:
        n += 1
    draft = question_services.key_edition_create(
        benchmark=benchmark,
        name=f"corrected-{n}",
        parent=parent,
        note="Corrections and removals approved in review.",
        user=user,
    )
    audit_log(
        actor=user,
        action=Action.KEY_EDITION_CREATE,
        target_type="key_edition",
        target_id=draft.pk,
        target_label=f"{benchmark.name}/{draft.name}",
        benchmark_name=benchmark.name,
        after={"name": draft.name, "parent": parent.name if parent else None, "status": "draft"},
    )
    return draft


def _log_proposal(user, action: str, proposal: Proposal, item: ReviewItem, *, before) -> None:
    """Write the audit-log entry of a proposal's state change (same transaction as the change)."""
    audit_log(
        actor=user,
        action=action,
        target_type="proposal",
        target_id=proposal.pk,
        target_label=f"{item.benchmark.name}/{item.question.question_id}",
        benchmark_name=item.benchmark.name,
        before=before,
        after=_proposal_state(proposal),
    )


def _lock_pending_for_decision(proposal: Proposal, user, verb: str, allowed) -> Proposal:
    """Lock a proposal for an editor's decision; refuse the author (rule 6) or a decided one.

    Raises NotAllowedError (not an editor, or the author) or InvalidTransitionError.
    """
    locked = _lock_proposal(proposal)
    _require(
        allowed(user, locked),
        f"you cannot {verb} your own proposal"
        if locked.author_id == getattr(user, "pk", None)
        else f"only an editor may {verb} proposals",
    )
    if not locked.is_pending():
        raise InvalidTransitionError(f"the proposal is already {locked.status}")
    return locked


def proposal_approve(*, proposal: Proposal, user, comment: str = "") -> Proposal:
    """Approve a pending proposal (an editor other than its author: rule 6).

    A correction or removal creates the question's KeyEntry in the benchmark's draft key
    edition (opened as a child of the latest published one if needed) via
    questions.services.key_entry_create; a confirmation changes no key. The item closes
    as confirmed / corrected / removed.
    """
    with transaction.atomic():
        locked = _lock_pending_for_decision(proposal, user, "approve", permissions.can_approve)
        before = _proposal_state(locked)
        item = _lock_item(locked.item)
        if locked.changes_key():
            draft = draft_edition_get_or_create(benchmark=item.benchmark, user=user)
            base = locked.base_entry
            if locked.action == Proposal.Action.REMOVE:
                fields = {
                    "answer": base.answer if base else "",
                    "citation_doc_id": base.citation_doc_id if base else "",
                    "citation_locator": base.citation_locator if base else "",
                    "citation_quote": base.citation_quote if base else "",
                    "has_citation": base.has_citation if base else False,
                    "removed": True,
                }
            else:
                fields = {
                    "answer": locked.answer,
                    "citation_doc_id": locked.citation_doc_id,
                    "citation_locator": locked.citation_locator,
                    "citation_quote": locked.citation_quote,
                    "has_citation": bool(locked.citation_doc_id),
                    "removed": False,
                }
            locked.key_entry = question_services.key_entry_create(
                edition=draft,
                question=item.question,
                reason=locked.reason,
                note=locked.note,
                **fields,
            )
        locked.status = Proposal.Status.APPROVED
        locked.decided_by = user
        locked.decided_at = timezone.now()
        locked.decision_comment = comment
        locked.save(
            update_fields=["status", "decided_by", "decided_at", "decision_comment", "key_entry"]
        )
        outcome = {
            Proposal.Action.CONFIRM: ReviewItem.Status.CONFIRMED,
            Proposal.Action.CORRECT: ReviewItem.Status.CORRECTED,
            Proposal.Action.REMOVE: ReviewItem.Status.REMOVED,
        }[locked.action]
        item_before = _item_state(item)
        _bump(item, status=outcome, claim_expires_at=None, closed_at=timezone.now())
        _log_proposal(user, Action.PROPOSAL_APPROVE, locked, item, before=before)
        _log_item(user, Action.REVIEW_ITEM_CLOSE, item, item_before, proposal=locked.pk)
    return locked


def proposal_reject(*, proposal: Proposal, user, comment: str) -> Proposal:
    """Reject a pending proposal with a comment; the item goes back to its reviewer (claimed)."""
    if not (comment or "").strip():
        raise InvalidInputError({"comment": ["Say why the proposal is rejected."]})
    with transaction.atomic():
        locked = _lock_pending_for_decision(proposal, user, "reject", permissions.can_reject)
        before = _proposal_state(locked)
        locked.status = Proposal.Status.REJECTED
        locked.decided_by = user
        locked.decided_at = timezone.now()
        locked.decision_comment = comment.strip()
        locked.save(update_fields=["status", "decided_by", "decided_at", "decision_comment"])
        item = _lock_item(locked.item)
        item_before = _item_state(item)
        now = timezone.now()
        _bump(
            item,
            status=ReviewItem.Status.CLAIMED,
            claimed_by=locked.author,
            claimed_at=now,
            claim_expires_at=_claim_deadline(now),
        )
        _log_proposal(user, Action.PROPOSAL_REJECT, locked, item, before=before)
        _log_item(user, Action.REVIEW_ITEM_RETURN, item, item_before, proposal=locked.pk)
    return locked


def proposal_withdraw(*, proposal: Proposal, user) -> Proposal:
    """Withdraw one's own pending proposal; the item goes back to the author's claim."""
    with transaction.atomic():
        locked = _lock_proposal(proposal)
        _require(locked.author_id == getattr(user, "pk", None), "only the author may withdraw")
        if not locked.is_pending():
            raise InvalidTransitionError(f"the proposal is already {locked.status}")
        before = _proposal_state(locked)
        locked.status = Proposal.Status.WITHDRAWN
        locked.save(update_fields=["status"])
        item = _lock_item(locked.item)
        item_before = _item_state(item)
        _bump(item, status=ReviewItem.Status.CLAIMED, claim_expires_at=_claim_deadline())
        _log_proposal(user, Action.PROPOSAL_WITHDRAW, locked, item, before=before)
        _log_item(user, Action.REVIEW_ITEM_RETURN, item, item_before, proposal=locked.pk)
    return locked


# ------------------------------------------------------------------ editions and exclusions


def key_edition_publish(*, edition: KeyEdition, user) -> KeyEdition:
    """Publish a draft key edition (editor); it is then immutable (rule 7).

    Records the affected questions (its corrections and removals) in the audit log and,
    after commit, asks scoring to re-grade their responses (rule 8) through
    `scoring.services.rescore_after_publish(edition_id)`.
    """
    _require(permissions.can_publish(user), "only an editor may publish a key edition")
    with transaction.atomic():
        locked = (
            KeyEdition.objects.select_for_update().select_related("benchmark").get(pk=edition.pk)
        )
        if locked.is_published():
            raise InvalidTransitionError(f"key edition {locked.name!r} is already published")
        entries = list(
            KeyEntry.objects.filter(edition=locked)
            .select_related("question")
            .order_by("question__question_id")
        )
        if not entries:
            raise InvalidTransitionError(f"key edition {locked.name!r} has no changes to publish")
        pending = Proposal.objects.filter(
            status=Proposal.Status.PENDING, item__benchmark=locked.benchmark
        ).count()
        published = question_services.key_edition_publish(edition=locked, user=user)
        affected = {
            "corrected": [e.question.question_id for e in entries if not e.removed],
            "removed": [e.question.question_id for e in entries if e.removed],
        }
        audit_log(
            actor=user,
            action=Action.KEY_EDITION_PUBLISH,
            target_type="key_edition",
            target_id=locked.pk,
            target_label=f"{locked.benchmark.name}/{locked.name}",
            benchmark_name=locked.benchmark.name,
            before={"status": "draft"},
            after={
                "status": "published",
                "parent": locked.parent.name if locked.parent_id else None,
                "affected": affected,
                "affected_question_pks": [e.question_id for e in entries],
                "rescoring_requested": True,
                "pending_proposals_left": pending,
            },
        )
        edition_id = locked.pk
        # Looked up when the callback runs, so the one name in scoring.services is called.
        transaction.on_commit(lambda: scoring_services.rescore_after_publish(edition_id))
    return published


def key_entry_exclude(
    *, entry: KeyEntry, reason: str, user=None, detail: dict | None = None
) -> bool:
    """Exclude a key entry from scoring (rule 4) and log it; returns False if it already was.

    The exclusion holds in every edition whose effective entry for the question is `entry`
    and in no other (questions.models.AuditExclusion). Written by scoring.audit_rule's
    one writer of exclusions, which logs it against the question, with the entry's
    edition and `detail`, in this transaction.
    """
    with transaction.atomic():
        new = audit_rule.exclusions_write(entries=[(entry, detail or {})], reason=reason, user=user)
    return bool(new)
