"""Generation tokens for content the review pages cache between requests (issue 28 item 3).

A page caches what does not change from one request to the next (a benchmark's published
key editions, its cited passages, its judge panel) under a key that holds the current
*token* of each kind of content it read. Whoever changes that content calls :func:`bump`,
which drops the tokens; the next reader makes a fresh random token, so every entry cached
under the old one is never read again (it expires by itself). No cached value is ever
updated in place, so a reader can never mix an old value with a new token.

Tokens live in the default cache, shared by every web worker and command when it is Redis
(`config.settings`: REDIS_URL). With a per-process cache (LocMemCache, the SQLite
newcomer set-up) a command such as `import_sources` could not reach a web worker's
memory, so :func:`enabled` is False there and pages read the database as before
(`settings.SNAGLIST_CONTENT_CACHE`).

Kinds (`SCOPES`): "editions" (key editions, their entries and audit exclusions),
"sources" (source documents and their passages), "panel" (judges and the judge panel),
"audits" (auditors' verdicts). A bump is sent at once and again when the transaction
commits: at once so the writer's own later reads (and a test's, whose transaction never
commits) miss the cache; after the commit so that a page that cached the old rows under a
token made between the two is dropped too.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction

SCOPES = ("editions", "sources", "panel", "audits")
TIMEOUT = 6 * 3600  # seconds a cached value or token lives without a bump (memory bound)


_identities: dict[str, str] = {}


def enabled() -> bool:
    """True when pages may cache content: the default cache is shared by every process
    (settings.SNAGLIST_CONTENT_CACHE) and the database is PostgreSQL (see `_database`)."""
    return bool(getattr(settings, "SNAGLIST_CONTENT_CACHE", False)) and (
        connection.vendor == "postgresql"
    )


def _database() -> str:
    """Return this database's identity: its name and PostgreSQL OID (one query a process).

    A database dropped and made again (a test run, `make demo`, bench/bench_load.py) gets a
    new OID, so rows with the same primary keys never meet the tokens of the old one that
    the shared cache still holds.
    """
    name = str(connection.settings_dict["NAME"])
    if name not in _identities:
        with connection.cursor() as cursor:
            cursor.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
            _identities[name] = f"{name}.{cursor.fetchone()[0]}"
    return _identities[name]


def _key(benchmark_id: int, scope: str) -> str:
    if scope not in SCOPES:
        raise ValueError(f"unknown content scope {scope!r}; one of {', '.join(SCOPES)}")
    return f"content-token:{_database()}:{scope}:{benchmark_id}"


def tokens(benchmark_id: int, scopes: Iterable[str]) -> str:
    """Return the database's identity and the current tokens of `scopes` for one benchmark,
    joined ("db.oid:a.b.c"), to put in the key of a value cached from them.

    One cache round trip when every token exists; a missing one is made (uuid4, `add`, so
    two workers making it at once agree on the first). Raises ValueError for an unknown
    scope.
    """
    keys = [_key(benchmark_id, s) for s in scopes]
    found = cache.get_many(keys)
    out = []
    for key in keys:
        token = found.get(key)
        if token is None:
            cache.add(key, uuid.uuid4().hex[:12], TIMEOUT)
            token = cache.get(key)
        out.append(str(token))
    return f"{_database()}:{'.'.join(out)}"


def bump(benchmark_id: int, *scopes: str) -> None:
    """Drop the tokens of `scopes` (all when none named) for one benchmark, now and again
    after the transaction commits. Raises ValueError for an unknown scope."""
    if not enabled():
        return
    keys = [_key(benchmark_id, s) for s in scopes or SCOPES]

    def drop() -> None:
        cache.delete_many(keys)

    drop()
    transaction.on_commit(drop)
