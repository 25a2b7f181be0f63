"""A private Redis server per test, which the test may stop and start again.

The machine's shared Redis (6379) must never be restarted or flushed, so the fault tests
run their broker on a `redis-server` of their own, on a free port, in a temp directory,
with no persistence (`--save "" --appendonly no`): a restart loses every queued and
unacknowledged message, which is the fault under test.

    def test_x(private_redis, private_worker_factory):
        worker = private_worker_factory(SNAGLIST_RESCORE_CHUNK="3")  # broker = private Redis
        private_redis.stop(); time.sleep(2); private_redis.start()

`private_worker_factory` starts `tests.worker_fixtures.CeleryWorker`s whose REDIS_URL is the
private server, on the product's default queue (nobody else reads this Redis), and points
the test process's Celery app at the same broker, so the product's own resume path
(`rescore --resume`, `scoring.run_start.delay`) reaches the worker.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.worker_fixtures import CeleryWorker, database_url


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PrivateRedis:
    """A `redis-server` subprocess on a fixed port; stop() and start() keep the port."""

    port: int
    workdir: Path
    process: subprocess.Popen | None = None
    starts: int = 0
    log_paths: list[Path] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed: apt-get install redis-server")
        self.starts += 1
        log_path = self.workdir / f"redis-{self.starts}.log"
        self.log_paths.append(log_path)
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--dir",
                str(self.workdir),
                "--protected-mode",
                "no",
            ],
            stdout=log_path.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited:\n{log_path.read_text(errors='replace')}")
            if self.ping():
                return
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not answer in {timeout} s")

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_connect_timeout=0.3).ping())
        except Exception:  # noqa: BLE001
            return False

    def stop(self) -> None:
        """Stop the server (SIGKILL: like a crash; nothing is saved, by configuration)."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def keys(self) -> int:
        import redis

        return redis.Redis(port=self.port).dbsize()


@pytest.fixture
def private_redis():
    workdir = Path(tempfile.mkdtemp(prefix="snaglist-redis-"))
    server = PrivateRedis(port=free_port(), workdir=workdir)
    server.start()
    yield server
    server.stop()
    shutil.rmtree(workdir, ignore_errors=True)


def _point_app_at(app, url: str) -> None:
    """Send the test process's tasks to `url` (drop the connection pools built for another)."""
    app.conf.broker_url = url
    app.conf.broker_write_url = url
    app.conf.broker_read_url = url
    app.conf.task_always_eager = False
    # kombu keeps one pool per broker URL process-wide: drop the app's references, never
    # close a pool another test (on the other URL) will be handed again.
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def private_worker_factory(transactional_db, private_redis):
    """Start real workers over the private Redis; the test's Celery app sends there too."""
    from django.conf import settings

    from config.celery import app

    saved = {k: app.conf.get(k) for k in ("broker_url", "broker_write_url", "broker_read_url")}
    _point_app_at(app, private_redis.url)
    workers: list[CeleryWorker] = []

    def start(concurrency: int = 4, **extra_env: str) -> CeleryWorker:
        worker = CeleryWorker(
            queue=settings.CELERY_TASK_DEFAULT_QUEUE,
            broker=private_redis.url,
            database=database_url(),
            concurrency=concurrency,
            extra_env={k: str(v) for k, v in extra_env.items()},
        )
        workers.append(worker)
        worker.start()
        return worker

    yield start
    for worker in workers:
        worker.stop()
    # the private server's port is never used again: its pooled connections can go
    from kombu import pools

    if app._pool is not None:
        app._pool.force_close_all()
    with app.connection_for_write(private_redis.url) as conn:
        pools.producers[conn].force_close_all()
    for key, value in saved.items():
        app.conf[key] = value
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.task_always_eager = True
