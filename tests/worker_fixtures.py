"""A real Celery worker over Redis for tests, and a small demo-like benchmark to grade.

Eager mode skips serialization, acks and redelivery (conventions.md), so at least the
re-scoring path runs through a real worker process:

    @pytest.mark.worker
    @pytest.mark.django_db(transaction=True)   # the worker must see committed rows
    def test_x(celery_worker):
        run = ...create a run with enqueue=False...
        celery_worker.send("scoring.run_start", run.pk)
        celery_worker.wait_for_run(run.pk)

`celery_worker` starts `.venv/bin/celery -A config worker -P threads` in a subprocess on a
queue of its own, pointed at pytest's test database (DATABASE_URL with the test name)
and at the broker of REDIS_URL (or TEST_REDIS_URL, default redis://127.0.0.1:6379/15).
It is stopped before the test database is flushed. `worker.kill()` sends SIGKILL and
`worker.start()` starts a fresh one on the same queue.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
CELERY_BIN = Path(sys.executable).with_name("celery")
DEFAULT_TEST_REDIS = "redis://127.0.0.1:6379/15"


def broker_url() -> str:
    """Return the Redis URL the worker and the test share (REDIS_URL, else TEST_REDIS_URL)."""
    from django.conf import settings

    return getattr(settings, "REDIS_URL", "") or os.environ.get(
        "TEST_REDIS_URL", DEFAULT_TEST_REDIS
    )


def database_url() -> str:
    """Return a DATABASE_URL for the database pytest-django is using now (the test DB)."""
    from django.db import connection

    s = connection.settings_dict
    if s["ENGINE"] != "django.db.backends.postgresql":
        pytest.skip("a real worker needs PostgreSQL (SQLite test databases live in memory)")
    auth = s["USER"] or "postgres"
    if s.get("PASSWORD"):
        auth += f":{s['PASSWORD']}"
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def redis_available(url: str) -> bool:
    try:
        import redis

        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
        return True
    except Exception:  # noqa: BLE001
        return False


@dataclass
class CeleryWorker:
    """A worker subprocess on its own queue; send tasks to it and wait for runs."""

    queue: str
    broker: str
    database: str
    concurrency: int = 4
    extra_env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen | None = None
    log_path: Path | None = None
    starts: int = 0

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "config.settings",
                "DATABASE_URL": self.database,
                "REDIS_URL": self.broker,
                "CELERY_TASK_ALWAYS_EAGER": "0",
                "CELERY_TASK_DEFAULT_QUEUE": self.queue,
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(self.extra_env)
        return env

    def pool_args(self) -> list[str]:
        """Return the worker's pool options: `concurrency` threads in one process."""
        return ["-P", "threads", "-c", str(self.concurrency)]

    def start(self, timeout: float = 30.0) -> None:
        """Start a worker process and wait until it answers a ping on its queue."""
        self.starts += 1
        self.log_path = Path(f"/tmp/snaglist-worker-{self.queue}-{self.starts}.log")
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [
                str(CELERY_BIN),
                "-A",
                "config",
                "worker",
                *self.pool_args(),
                "--without-heartbeat",
                "--without-mingle",
                "--without-gossip",
                "-Q",
                self.queue,
                "-n",
                f"{self.queue}-{self.starts}@%h",
                "-l",
                "warning",
            ],
            cwd=PROJECT_ROOT,
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        from config.celery import app

        deadline = time.monotonic() + timeout
        name = f"{self.queue}-{self.starts}@"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"celery worker exited early:\n{self.log()}")
            with app.connection_for_write(self.broker) as conn:
                replies = app.control.ping(timeout=0.5, connection=conn) or []
            if any(name in key for reply in replies for key in reply):
                return
        raise RuntimeError(f"celery worker did not answer within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return (
            self.log_path.read_text(errors="replace")
            if self.log_path and self.log_path.exists()
            else ""
        )

    def send(self, task_name: str, *args) -> None:
        """Send a task by name to this worker's queue (not eagerly, whatever the settings)."""
        from config.celery import app

        with app.connection_for_write(self.broker) as conn:
            app.send_task(task_name, args=list(args), queue=self.queue, connection=conn)

    def kill(self) -> None:
        """SIGKILL the worker (no warm shutdown: unacked tasks stay unacked)."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        """Stop the worker: TERM (warm shutdown), then KILL if it lingers."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def wait_for_run(self, run_id: int, timeout: float = 60.0, *, until=None, poll: float = 0.1):
        """Poll the run every `poll` seconds until it finishes (or `until(run)` holds);
        return the run."""
        from scoring.models import ScoringRun

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = ScoringRun.objects.get(pk=run_id)
            if until(run) if until else run.status not in ("pending", "running"):
                return run
            if self.process.poll() is not None and until is None:
                raise RuntimeError(f"worker died:\n{self.log()}")
            time.sleep(poll)
        raise AssertionError(
            f"run {run_id} did not finish in {timeout} s: {run.status} "
            f"{run.done}/{run.needed}\n{self.log()[-4000:]}"
        )

    def purge(self) -> None:
        """Delete this worker's queue from Redis (messages left by a killed worker)."""
        import redis

        client = redis.Redis.from_url(self.broker)
        client.delete(self.queue)


