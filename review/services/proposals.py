"""Citation checks and proposals: record a check; propose, approve, reject, withdraw.

An approved correction or removal lands in the benchmark's draft key edition
(review.services.editions); an editor never approves their own proposal (rule 6).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.actions import Action
from core.services import audit_log
from questions import services as question_services
from questions.models import KeyEntry, SourceDocument
from review import permissions
from review.errors import (
    ConflictError,
    InvalidInputError,
    InvalidTransitionError,
    NotAllowedError,
)
from review.models import (
    CitationCheck,
    Proposal,
    ReviewItem,
    Source,
)
from review.selectors import entry_for_question, working_edition
from review.services.common import (
    _bump,
    _check_version,
    _claim_deadline,
    _item_state,
    _lock_item,
    _log_item,
    _require,
    _require_claim,
)
from review.services.editions import draft_edition_get_or_create

logger = logging.getLogger(__name__)


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
        _require_claim(permissions.can_check(user, locked), locked, user, "the citation check")
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


#: Queue evidence strong enough that confirming the key over it needs a stated reason:
#: the machine's citation check failed (superseded_citation), or models or judges stand
#: against the key (issue 30 item 2). One judge's flag or one auditor is not enough.
STRONG_SOURCES = frozenset(
    {
        Source.SUPERSEDED_CITATION,
        Source.CONSENSUS_AGAINST_KEY,
        Source.MODELS_AGAINST_KEY,
        Source.PANEL_AGAINST_KEY,
        Source.RESPONSES_AGREE_AGAINST_KEY,
    }
)
#: A proposal's reason -> the citation-check answers that contradict it (issue 30 item 1:
#: "Amended or repealed since" with "amended: no" went unnoticed). The decision panel
#: warns before saving (static/js/review.js reads this table from the page) and the
#: approvals page flags the proposal to the editor.
CONTRADICTIONS: dict[str, tuple[str, str, str]] = {
    # reason: (check field, the answer that contradicts it, that answer in words)
    KeyEntry.Reason.AMENDED_OR_REPEALED: ("amended", "no", "not amended or repealed since"),
    KeyEntry.Reason.SUPERSEDED_EDITION: ("edition_in_force", "yes", "the edition is in force"),
}


def check_contradictions(reason: str, check: dict[str, str] | CitationCheck | None) -> list[str]:
    """Return, in words, where a citation check contradicts the proposal `reason` ([]: none).

    `check` is a CitationCheck or a dict of its answers. E.g. reason "amended_or_repealed"
    with amended "no" gives ['the reason is "Amended or repealed since" but the citation
    check says not amended or repealed since']. Rules: CONTRADICTIONS.
    """
    if check is None or reason not in CONTRADICTIONS:
        return []
    field, answer, words = CONTRADICTIONS[reason]
    given = check.get(field) if isinstance(check, dict) else getattr(check, field)
    if given != answer:
        return []
    return [
        f"the reason is \u201c{KeyEntry.Reason(reason).label}\u201d but the citation check says {words}"
    ]


#: Longest override reason (Proposal.override_reason), one line.
OVERRIDE_REASON_MAX = 200


def standing_evidence(item: ReviewItem, check: CitationCheck | None) -> list[str]:
    """Return, in words, what a confirmation of `item`'s key would go against ([] if nothing).

    `check` is the confirming reviewer's citation check (None: none recorded). It stands
    against the key when it says the locator does not exist or the passage does not
    support the key (a superseded edition may still be the one the question asks about);
    the item's queue evidence does when
    its sources include one of STRONG_SOURCES (then the item's reasons are quoted). Both
    pages (the decision panel) and the API ask proposal_create, which asks this.
    """
    out = []
    if check is not None:
        if check.locator_exists == CitationCheck.YesNo.NO:
            out.append("your check says the locator does not exist")
        if check.supports == CitationCheck.Supports.NO:
            out.append("your check says the passage does not support the key")
    if STRONG_SOURCES.intersection(item.sources or [item.source]):
        out.append(f"the queue's evidence ({item.reasons.rstrip('.')})")
    return out


def _override_errors(item: ReviewItem, user, override_reason: str) -> dict[str, list[str]]:
    """Field errors of a confirmation of `item` by `user` with `override_reason` (stripped)."""
    if "\n" in override_reason or "\r" in override_reason:
        return {"override_reason": ["One line, please."]}
    if len(override_reason) > OVERRIDE_REASON_MAX:
        return {"override_reason": [f"At most {OVERRIDE_REASON_MAX} characters."]}
    check = item.checks.filter(reviewer=user).order_by("-created_at", "-id").first()
    standing = standing_evidence(item, check)
    if standing and not override_reason:
        return {
            "override_reason": [
                f"You are confirming the key although {'; and '.join(standing)}: "
                "say in one line why the key stands."
            ]
        }
    return {}


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
        "override_reason": p.override_reason,
        "author": p.author.get_username() if p.author_id else None,
        "decided_by": p.decided_by.get_username() if p.decided_by_id else None,
        "decision_comment": p.decision_comment,
        "key_entry": p.key_entry_id,
    }


def _correction_errors(
    item: ReviewItem,
    base: KeyEntry | None,
    answer: str,
    citation_doc_id: str,
    citation_locator: str,
    citation_quote: str,
) -> dict[str, list[str]]:
    """Return the field errors of a correction of `item`'s key entry `base` (empty: valid)."""
    errors: dict[str, list[str]] = {}
    if not answer:
        errors["answer"] = ["A correction needs the corrected answer."]
    if (
        citation_doc_id
        and not SourceDocument.objects.filter(
            benchmark=item.benchmark, doc_id=citation_doc_id
        ).exists()
    ):
        errors["citation_doc_id"] = [f"No source document {citation_doc_id!r}."]
    if citation_doc_id and not citation_locator:
        errors["citation_locator"] = ["Give the clause, table or diagram."]
    unchanged = base is not None and (
        answer == base.answer
        and citation_doc_id == base.citation_doc_id
        and citation_locator == base.citation_locator
        and citation_quote == base.citation_quote
    )
    if unchanged and not errors:
        errors["answer"] = ["Nothing changed: change the answer or the citation."]
    return errors


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
    override_reason: str = "",
) -> Proposal:
    """Propose an outcome for a claimed item: confirm the key, a correction or a removal.

    A correction or removal waits for an editor other than the author (rule 6). A
    confirmation changes no key and, unless settings.SNAGLIST_CONFIRMATION_NEEDS_APPROVAL,
    closes the item as confirmed at once: the proposal is stored with status "recorded"
    (no editor) and logged as proposal.create and review_item.close; with the setting on it
    waits for approval like the others. A correction must
    change the answer or the citation and name a known document; corrections and
    removals need a reason. A confirmation over standing evidence (standing_evidence: the
    author's citation check or strong queue evidence against the key) needs
    `override_reason`, one line of at most OVERRIDE_REASON_MAX characters, kept on the
    proposal and shown to editors (issue 30 item 2); other actions drop it. Raises
    InvalidInputError (field errors), NotAllowedError, HeldElsewhereError, ConflictError.
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
        _require_claim(permissions.can_propose(user, locked), locked, user, "a proposal")
        _check_version(locked, version)
        if locked.status != ReviewItem.Status.CLAIMED:
            raise InvalidTransitionError("the item already has a proposal awaiting approval")
        base = entry_for_question(locked.question, working_edition(locked.benchmark))
        if action == Proposal.Action.CORRECT:
            errors = _correction_errors(
                locked, base, answer, citation_doc_id, citation_locator, citation_quote
            )
            if errors:
                raise InvalidInputError(errors)
        elif action != Proposal.Action.CORRECT:
            answer = citation_doc_id = citation_locator = citation_quote = ""
        override_reason = override_reason.strip() if action == Proposal.Action.CONFIRM else ""
        if action == Proposal.Action.CONFIRM:
            errors = _override_errors(locked, user, override_reason)
            if errors:
                raise InvalidInputError(errors)
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
            override_reason=override_reason,
        )
        before = _item_state(locked)
        if action == Proposal.Action.CONFIRM and not settings.SNAGLIST_CONFIRMATION_NEEDS_APPROVAL:
            # Rule 6 asks approval only for corrections and removals: a confirmation
            # changes no key, so it closes the item now.
            proposal.status = Proposal.Status.RECORDED
            proposal.decided_at = timezone.now()
            proposal.save(update_fields=["status", "decided_at"])
            _bump(
                locked,
                status=ReviewItem.Status.CONFIRMED,
                claim_expires_at=None,
                closed_at=proposal.decided_at,
            )
            _log_proposal(user, Action.PROPOSAL_CREATE, proposal, locked, before=None)
            _log_item(user, Action.REVIEW_ITEM_CLOSE, locked, before, proposal=proposal.pk)
            return proposal
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


def proposal_approve(
    *, proposal: Proposal, user, comment: str = "", version: int | None = None
) -> Proposal:
    """Approve a pending proposal (an editor other than its author: rule 6).

    A correction or removal creates the question's KeyEntry in the benchmark's draft key
    edition (opened as a child of the latest published one if needed) via
    questions.services.key_entry_create; a confirmation changes no key. The item closes
    as confirmed / corrected / removed. `version`: the item version the editor's page
    showed; a stale one raises ConflictError and writes nothing (None: not checked).
    Raises NotAllowedError (not an editor, or the author), InvalidTransitionError (the
    proposal is no longer pending), ConflictError.
    """
    with transaction.atomic():
        locked = _lock_pending_for_decision(proposal, user, "approve", permissions.can_approve)
        before = _proposal_state(locked)
        item = _lock_item(locked.item)
        _check_version(item, version)
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


@dataclass(frozen=True)
class Refusal:
    """One proposal a bulk approval did not approve.

    `label`: its question id ("#<pk>" when no such proposal); `code`: "own" (the editor
    wrote it: rule 6), "not_allowed" (not an editor), "stale" (its item changed since the
    page was shown), "decided" (no longer pending) or "missing"; `reason`: in words.
    """

    proposal_id: int
    label: str
    code: str
    reason: str


@dataclass
class BulkApproval:
    """What proposals_approve did: the approved proposals and the refusals, in input order."""

    approved: list[Proposal] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)

    def summary(self) -> str:
        """Say what was done, e.g. "Approved 2 (Q001, Q002); refused 1: Q046 (your own
        proposal)." Refused proposals are named with their reason, in input order."""
        approved = [p.item.question.question_id for p in self.approved]
        text = f"Approved {len(approved)}" + (f" ({', '.join(approved)})" if approved else "")
        if self.refused:
            named = ", ".join(f"{r.label} ({r.reason})" for r in self.refused)
            text += f"; refused {len(self.refused)}: {named}"
        return text + "."


