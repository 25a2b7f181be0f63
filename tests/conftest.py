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


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing():
    """Hash every test's passwords with MD5 instead of PBKDF2 (0.63 s of CPU a hash).

    The hasher is not what any test proves; production keeps Django's default. Applied
    once for the session through override_settings, whose setting_changed signal clears
    the hasher cache (issue 29 item 4).
    """
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(scope="session", autouse=True)
def _loopback_judges_allowed():
    """Allow the tests' loopback judges over http (tests.judge_server.LOOPBACK_JUDGES: what
    an administrator sets for them, docs/admin.md), in this process and the workers it
    starts (they read the environment)."""
    import os

    from django.conf import settings

    from config.env import names, networks
    from tests.judge_server import LOOPBACK_JUDGES

    saved = {name: os.environ.get(name) for name in LOOPBACK_JUDGES}
    os.environ.update(LOOPBACK_JUDGES)
    settings.SNAGLIST_JUDGE_HTTP_HOSTS = names("SNAGLIST_JUDGE_HTTP_HOSTS", ())
    settings.SNAGLIST_JUDGE_ALLOWED_NETWORKS = networks("SNAGLIST_JUDGE_ALLOWED_NETWORKS")
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session", autouse=True)
def _flush_past_the_truncate_guard():
    """Let the test runner's flush empty a database that holds a published key edition.

    questions/0006 refuses TRUNCATE of the key tables while an edition is published, and
    Django's flush after a transactional test is one TRUNCATE. The test database user is a
    PostgreSQL superuser, so its flush may do what docs/admin.md says any superuser can:
    SET session_replication_role = replica, under which no ordinary trigger fires. Only
    the flush is changed; every other statement of the tests meets the triggers.
    """
    from django.db.backends.postgresql.operations import DatabaseOperations

    original = DatabaseOperations.execute_sql_flush

    def execute_sql_flush(self, sql_list):
        # SET LOCAL: execute_sql_flush runs the list in one transaction, so it ends with it.
        return original(self, ["SET LOCAL session_replication_role = replica", *sql_list])

    DatabaseOperations.execute_sql_flush = execute_sql_flush
    yield
    DatabaseOperations.execute_sql_flush = original


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
