"""Helpers shared by the review workflow's actions: locks, version checks, permission checks
and the item's audit-log entry. Bottom of review.services; imports no sibling module.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from core.models import AuditLogEntry
from core.services import audit_entry
from review import permissions
from review.errors import (
    ConflictError,
    HeldElsewhereError,
    NotAllowedError,
)
from review.models import ReviewItem

logger = logging.getLogger(__name__)


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
    """Write the item's audit-log entry (state after the change, with `extra`)."""
    _item_entry(actor, action, item, before, **extra).save()


def _item_entry(actor, action: str, item: ReviewItem, before: dict | None, **extra):
    """Build (unsaved) the audit-log entry _log_item writes, for bulk writers."""
    after = _item_state(item)
    after.update(extra)
    return audit_entry(
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


def _require_claim(allowed: bool, item: ReviewItem, user, doing: str) -> None:
    """Refuse acting on an item one does not hold: HeldElsewhereError (409) when another
    user holds it and `user` is a reviewer (who could hold it), naming the holder;
    NotAllowedError (403) otherwise (no reviewer role, or nobody else holds it)."""
    if allowed:
        return
    holder = item.claimed_by
    if (
        holder is not None
        and holder.pk != getattr(user, "pk", None)
        and permissions.can_claim(user)
    ):
        raise HeldElsewhereError(
            f"{holder.get_username()} holds this item now (it was claimed or reassigned "
            f"after you opened it), so {doing} was not saved"
        )
    raise NotAllowedError(f"claim the item before {doing} can be saved")


def _bump(item: ReviewItem, **fields) -> None:
    """Write `fields` and version+1 on a locked item; refresh the Python object."""
    for name, value in fields.items():
        setattr(item, name, value)
    item.version += 1
    item.save(update_fields=[*fields, "version", "updated_at"])
