"""Navigation for the site header, shown according to the user's roles."""

from __future__ import annotations

from django.urls import reverse

from core.roles import Role, user_roles

# (label, url name, role needed)
NAV = [
    ("Overview", "home", None),
    ("Review queue", "review:queue", Role.REVIEWER),
    ("Blind grading", "review:human-index", Role.REVIEWER),
    ("Approvals", "review:approvals", Role.EDITOR),
    ("Progress", "review:progress-index", Role.EDITOR),
    ("Key editions", "review:editions-index", None),
    ("Leaderboard", "scoring:leaderboard-index", None),
    ("Report", "scoring:report-index", None),
    ("Candidate panel", "scoring:candidate-index", Role.EDITOR),
    ("Runs", "scoring:runs", Role.ADMIN),
    ("Audit log", "review:log", Role.ADMIN),
]


def navigation(request) -> dict:
    """Return `nav_items` (label, url, active) and `user_role_labels` for base.html."""
    user = getattr(request, "user", None)
    roles = user_roles(user)
    items = []
    for label, name, role in NAV:
        if role is not None and role not in roles:
            continue
        items.append({"label": label, "url": reverse(name), "active": False})
    # Highlight the one entry whose URL is the longest prefix of this page's path
    # (/review/approvals/ is Approvals, not also the Review queue at /review/).
    matches = [
        i
        for i in items
        if request.path == i["url"] or (i["url"] != "/" and request.path.startswith(i["url"]))
    ]
    if matches:
        max(matches, key=lambda i: len(i["url"]))["active"] = True
    if Role.ADMIN in roles:
        items.append({"label": "Admin", "url": reverse("admin:index"), "active": False})
    labels = [r.value.capitalize() for r in (Role.ADMIN, Role.EDITOR, Role.REVIEWER) if r in roles]
    return {"nav_items": items, "user_role_labels": labels[:1]}
