"""Celery application: tasks over Redis, or eager in-process with no broker configured."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("snaglist")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# scoring's tasks live in its two parts (registered names unchanged: scoring.run_start).
app.autodiscover_tasks(["scoring.runs", "scoring.board"])


@worker_init.connect
def warm_imports(**_: object) -> None:
    """Import what the first judge call needs once, at worker start (before the prefork pool
    forks, so its processes share the pages), not inside the first run: the SDKs and their
    aiohttp transport take about a second to import. The statistics stack (the leaderboard
    refresh) stays lazy: ~100 MB that only the process refreshing a board needs. Then freeze
    the collector's view of those objects so the children keep sharing their pages."""
    import gc
    import importlib

    for name in ("openai", "anthropic", "aiohttp", "openai._vendor.httpx_aiohttp"):
        try:
            importlib.import_module(name)
        except ImportError:  # an optional transport that is not installed
            pass
    # The judge clients' TLS context (CA bundle loaded, ~100 ms with its imports), once.
    from judges.llm import default_tls_context

    default_tls_context()
    # Move everything imported so far out of the cyclic collector's reach (Python's gc.freeze,
    # documented for exactly this: a parent that forks workers). Otherwise each prefork child's
    # first collections touch every shared object and copy its page: measured here, 2 children
    # + parent 430 MiB of Pss without, ~330 MiB with 3 children.
    gc.collect()
    gc.freeze()


@worker_init.connect
def warn_about_database_role(**_: object) -> None:
    """Log a warning at worker start when the database role could undo the immutable key."""
    from core.checks import log_database_role_warnings

    log_database_role_warnings("worker")
