"""Site-wide access: anonymous users see the login page and public results sites only.

The public results site of a benchmark (`/public/<benchmark>/...`, issue 22) is open to
anonymous visitors while its admin keeps the benchmark public (`Benchmark.is_public`);
`/public/` itself lists the public benchmarks. Every other page still needs a sign-in.

For an htmx request the redirect to the login page is django-htmx's
HttpResponseClientRedirect (`HX-Redirect`), so the browser loads the login page as a whole
page instead of swapping it into a fragment.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import resolve_url
from django_htmx.http import HttpResponseClientRedirect

from core.pages import bad_request_page
from public.selectors import is_public_benchmark

# Paths that handle their own authentication (DRF answers 401/403; the admin has its login).
OPEN_PREFIXES = ("/accounts/login/", "/static/", "/api/", "/admin/", "/healthz")
_PUBLIC_PATH = re.compile(r"^/public/(?:(?P<benchmark>[-a-zA-Z0-9_]+)/.*)?$")


def is_open_public_path(path: str) -> bool:
    """Return True for `/public/` and for paths under `/public/<benchmark>/` of a public one."""
    match = _PUBLIC_PATH.match(path)
    if match is None:
        return False
    name = match.group("benchmark")
    if name is None:
        return path == "/public/"
    return is_public_benchmark(name)


class LoginRequiredMiddleware:
    """Send anonymous requests for pages to the login page (HX-Redirect for htmx)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if (
            not request.user.is_authenticated
            and not request.path.startswith(OPEN_PREFIXES)
            and not is_open_public_path(request.path)
        ):
            login_url = resolve_url(settings.LOGIN_URL)
            if request.htmx:
                current = request.htmx.current_url
                target = login_url
                if current:
                    target = f"{login_url}?{urlencode({'next': _path_of(current)})}"
                return HttpResponseClientRedirect(target)
            return HttpResponseRedirect(
                f"{login_url}?{urlencode({'next': request.get_full_path()})}"
            )
        response = self.get_response(request)
        if request.htmx and response.status_code in (301, 302):
            location = response.get("Location", "")
            if location.startswith(resolve_url(settings.LOGIN_URL)):
                return HttpResponseClientRedirect(location)
        return response


def _path_of(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


class ContentSecurityPolicyMiddleware:
    """Send the Content-Security-Policy header (settings.SNAGLIST_CSP) on every response.

    Django 5.2 has no CSP of its own. A view that sets its own header keeps it. The policy
    (config/settings.py) allows scripts and styles from this site only: no inline script,
    no eval; htmx is configured not to need either (templates/base.html, htmx-config).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = settings.SNAGLIST_CSP
        return response


def csp_with(**directives: str):
    """Decorate a view so its responses carry the site policy with `directives` replaced.

    Keyword names use _ for - (style_src="'self' 'unsafe-inline'"). Used for Swagger UI
    (/api/docs/), whose React code inserts <style> elements; scripts stay 'self' only.
    """
    changes = {name.replace("_", "-"): value for name, value in directives.items()}

    def decorate(view):
        @functools.wraps(view)
        def wrapped(request, *args, **kwargs):
            response = view(request, *args, **kwargs)
            policy = {**settings.CSP_DIRECTIVES, **changes}
            response["Content-Security-Policy"] = "; ".join(f"{k} {v}" for k, v in policy.items())
            return response

        return wrapped

    return decorate


class BadQueryMiddleware:
    """Answer 400, naming the parameter, for a query string no filter can take (issue 18).

    A NUL character (``%00``) or another control character in a query parameter's name or
    value reached PostgreSQL, which refuses NUL in text, and came back as a 500
    (``/review/?q=%00``, ``/log/?actor=%00``). Every page and API route is covered here,
    once, before any view runs. Tab, newline and carriage return are allowed (a pasted
    search may hold them). htmx requests get the message alone (review.js lets htmx swap
    4xx error fragments it knows; snaglist.js shows it otherwise).
    """

    BAD = frozenset(chr(c) for c in range(32)) - {"\t", "\n", "\r"} | {"\x7f"}

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        for name, values in request.GET.lists():
            for text in (name, *values):
                bad = next((ch for ch in text if ch in self.BAD), None)
                if bad is not None:
                    return self._refuse(request, name, bad)
        return self.get_response(request)

    @staticmethod
    def _refuse(request, name: str, bad: str) -> HttpResponse:
        shown = name.encode("unicode_escape").decode("ascii")
        message = (
            f"The value of the filter “{shown}” contains the control character "
            f"U+{ord(bad):04X}, which no filter accepts. Remove it from the address and "
            "try again."
        )
        if request.path.startswith("/api/"):
            from django.http import JsonResponse

            return JsonResponse({"detail": message, "parameter": shown}, status=400)
        return bad_request_page(request, message)


class MethodNotAllowedPageMiddleware:
    """Give a bare 405 (Django's `require_POST` and kin send no body) a page that says why.

    A person who opens an action's address (`/review/next/`, a bookmark, a link pasted from
    a form's target) got an empty page. Requests that ask for HTML by name (a browser's
    `Accept: text/html,...`) now get templates/405.html, status 405 and the `Allow` header
    kept; other clients (curl, monitors: `*/*`), API routes (DRF answers in JSON), htmx
    requests and responses that have a body of their own are left as they are.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            response.status_code != 405
            or getattr(response, "streaming", False)
            or response.content
            or request.path.startswith("/api/")
            or request.htmx
            or "text/html" not in request.headers.get("Accept", "")
        ):
            return response
        from django.shortcuts import render

        allowed = response.get("Allow", "")
        page = render(
            request, "405.html", {"allowed": allowed, "method": request.method}, status=405
        )
        if allowed:
            page["Allow"] = allowed
        return page


class ServerTimingMiddleware:
    """Add a Server-Timing header: the request's wall and CPU time and its SQL (issue 18).

    Enabled by SNAGLIST_SERVER_TIMING (config.settings puts it first in MIDDLEWARE, so the
    figures cover every other middleware: session, auth, messages). Header, times in ms:
    ``app;dur=<wall>, cpu;dur=<this thread's CPU time>, db;dur=<SQL wall>;desc="<n> queries"``.
    `bench/bench_load.py` reads it to split server time from the time a request waits for a
    free worker; the CPU figure hardly moves when other processes load the machine.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        from django.db import connections

        sql = {"n": 0, "s": 0.0}

        def count(execute, query, params, many, context):
            t0 = time.perf_counter()
            try:
                return execute(query, params, many, context)
            finally:
                sql["n"] += 1
                sql["s"] += time.perf_counter() - t0

        t0, c0 = time.perf_counter(), time.thread_time()
        with contextlib.ExitStack() as stack:
            for alias in connections:
                stack.enter_context(connections[alias].execute_wrapper(count))
            response = self.get_response(request)
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
        response["Server-Timing"] = (
            f"app;dur={wall * 1000:.1f}, cpu;dur={cpu * 1000:.1f}, "
            f'db;dur={sql["s"] * 1000:.1f};desc="{sql["n"]} queries"'
        )
        return response
