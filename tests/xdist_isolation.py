"""Give each pytest-xdist worker its own Redis database (loaded early by `-p`).

pytest-django appends the worker id to the test database's name (`test_snaglist_gw0`),
so PostgreSQL needs nothing. Redis does: the cache, the sessions, the judges' rate limiter
and the Celery broker of the tests' real workers all live in the database REDIS_URL names,
and a test that clears the cache (`cache.clear()` is FLUSHDB) would empty the other
worker's. This module runs before Django reads its settings (a `-p` plugin is imported
when pytest parses its options, before pytest-django sets Django up) and moves REDIS_URL
of worker `gwN` to database (base + 1 + N) mod 16. Without xdist it changes nothing.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit


def worker_redis_url(url: str, worker: str) -> str:
    """Return `url` with its database number moved for xdist worker `worker` ("gw0", ...).

    `redis://host:6379/3` for "gw1" gives `redis://host:6379/5`; a URL with no database
    path counts as database 0. Raises ValueError for a worker id not of the form gwN.
    """
    if not worker.startswith("gw") or not worker[2:].isdigit():
        raise ValueError(f"not an xdist worker id: {worker!r}")
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    db = (base + 1 + int(worker[2:])) % 16
    return urlunsplit(parts._replace(path=f"/{db}"))


_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker:
    for _name in ("REDIS_URL", "TEST_REDIS_URL"):
        if os.environ.get(_name):
            os.environ[_name] = worker_redis_url(os.environ[_name], _worker)
