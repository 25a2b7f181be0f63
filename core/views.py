"""What every app's page views share (issue 29 item 3): the permission decorator, the 403
page or fragment, and the answer to a successful POST.

Conventions (docs/architecture.md, "Views and htmx"): a view's access check is
`@requires(check)` with a predicate of the app's permissions module, never an inline
call; a fragment request is `core.htmx.wants_fragment` and its response goes through
`core.htmx.vary_on_htmx`; a redirect after a POST is `done` (django-htmx's
HttpResponseClientRedirect for htmx, never a hand-set HX-Redirect).
"""

from __future__ import annotations

from functools import wraps

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django_htmx.http import HttpResponseClientRedirect

from core.htmx import vary_on_htmx, wants_fragment

DEFAULT_REFUSAL = "Your role does not allow this page or action."


def requires(check, message: str = DEFAULT_REFUSAL):
    """Refuse (403, :func:`forbidden`) a user for whom `check(user)` is false, with
    `message`: the app's permissions module decides, the view never asks inline."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not check(request.user):
                return forbidden(request, message)
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


def forbidden(request: HttpRequest, message: str, *, status: int = 403) -> HttpResponse:
    """Return 403 with the reason: the site's page (templates/403.html), or for an htmx
    request a fragment that replaces the form (templates/403_fragment.html; static/js/
    review.js lets htmx swap 403 and 409), so a save refused because the item was
    reassigned meanwhile says so instead of doing nothing. `status` 409 is for an item
    another user holds (review.errors.HeldElsewhereError)."""
    if wants_fragment(request):
        reload_url = request.headers.get("HX-Current-URL") or request.path
        return vary_on_htmx(
            render(
                request,
                "_403.html",
                {"message": message, "reload_url": reload_url},
                status=status,
            )
        )
    return vary_on_htmx(render(request, "403.html", {"exception": message}, status=status))


def done(request: HttpRequest, url: str) -> HttpResponse:
    """After a successful POST: a client redirect for htmx, 303 otherwise."""
    if request.htmx:
        return HttpResponseClientRedirect(url)
    response = HttpResponseRedirect(url)
    response.status_code = 303  # See Other: the POST's result is another page
    return response
