"""Playwright helpers for browser tests: Debian's Chromium, screenshots kept for CI.

Chromium is Debian's headless shell (`apt-get install chromium-headless-shell`: the same
Blink and V8 as the `chromium` package without the browser's user interface), launched
with the flags this workplace needs (no sandbox as root, no background networking). The
full browser in headless mode cost 24 % more CPU for the 28 browser tests (106 s against
81 s, bench/README.md "The suite"); SNAGLIST_CHROMIUM=/usr/bin/chromium still runs them
with it. Screenshots go to `test-artifacts/` (CI keeps the folder) under a per-test
sub-folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("SNAGLIST_CHROMIUM", "/usr/lib/chromium/chromium-headless-shell"))
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def chromium():
    """Yield a launched Chromium browser (session-wide); fail clearly if it is missing."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: install Debian's package with "
            "`apt-get install chromium-headless-shell` (or set SNAGLIST_CHROMIUM)."
        )
    # Playwright's sync API runs its own event loop; Django's ORM calls in the same test
    # thread are then flagged as "async unsafe" although they are not concurrent.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Shots:
    """Numbered screenshots of a test's steps into test-artifacts/<name>/."""

    def __init__(self, name: str):
        self.folder = ARTIFACTS / name
        self.folder.mkdir(parents=True, exist_ok=True)
        for old in self.folder.glob("*.png"):
            old.unlink()
        self.n = 0

    def take(self, page, label: str, *, full_page: bool = True) -> Path:
        self.n += 1
        slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
        path = self.folder / f"{self.n:02d}-{slug}.png"
        page.screenshot(path=str(path), full_page=full_page)
        return path


def sign_in(page, base_url: str, username: str, password: str) -> None:
    """Sign in through the login form as a person would."""
    page.goto(f"{base_url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"^(?!.*/accounts/login/).*$"))


class InFlight:
    """The page's requests still waiting for an answer, to wait for exactly those.

    Playwright's "networkidle" waits for 500 ms without any request after the last one, on
    every page; a walk over a hundred pages spent most of its time there. `settle()` returns
    once no request is in flight and htmx has nothing under way (no element marked
    htmx-request, -swapping or -settling, htmx's own classes from the request being sent
    until the swapped content has settled, including requests that content triggers in
    turn), or fails after `timeout` ms. Requests an htmx `load` trigger sends are started
    before the load event `goto` waits for.
    """

    BUSY = "() => !!document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"

    def __init__(self, page):
        self.page = page
        self.pending: set = set()
        # Playwright wraps handlers by introspection: Python functions, not built-in methods.
        page.on("request", lambda r: self.pending.add(r))
        page.on("requestfinished", lambda r: self.pending.discard(r))
        page.on("requestfailed", lambda r: self.pending.discard(r))

    def settle(self, timeout: float = 10_000) -> None:
        waited = 0.0
        # the DOM check first: the request events it lets through are then counted
        while self.page.evaluate(self.BUSY) or self.pending:
            if waited >= timeout:
                urls = sorted(r.url for r in self.pending)
                raise AssertionError(f"htmx or requests still busy after {timeout} ms: {urls}")
            self.page.wait_for_timeout(10)
            waited += 10
