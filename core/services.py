"""The one writer of the audit log."""

from __future__ import annotations

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
    return AuditLogEntry.objects.create(
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
