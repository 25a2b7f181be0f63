"""Say clearly whether PostgreSQL and Redis are reachable before the suite starts.

Exit 0 when both answer; exit 1 with how to start them otherwise.
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    problems: list[str] = []
    db_url = os.environ.get("DATABASE_URL", "")
    redis_url = os.environ.get("REDIS_URL", "")
    try:
        import psycopg

        dsn = db_url.replace("postgres://", "postgresql://", 1)
        # Connect to the maintenance database: the test database is created by pytest.
        base, _, _name = dsn.rpartition("/")
        with psycopg.connect(f"{base}/postgres", connect_timeout=5):
            pass
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        problems.append(
            f"PostgreSQL at {db_url} is not reachable ({exc.__class__.__name__}: {exc})"
        )
    try:
        import redis

        redis.Redis.from_url(redis_url, socket_connect_timeout=5).ping()
    except Exception as exc:  # noqa: BLE001
        problems.append(f"Redis at {redis_url} is not reachable ({exc.__class__.__name__}: {exc})")
    if problems:
        for problem in problems:
            print(problem, file=sys.stderr)
        print(
            "`make test` starts them on localhost when it may (scripts/setup-test-env); otherwise "
            "start them with `docker compose up -d postgres redis` (or your system's service "
            "manager), or point TEST_DATABASE_URL / TEST_REDIS_URL at running servers.",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
