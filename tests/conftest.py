"""Shared fixtures: personas and paths.

Tests marked `sqlite` run a second time on SQLite in `make test` (the newcomer default).
"""

from __future__ import annotations

from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED = PROJECT_ROOT.parent / "shared"
DEMO_BUNDLE = PROJECT_ROOT / "questions" / "fixtures" / "demo-bundle"


@pytest.fixture(autouse=True)
def _eager_celery():
    """Run Celery tasks in-process unless a test starts a real worker."""
    from config.celery import app

    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    yield


@pytest.fixture
def shared_dir() -> Path:
    assert SHARED.is_dir(), f"../shared is expected beside the checkout at {SHARED}"
    return SHARED


@pytest.fixture
def demo_bundle_path() -> Path:
    return DEMO_BUNDLE


# One session-wide Chromium for every browser test: two sync Playwright loops can't nest,
# so the fixture must have a single definition (here), not one per importing module.
from tests.browser import chromium  # noqa: E402, F401
