"""The one way every app asks "does this request want a fragment?" and marks the answer.

Pages answer an htmx request with a partial template and every other request (a link
opened, a reload, htmx's history restore after a cache miss, a boosted link) with the
whole page. django-htmx's `request.htmx` carries the headers (HtmxMiddleware); a request
that has not passed that middleware is read from its headers the same way.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_vary_headers
from django_htmx.middleware import HtmxDetails


def wants_fragment(request: HttpRequest) -> bool:
    """True for an htmx request that swaps part of a page: HX-Request, not boosted, not a
    history restore (htmx 2 sends HX-Request with those too, and they need the whole page)."""
    htmx = getattr(request, "htmx", None) or HtmxDetails(request)
    return bool(htmx) and not (htmx.boosted or htmx.history_restore_request)


def vary_on_htmx(response: HttpResponse) -> HttpResponse:
    """Add `Vary: HX-Request` to a response whose body depends on wants_fragment; return it."""
    patch_vary_headers(response, ("HX-Request",))
    return response
