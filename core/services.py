"""The one writer of the audit log."""

from __future__ import annotations

import json
from typing import Any

from core.actions import Action
from core.models import AuditLogEntry


def _label(user) -> str:
    return user.get_username() if getattr(user, "pk", None) else "system"


def audit_log(
    *,
    actor,
    action: Action | str,
    target_type: str,
    target_id: Any,
    target_label: str = "",
    benchmark_name: str = "",
    before: Any = None,
    after: Any = None,
) -> AuditLogEntry:
    """Append one audit log entry; call it inside the transaction that makes the change.

    `actor` is the acting user, or None (or an anonymous user) for the system, logged as
    "system". `action` is a core.actions.Action value. `target_id` is stored as text and
    `target_label` cut to 300 characters; `before`/`after` are JSON-serialisable states.
    """
    entry = audit_entry(
        actor=actor,
        action=action,
        target_type=target_type,
        target_id=target_id,
        target_label=target_label,
        benchmark_name=benchmark_name,
        before=before,
        after=after,
    )
    entry.save()
    return entry


def audit_entry(
    *,
    actor,
    action: Action | str,
    target_type: str,
    target_id: Any,
    target_label: str = "",
    benchmark_name: str = "",
    before: Any = None,
    after: Any = None,
) -> AuditLogEntry:
    """Build (unsaved) the entry audit_log writes, for a writer that saves many at once with
    ``AuditLogEntry.objects.bulk_create`` inside its transaction (triage's item writer).
    Same arguments and rules as audit_log; raises ValueError for an unknown action."""
    return AuditLogEntry(
        actor=actor if getattr(actor, "pk", None) else None,
        actor_label=_label(actor),
        action=str(Action(action)),
        target_type=target_type,
        target_id=str(target_id),
        target_label=target_label[:300],
        benchmark_name=benchmark_name,
        before=before,
        after=after,
    )


def role_change_log(*, actor, target_user, before: list[str], after: list[str]) -> None:
    """Log a change of `target_user`'s role groups (nothing when the set is unchanged).

    `before`/`after` are group names; create_demo_users calls it when it assigns roles.
    """
    if sorted(before) == sorted(after):
        return
    audit_log(
        actor=actor,
        action=Action.USER_ROLES,
        target_type="user",
        target_id=target_user.pk,
        target_label=target_user.get_username(),
        before={"groups": sorted(before)},
        after={"groups": sorted(after)},
    )


LOG_FIELDS = (
    "actor_label",
    "action",
    "target_type",
    "target_id",
    "target_label",
    "benchmark_name",
    "before",
    "after",
    "created_at",
)


def _log_key(entry: dict[str, Any]) -> tuple[Any, ...]:
    """A hashable form of an entry's LOG_FIELDS (JSON values as sorted-key JSON text)."""
    return tuple(
        json.dumps(entry[f], sort_keys=True, default=str) if f in ("before", "after") else entry[f]
        for f in LOG_FIELDS
    )


def audit_log_restore(entries: list[dict[str, Any]]) -> int:
    """Insert audit log entries carried in from elsewhere (a bundle's history); return how
    many were inserted. Append-only: an entry equal in every field of LOG_FIELDS to a
    stored one is skipped (so restoring twice adds nothing); no stored row is changed.

    Each entry is a dict of LOG_FIELDS (`created_at` an aware datetime, `before`/`after`
    JSON values) plus `actor`, a user or None. `action` is kept as recorded, even one no
    longer in core.actions.Action (history is not rewritten). Call it inside the
    transaction of the import.
    """
    if not entries:
        return 0
    names = {e["benchmark_name"] for e in entries}
    stored = {
        _log_key(dict(zip(LOG_FIELDS, row, strict=True)))
        for row in AuditLogEntry.objects.filter(benchmark_name__in=names).values_list(*LOG_FIELDS)
    }
    new = []
    for entry in entries:
        key = _log_key(entry)
        if key in stored:
            continue
        stored.add(key)
        new.append(AuditLogEntry(actor=entry.get("actor"), **{f: entry[f] for f in LOG_FIELDS}))
    AuditLogEntry.objects.bulk_create(new, batch_size=2000)
    return len(new)
