"""On SQLite (the zero-set-up default), two requests that read then write at once queue.

Without BEGIN IMMEDIATE the second to upgrade its read lock fails at once with
"database is locked" (SQLite refuses to wait there, to avoid a deadlock): seen as an HTTP
500 when two editors approved one proposal together. Run in a subprocess against a file
database, as the web server and eager tasks use it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import json, threading, time
import django
django.setup()
from django.db import connection, transaction

with connection.cursor() as c:
    c.execute("CREATE TABLE counter (n integer)")
    c.execute("INSERT INTO counter VALUES (0)")
connection.close()
errors = []

def bump():
    try:
        with transaction.atomic():
            with connection.cursor() as c:
                c.execute("SELECT n FROM counter")
                n = c.fetchone()[0]
                time.sleep(0.3)  # both have read before either writes
                c.execute("UPDATE counter SET n = %s", [n + 1])
    except Exception as exc:
        errors.append(repr(exc))
    finally:
        connection.close()

threads = [threading.Thread(target=bump) for _ in range(2)]
for t in threads: t.start()
for t in threads: t.join()
with connection.cursor() as c:
    c.execute("SELECT n FROM counter")
    print(json.dumps({"errors": errors, "n": c.fetchone()[0]}))
"""


@pytest.mark.sqlite
def test_two_read_then_write_transactions_queue_instead_of_failing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")} | {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'lock.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "CELERY_TASK_ALWAYS_EAGER": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # Serialised: the second reads the first's write, so nothing is lost either.
    assert result == {"errors": [], "n": 2}
