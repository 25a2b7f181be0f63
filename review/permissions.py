"""Who may do what in the review workflow: the ONE place pages, API and services ask.

Roles come from core.roles (editor implies reviewer, admin implies all; inactive
users hold none). Methodology "People" and rule 6 (four-eyes).
"""

from __future__ import annotations

from core.roles import Role, has_role


def can_view_queue(user) -> bool:
    return has_role(user, Role.REVIEWER)


def can_claim(user, item=None) -> bool:
    """A reviewer (or higher) may claim an item that is open or whose claim has expired."""
    if not has_role(user, Role.REVIEWER):
        return False
    return item is None or item.can_be_claimed() or item.is_held_by(user)


def holds_claim(user, item) -> bool:
    return has_role(user, Role.REVIEWER) and item.is_held_by(user)


def can_check(user, item) -> bool:
    """Record a citation check: the holder of a live claim."""
    return holds_claim(user, item)


def can_propose(user, item) -> bool:
    """Propose an outcome: the holder of a live claim on an item with no pending proposal."""
    return holds_claim(user, item)


def can_release(user, item) -> bool:
    return holds_claim(user, item) or (
        has_role(user, Role.EDITOR) and item.status == item.Status.CLAIMED
    )


def can_decide(user) -> bool:
    """See the approvals page (an editor); whether they may decide one proposal is below."""
    return has_role(user, Role.EDITOR)


def can_approve(user, proposal) -> bool:
    """An editor who is not the proposal's author (four-eyes, methodology rule 6)."""
    return has_role(user, Role.EDITOR) and proposal.author_id != getattr(user, "pk", None)


can_reject = can_approve


def can_publish(user) -> bool:
    return has_role(user, Role.EDITOR)


def can_reassign(user) -> bool:
    return has_role(user, Role.EDITOR)


def can_view_log(user) -> bool:
    return has_role(user, Role.ADMIN)


def can_report_problem(user) -> bool:
    """Raise a review item by hand ("Report a problem", issue 17): any reviewer or higher.

    It changes no key entry: it only puts the question in the queue with a note.
    """
    return has_role(user, Role.REVIEWER)


def can_view_progress(user) -> bool:
    """The review's progress page (issue 31 item 3): editors and admins.

    It names reviewers with their pace and approval rate, so reviewers do not see it.
    """
    return has_role(user, Role.EDITOR)


def can_run_triage(user) -> bool:
    return has_role(user, Role.EDITOR)


def can_view_editions(user) -> bool:
    """Key editions are visible to every signed-in, active user."""
    return bool(getattr(user, "is_authenticated", False) and user.is_active)


def can_mark_spam(user) -> bool:
    """Mark a reader's report (issue 22) as spam: any reviewer or higher."""
    return has_role(user, Role.REVIEWER)


def can_see_reporter_email(user) -> bool:
    """See the reply address a reader left with a report: editors only (issue 22)."""
    return has_role(user, Role.EDITOR)
