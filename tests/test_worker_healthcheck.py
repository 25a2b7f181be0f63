"""docker-compose's worker health check (scripts/worker_healthcheck.sh, issue 19 item 2): a
worker that stops answering pings is stopped after 3 failures in a row, so its container's
restart policy starts a fresh one; one answer resets the count.

`celery` is replaced by a stand-in on CELERY_BIN that answers or not, and the "worker" is a
`sleep` process (WORKER_PID): the check's signal must reach it, and nothing else.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "worker_healthcheck.sh"


def _check(tmp_path: Path, worker: subprocess.Popen, *, answers: bool) -> int:
    fake = tmp_path / "celery"
    fake.write_text(f"#!/bin/sh\nexit {0 if answers else 1}\n")
    fake.chmod(0o755)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOSTNAME": "worker-1",
        "CELERY_BIN": str(fake),
        "WORKER_PID": str(worker.pid),
        "WORKER_HEALTH_STATE": str(tmp_path / "failures"),
    }
    return subprocess.run(["sh", str(SCRIPT)], env=env, timeout=10, capture_output=True).returncode


def test_three_failed_pings_in_a_row_stop_the_worker(tmp_path):
    worker = subprocess.Popen(["sleep", "60"])
    try:
        assert _check(tmp_path, worker, answers=False) == 1
        assert _check(tmp_path, worker, answers=False) == 1
        assert _check(tmp_path, worker, answers=True) == 0  # answered: the count starts again
        assert (tmp_path / "failures").read_text().strip() == "0"
        assert _check(tmp_path, worker, answers=False) == 1
        assert _check(tmp_path, worker, answers=False) == 1
        assert worker.poll() is None  # two failures: still running
        assert _check(tmp_path, worker, answers=False) == 1
        assert worker.wait(timeout=5) == -signal.SIGQUIT
    finally:
        if worker.poll() is None:
            worker.kill()


def test_compose_restarts_the_worker_and_keeps_redis_on_disk():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    worker = services["worker"]
    assert worker["restart"] == "unless-stopped"
    assert worker["healthcheck"]["test"] == ["CMD", "sh", "scripts/worker_healthcheck.sh"]
    assert "exec celery -A config worker" in worker["command"]  # the worker is PID 1
    assert services["beat"]["restart"] == "unless-stopped"
    redis = services["redis"]
    assert redis["command"][:3] == ["redis-server", "--appendonly", "yes"]
    assert "redisdata:/data" in redis["volumes"] and "redisdata" in compose["volumes"]