def proposals_approve(
    *, user, decisions: list[tuple[int, int | None]], comment: str = ""
) -> BulkApproval:
    """Approve several proposals with one comment: each on its own, by proposal_approve.

    `decisions`: [(proposal pk, item version the page showed or None)]; a pk given twice
    counts once (its first version). Each approval is its own transaction (call this
    outside any transaction), so a refusal never undoes or half-applies another; each
    is logged as a single approval is. Four-eyes is per proposal: the editor's own
    proposals are refused by name, the others approved. Re-sending an approved
    proposal changes nothing (refused as "already approved"). Returns BulkApproval.
    """
    wanted = dict.fromkeys(pk for pk, _version in decisions)
    versions: dict[int, int | None] = {}
    for pk, version in decisions:
        versions.setdefault(pk, version)
    found = Proposal.objects.select_related("item__question").in_bulk(list(wanted))
    result = BulkApproval()
    for pk in wanted:
        proposal = found.get(pk)
        if proposal is None:
            result.refused.append(Refusal(pk, f"#{pk}", "missing", "no such proposal"))
            continue
        label = proposal.item.question.question_id
        try:
            approved = proposal_approve(
                proposal=proposal, user=user, comment=comment, version=versions[pk]
            )
        except NotAllowedError as exc:
            own = proposal.author_id == getattr(user, "pk", None)
            code, reason = ("own", "your own proposal") if own else ("not_allowed", str(exc))
            result.refused.append(Refusal(pk, label, code, reason))
        except ConflictError:
            reason = "its item changed since the page was shown: reload and look again"
            result.refused.append(Refusal(pk, label, "stale", reason))
        except InvalidTransitionError as exc:
            reason = str(exc).removeprefix("the proposal is ")
            result.refused.append(Refusal(pk, label, "decided", reason))
        else:
            result.approved.append(approved)
    return result


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


