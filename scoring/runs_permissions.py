"""Who may see and start re-scoring and audit runs: admins only (methodology "People").

The one place the runs pages and the runs API ask (conventions: one permission module per
concern); inactive users hold no role.
"""

from __future__ import annotations

from rest_framework.permissions import BasePermission

from core.roles import Role, has_role


def can_manage_runs(user) -> bool:
    """Return True when `user` may list, start, resume or cancel runs (an admin)."""
    return has_role(user, Role.ADMIN)


class CanManageRuns(BasePermission):
    """DRF permission: the same rule as the pages (403 for any other signed-in user)."""

    message = "Only an admin may see or start re-scoring runs."

    def has_permission(self, request, view) -> bool:
        return bool(
            request.user and request.user.is_authenticated and can_manage_runs(request.user)
        )
