"""Error pages every app answers with, in one place."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from core.htmx import wants_fragment


def bad_request_page(request: HttpRequest, message: str) -> HttpResponse:
    """Return a 400 with `message` in the site's error page (templates/400.html), or the
    message alone (_400.html) for an htmx request that swaps a fragment; an htmx
    history-restore request gets the whole page, as every page does (issue 18 item 7)."""
    template = "_400.html" if wants_fragment(request) else "400.html"
    return render(request, template, {"message": message}, status=400)
