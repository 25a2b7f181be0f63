"""The approvals page's bulk approval (issue 18 item 4): several proposals, one comment.

Four-eyes stays per proposal (review.services.proposals_approve calls proposal_approve
once per proposal, each in its own transaction); the page then says what was approved
and what was refused, naming each refused question and why.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from core.views import done, requires
from review import permissions, services
from review.forms import DecisionForm


class BadSelection(ValueError):
    """A posted proposal id or version that is not a whole number (names the field)."""


def parse_selection(data) -> list[tuple[int, int | None]]:
    """Return [(proposal pk, item version or None)] from a POST of the approvals page.

    `proposal`: the ticked proposal ids (repeated field); `version-<pk>`: the item version
    the page showed for it (absent: not checked). Raises BadSelection naming the field
    and value when one is not a whole number.
    """
    selection = []
    for raw in data.getlist("proposal"):
        try:
            pk = int(raw)
        except ValueError:
            raise BadSelection(f"proposal: {raw!r} is not a proposal number") from None
        version_raw = data.get(f"version-{pk}", "")
        try:
            version = int(version_raw) if version_raw != "" else None
        except ValueError:
            raise BadSelection(f"version-{pk}: {version_raw!r} is not a version number") from None
        selection.append((pk, version))
    return selection


@require_POST
@requires(permissions.can_decide)
def proposals_approve(request: HttpRequest) -> HttpResponse:
    """Approve the ticked proposals with one optional comment, then back to the approvals page.

    POST `proposal` (repeated), `version-<pk>` and `comment`. 400 for an id or version
    that is not a number; a message when nothing was ticked.
    """
    try:
        selection = parse_selection(request.POST)
    except BadSelection as exc:
        return render(
            request,
            "review/error.html",
            {"title": "Bad request", "message": f"Bulk approval refused: {exc}."},
            status=400,
        )
    benchmark = request.POST.get("benchmark", "")
    back = reverse("review:approvals") + (
        f"?{urlencode({'benchmark': benchmark})}" if benchmark else ""
    )
    if not selection:
        messages.error(request, "Tick at least one proposal to approve.")
        return done(request, back)
    form = DecisionForm(request.POST)
    form.is_valid()
    result = services.proposals_approve(
        user=request.user, decisions=selection, comment=form.cleaned_data.get("comment", "")
    )
    (messages.warning if result.refused else messages.success)(request, result.summary())
    return done(request, back)