def item_decide(
    *,
    item: ReviewItem,
    user,
    version: int | None,
    check: dict[str, str],
    outcome: dict[str, str],
) -> tuple[CitationCheck, Proposal]:
    """Record the citation check and the outcome of a claimed item together, atomically.

    The decision panel's one submit (issue 18). `check` holds citation_check_record's
    fields (locator_exists, supports, edition_in_force, amended, note, source_url);
    `outcome` holds proposal_create's (action, reason, answer, citation_doc_id,
    citation_locator, citation_quote, note). Both run in one transaction against the item
    `version` the page showed: the check bumps the version and the proposal is made
    against the bumped one, so a refusal of either (InvalidInputError with the field
    errors of both sets, NotAllowedError, ConflictError, InvalidTransitionError) writes
    nothing. Each writes its audit-log entries as it does alone. Returns (check, proposal).
    """
    errors: dict[str, list[str]] = {}
    for name, value, choices in (
        ("locator_exists", check.get("locator_exists", ""), CitationCheck.YesNo),
        ("supports", check.get("supports", ""), CitationCheck.Supports),
        ("edition_in_force", check.get("edition_in_force", ""), CitationCheck.InForce),
        ("amended", check.get("amended", ""), CitationCheck.Amended),
    ):
        if value not in choices.values:
            errors[name] = [f"Choose one of: {', '.join(choices.labels)}."]
    action = outcome.get("action", "")
    if action not in Proposal.Action.values:
        errors["action"] = ["Choose confirm, correction or removal."]
    elif action != Proposal.Action.CONFIRM and outcome.get("reason") not in KeyEntry.Reason.values:
        errors["reason"] = ["A correction or removal needs a reason."]
    if errors:
        raise InvalidInputError(errors)
    with transaction.atomic():
        recorded = citation_check_record(item=item, user=user, version=version, **check)
        # citation_check_record bumped the locked item's version; the proposal follows it.
        proposal = proposal_create(
            item=recorded.item, user=user, version=recorded.item.version, **outcome
        )
    return recorded, proposal
