"""What the review pages' views share beyond core.views: the query string without its page."""

from __future__ import annotations

from django.http import HttpRequest


def query_without_page(request: HttpRequest) -> str:
    """Return the request's query string without `page` (for pagination links)."""
    params = request.GET.copy()
    params.pop("page", None)
    return params.urlencode()
