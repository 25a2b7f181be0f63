"""Who may see and start re-scoring and audit runs: admins start and steer them and list
them all (methodology "People"); editors may watch one run read-only (its page and
progress), to follow the re-score their publish starts (issue 30 item 5).

The one place the runs pages and the runs API ask (conventions: one permission module per
concern); inactive users hold no role.
"""

from __future__ import annotations

from rest_framework.permissions import BasePermission

from core.roles import Role, has_role


def can_manage_runs(user) -> bool:
    """Return True when `user` may list, start, resume or cancel runs (an admin)."""
    return has_role(user, Role.ADMIN)


def can_view_run(user) -> bool:
    """Return True when `user` may open a run's page and its progress, read-only (an editor
    or an admin; roles are per site, not per benchmark, so every benchmark's runs)."""
    return has_role(user, Role.EDITOR)


class CanManageRuns(BasePermission):
    """DRF permission: the same rule as the pages (403 for any other signed-in user)."""

    message = "Only an admin may see or start re-scoring runs."

    def has_permission(self, request, view) -> bool:
        return bool(
            request.user and request.user.is_authenticated and can_manage_runs(request.user)
        )
