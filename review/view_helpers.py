"""What the review pages' views share: the permission decorator, Vary for htmx, the 403
page or fragment, the after-POST redirect and the query string without its page."""

from __future__ import annotations

from functools import wraps

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django_htmx.http import HttpResponseClientRedirect

from core.htmx import vary_on_htmx, wants_fragment


def requires(check):
    """Refuse (403) a user for whom `check(user)` is false: the permissions module decides."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not check(request.user):
                return forbidden(request, "Your role does not allow this page or action.")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


# `Vary: HX-Request` on a response that depends on core.htmx.wants_fragment.
vary = vary_on_htmx


def forbidden(request: HttpRequest, message: str, *, status: int = 403) -> HttpResponse:
    """403 with the reason: a page, or for an htmx request a fragment that replaces the form
    (static/js/review.js lets htmx swap 403 and 409), so a save refused because the item was
    reassigned meanwhile says so instead of doing nothing. `status` 409 is for an item
    another user holds (review.errors.HeldElsewhereError)."""
    if wants_fragment(request):
        reload_url = request.headers.get("HX-Current-URL") or request.path
        return vary(
            render(
                request,
                "review/_forbidden.html",
                {"message": message, "reload_url": reload_url},
                status=status,
            )
        )
    return render(
        request, "review/error.html", {"title": "Not allowed", "message": message}, status=status
    )


def done(request: HttpRequest, url: str) -> HttpResponse:
    """After a successful POST: a client redirect for htmx, 303 otherwise."""
    if request.htmx:
        return HttpResponseClientRedirect(url)
    response = HttpResponseRedirect(url)
    response.status_code = 303  # See Other: the POST's result is another page
    return response


def query_without_page(request: HttpRequest) -> str:
    """Return the request's query string without `page` (for pagination links)."""
    params = request.GET.copy()
    params.pop("page", None)
    return params.urlencode()
