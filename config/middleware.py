"""Site-wide access: anonymous users see the login page only.

For an htmx request the redirect to the login page is sent as `HX-Redirect`, so the
browser loads the login page as a whole page instead of swapping it into a fragment.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import resolve_url

# Paths that handle their own authentication (DRF answers 401/403; the admin has its login).
OPEN_PREFIXES = ("/accounts/login/", "/static/", "/api/", "/admin/", "/healthz")


class LoginRequiredMiddleware:
    """Send anonymous requests for pages to the login page (HX-Redirect for htmx)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.user.is_authenticated and not request.path.startswith(OPEN_PREFIXES):
            login_url = resolve_url(settings.LOGIN_URL)
            if request.headers.get("HX-Request") == "true":
                current = request.headers.get("HX-Current-URL", "")
                target = login_url
                if current:
                    target = f"{login_url}?{urlencode({'next': _path_of(current)})}"
                response = HttpResponse(status=204)
                response["HX-Redirect"] = target
                return response
            return HttpResponseRedirect(
                f"{login_url}?{urlencode({'next': request.get_full_path()})}"
            )
        response = self.get_response(request)
        if request.headers.get("HX-Request") == "true" and response.status_code in (301, 302):
            location = response.get("Location", "")
            if location.startswith(resolve_url(settings.LOGIN_URL)):
                redirected = HttpResponse(status=204)
                redirected["HX-Redirect"] = location
                return redirected
        return response


def _path_of(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")
