"""The three roles of methodology.md ("People") and the one place that answers "may this user?".

Roles are Django groups created by migration questions/0003 (and again after each migrate,
by core.apps). An editor may also do a reviewer's work; an admin holds every role.
Inactive users hold none.
"""

from __future__ import annotations

from enum import StrEnum

from core.compiled_query import CompiledQuery


class Role(StrEnum):
    REVIEWER = "reviewer"
    EDITOR = "editor"
    ADMIN = "admin"


# Which roles a group grants (an editor reviews too; an admin does everything).
_IMPLIED: dict[Role, set[Role]] = {
    Role.REVIEWER: {Role.REVIEWER},
    Role.EDITOR: {Role.REVIEWER, Role.EDITOR},
    Role.ADMIN: {Role.REVIEWER, Role.EDITOR, Role.ADMIN},
}


def _group_names(user_id: int):
    from django.contrib.auth.models import Group

    return Group.objects.filter(user__id=user_id).values_list("name", flat=True)


# every signed-in request asks it (navigation, permissions): compiled once
_GROUP_NAMES = CompiledQuery(_group_names, (-987654321,))


def user_roles(user) -> set[Role]:
    """Return the set of roles a user holds (empty for anonymous or inactive users).

    Group names are cached on the user object for the request, so pages that ask many
    times cost one query.
    """
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return set()
    cached = getattr(user, "_snaglist_roles", None)
    if cached is not None:
        return cached
    roles: set[Role] = set()
    if user.is_superuser:
        roles = set(Role)
    else:
        for name in _GROUP_NAMES(user.pk):
            if name in Role._value2member_map_:
                roles |= _IMPLIED[Role(name)]
    user._snaglist_roles = roles
    return roles


def has_role(user, role: Role | str) -> bool:
    """Return True when `user` holds `role` (directly or through a higher role)."""
    return Role(role) in user_roles(user)