@pytest.fixture
def celery_worker_factory(transactional_db):
    """Return a function that starts a worker (with extra env) on a fresh queue; all stopped after."""
    from config.celery import app

    broker = broker_url()
    if not redis_available(broker):
        pytest.fail(f"no Redis at {broker}: start it (docker compose up -d redis)")
    workers: list[CeleryWorker] = []
    app.conf.task_always_eager = False

    def start(concurrency: int = 4, **extra_env: str) -> CeleryWorker:
        worker = CeleryWorker(
            queue=f"test-h8-{uuid.uuid4().hex[:10]}",
            broker=broker,
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
        worker.purge()
    app.conf.task_always_eager = True


@pytest.fixture
def celery_worker(celery_worker_factory):
    """A running worker on its own queue (4 threads), stopped after the test."""
    return celery_worker_factory()


# -- a demo-like benchmark ---------------------------------------------------------------------

ANSWERS = [
    (
        "What is the minimum width of a stair in a dwelling?",
        "The minimum clear width is 800 mm.",
        "Table 1.1",
        "Minimum clear width 800 mm",
    ),
    (
        "What is the maximum rise of a step in a private stair?",
        "The maximum rise is 220 mm.",
        "Table 1.1",
        "Maximum rise 220 mm",
    ),
    (
        "What is the minimum guarding height for a landing in a dwelling?",
        "At least 900 mm.",
        "Diagram 3.1",
        "Guarding height 900 mm",
    ),
    (
        "Is a handrail needed on a stair rising more than 600 mm?",
        "Yes, where the rise exceeds 600 mm.",
        "1.34",
        "Stairs should have a handrail where the rise is more than 600 mm",
    ),
    (
        "What is the minimum headroom over a loft conversion stair?",
        "At least 1.9 m at the centre.",
        "1.10",
        "Headroom of 1.9 m measured at the centre line",
    ),
    (
        "What is the maximum pitch of a private stair?",
        "The maximum pitch is 42 degrees.",
        "1.14",
        "Maximum pitch 42 degrees",
    ),
]


def build_benchmark(
    *,
    n_questions: int = 6,
    n_models: int = 3,
    judge_backend: str = "reference",
    n_judges: int = 2,
    with_auditors: bool = True,
    grade_original: bool = True,
    name: str = "demo-like",
):
    """Create a small benchmark: questions with a published `original` key, responses, judges.

    Judges j1 (lenient) and j2 (strict) use `judge_backend`; with grade_original every
    (response, judge) already has a grade against the original key (as after an import).
    Returns a namespace with benchmark, original, questions, models, responses, judges, auditors.
    """
    from types import SimpleNamespace

    from questions.models import (
        Benchmark,
        Category,
        ModelUnderTest,
        Question,
        Response,
        SourceDocument,
    )
    from questions.services import key_edition_create, key_edition_publish, key_entry_create
    from scoring.models import Grade, Judge

    benchmark = Benchmark.objects.create(name=name, grade_scale=[0, 1, 2])
    SourceDocument.objects.create(
        benchmark=benchmark,
        doc_id="ADK",
        title="Approved Document K",
        short_title="Approved Document K",
        edition="2013",
    )
    category = Category.objects.create(benchmark=benchmark, category_id="stairs", name="Stairs")
    original = key_edition_create(benchmark=benchmark, name="original", parent=None)
    questions = []
    for i in range(n_questions):
        text, answer, locator, quote = ANSWERS[i % len(ANSWERS)]
        q = Question.objects.create(
            benchmark=benchmark, question_id=f"Q{i + 1:03d}", category=category, text=text
        )
        key_entry_create(
            edition=original,
            question=q,
            answer=answer,
            citation_doc_id="ADK",
            citation_locator=locator,
            citation_quote=quote,
        )
        questions.append(q)
    key_edition_publish(edition=original)
    models = [
        ModelUnderTest.objects.create(
            benchmark=benchmark, model_id=f"m{k + 1}", name=f"Model {k + 1}"
        )
        for k in range(n_models)
    ]
    responses = []
    for qi, q in enumerate(questions):
        answer = ANSWERS[qi % len(ANSWERS)][1]
        for k, m in enumerate(models):
            text = (
                answer
                if k % 3 == 0
                else ("I am not sure." if k % 3 == 1 else f"{answer} See Table 9.9.")
            )
            responses.append(Response.objects.create(question=q, model=m, text=text))
    judges = [
        Judge.objects.create(
            benchmark=benchmark,
            judge_id=f"j{n + 1}",
            name=f"Judge {n + 1}",
            backend=judge_backend,
            prompt_version="v1",
            backend_settings={"strictness": "strict" if n % 2 else "lenient"},
        )
        for n in range(n_judges)
    ]
    auditors = []
    if with_auditors:
        auditors = [
            Judge.objects.create(
                benchmark=benchmark,
                judge_id=f"a{n + 1}",
                name=f"Auditor {n + 1}",
                # two vendors: independent opinions (rule 4), so both adverse excludes
                vendor=f"auditor-vendor-{n + 1}",
                role=Judge.Role.AUDITOR,
                backend=judge_backend,
                prompt_version="v1",
            )
            for n in range(2)
        ]
    if grade_original:
        entries = {e.question_id: e for e in original.entries.all()}
        Grade.objects.bulk_create(
            [
                Grade(
                    response=r,
                    judge=j,
                    key_entry=entries[r.question_id],
                    grade=2,
                    prompt_version="v1",
                )
                for r in responses
                for j in judges
            ]
        )
    return SimpleNamespace(
        benchmark=benchmark,
        original=original,
        questions=questions,
        models=models,
        responses=responses,
        judges=judges,
        auditors=auditors,
    )


def publish_correction(
    data,
    *,
    question_index: int = 0,
    answer: str = "The minimum clear width is 850 mm.",
    name: str = "corrected-1",
    removed_index: int | None = None,
):
    """Publish an edition on top of `original` that corrects one question (and maybe removes one)."""
    from questions.services import key_edition_create, key_edition_publish, key_entry_create

    edition = key_edition_create(benchmark=data.benchmark, name=name, parent=data.original)
    key_entry_create(
        edition=edition,
        question=data.questions[question_index],
        answer=answer,
        citation_doc_id="ADK",
        citation_locator="Table 1.1",
        citation_quote="Minimum clear width 850 mm",
        reason="factually_wrong",
    )
    if removed_index is not None:
        key_entry_create(
            edition=edition,
            question=data.questions[removed_index],
            removed=True,
            has_citation=False,
            reason="ungradeable",
        )
    return key_edition_publish(edition=edition)


# -- a loopback OpenAI-compatible judge --------------------------------------------------------


class FakeOpenAIJudge:
    """A loopback Chat Completions server that grades every response 2 after `delay` seconds.

    While `busy_until` (a time.monotonic() value) is in the future, and for the first
    `reject_first` requests, it answers 429 with a Retry-After, like a judge that is rate
    limited for a while. `calls` counts the
    completions it answered (what would be paid), `rejected` the 429s.
    """

    def __init__(self, *, delay: float = 0.0) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.delay = delay
        self.busy_until = 0.0
        self.reject_first = 0
        self.requests = 0
        self.calls = 0
        self.rejected = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_POST(self):  # noqa: N802 - http.server API
                import json

                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with outer.lock:
                    outer.requests += 1
                    early = outer.requests <= outer.reject_first
                if early or time.monotonic() < outer.busy_until:
                    with outer.lock:
                        outer.rejected += 1
                    body = b'{"error": {"message": "rate limited", "type": "rate_limit"}}'
                    self.send_response(429)
                    self.send_header("Retry-After", "0.1")
                else:
                    time.sleep(outer.delay)
                    with outer.lock:
                        outer.calls += 1
                    content = json.dumps({"grade": 2, "rationale": "figure matches", "flag": False})
                    body = json.dumps(
                        {
                            "id": "chatcmpl-fake",
                            "object": "chat.completion",
                            "created": 0,
                            "model": "fake-judge",
                            "choices": [
                                {
                                    "index": 0,
                                    "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content},
                                }
                            ],
                            "usage": {
                                "prompt_tokens": 1,
                                "completion_tokens": 1,
                                "total_tokens": 2,
                            },
                        }
                    ).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the worker was killed mid-call: that is the point of the test

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_openai_judge():
    server = FakeOpenAIJudge()
    yield server
    server.close()


def use_openai_judges(judges, server: FakeOpenAIJudge, **backend_settings) -> None:
    """Point judges at the loopback server (key read from SNAGLIST_JUDGE_KEY_H8_FAKE in the worker)."""
    for judge in judges:
        judge.backend = "openai"
        judge.model = "fake-judge"
        judge.base_url = server.base_url
        judge.api_key_env = "SNAGLIST_JUDGE_KEY_H8_FAKE"
        judge.backend_settings = {
            "max_retries": 1,
            "base_delay": 0.05,
            "max_delay": 0.2,
            "timeout": 10,
            **backend_settings,
        }
        judge.save()
