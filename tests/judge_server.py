"""A loopback judge API for tests and benchmarks: OpenAI Chat Completions and Anthropic Messages.

Real HTTP on 127.0.0.1 (stdlib ThreadingHTTPServer in a background thread), so the
official SDKs run unmodified, transport and all. Replies are scripted:

    server.script(ok('{"grade": 2}'), status(429, retry_after=0.01), ...)   # one per request
    server.default = ok('{"grade": 2}')                                      # once the queue is empty
    server.latency = 0.1                                                     # added to every reply

Behaviours: ok(content), cut_off(content) (finish_reason "length" / stop_reason "max_tokens"),
refusal(), malformed(), status(code, retry_after=...), slow(seconds, content).
Every request is recorded in server.requests (path, json body, headers without
authorization / x-api-key / api-key, t = time.monotonic() on arrival).

    with JudgeServer() as server:
        get_backend({"backend": "openai", "base_url": server.url + "/v1", ...})
        get_backend({"backend": "anthropic", "base_url": server.url, ...})
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

GOOD_GRADE = '{"grade": 2, "rationale": "matches the key", "flag": false, "flag_reason": ""}'
SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization"})


@dataclass(frozen=True)
class Behaviour:
    """One scripted reply.

    kind: "ok" (a completion with `content`; `truncated` makes it a cut-off reply)
    or "status" (HTTP error `status_code`, optional Retry-After). `delay` sleeps
    before replying (on top of the server's fixed latency).
    """

    kind: str = "ok"
    content: str = GOOD_GRADE
    truncated: bool = False
    status_code: int = 200
    retry_after: float | str | None = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


def ok(content: str = GOOD_GRADE) -> Behaviour:
    """A normal completion with this text."""
    return Behaviour(content=content)


def cut_off(content: str = '{"grade": 2, "rationale": "the fig') -> Behaviour:
    """A reply cut off by the token budget: finish_reason "length" / stop_reason "max_tokens"."""
    return Behaviour(content=content, truncated=True)


def refusal(content: str = "I'm sorry, but I can't help with grading this response.") -> Behaviour:
    """A completed reply in which the model declines."""
    return Behaviour(content=content)


def malformed(content: str = '{"grade": "excellent", "rationale": ') -> Behaviour:
    """A completed reply whose text carries no usable grade."""
    return Behaviour(content=content)


def slow(seconds: float, content: str = GOOD_GRADE) -> Behaviour:
    """A normal completion sent after `seconds`."""
    return Behaviour(content=content, delay=seconds)


def status(
    code: int, *, retry_after: float | str | None = None, message: str = "scripted error"
) -> Behaviour:
    """An HTTP error reply in the API's error shape, with an optional Retry-After header."""
    return Behaviour(kind="status", status_code=code, retry_after=retry_after, content=message)


class _QuietServer(ThreadingHTTPServer):
    # The default listen backlog (5) resets connections under bursts of concurrent clients;
    # it must be set on the class: the socket listens inside __init__.
    request_queue_size = 1024
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up mid-reply (slow behaviours) is expected.
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class JudgeServer:
    """Scripted loopback server; see the module docstring. Thread-safe."""

    def __init__(self, *, latency: float = 0.0, default: Behaviour | None = None) -> None:
        self.latency = latency
        self.default = default or ok()
        self.requests: list[dict[str, Any]] = []
        self._queue: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        self._httpd = _QuietServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:54321 (OpenAI clients add "/v1")."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> JudgeServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> JudgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting ----------------------------------------------------------------------

    def script(self, *behaviours: Behaviour) -> None:
        """Queue behaviours, one per incoming request; `default` applies once they run out."""
        with self._lock:
            self._queue.extend(behaviours)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    def _next(self, record: dict[str, Any]) -> Behaviour:
        with self._lock:
            self.requests.append(record)
            return self._queue.popleft() if self._queue else self.default

    @property
    def paths(self) -> list[str]:
        return [r["path"] for r in self.requests]

    def max_tokens(self) -> list[int | None]:
        """The token budget each request asked for (max_tokens or max_completion_tokens)."""
        return [
            r["json"].get("max_tokens", r["json"].get("max_completion_tokens"))
            for r in self.requests
        ]

    # -- protocol -----------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' pooled clients expect
            # Headers and body go out in two writes: without TCP_NODELAY, Nagle plus the
            # client's delayed ACK adds ~40 ms to every reply.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparseable": raw.decode("utf-8", "replace")}
                path = self.path.split("?", 1)[0]
                headers = {
                    k.lower(): v for k, v in self.headers.items() if k.lower() not in SECRET_HEADERS
                }
                record = {"path": path, "json": body, "headers": headers, "t": time.monotonic()}
                behaviour = server._next(record)
                wait = server.latency + behaviour.delay
                if wait:
                    time.sleep(wait)
                if path.endswith("/chat/completions"):
                    flavour = "openai"
                elif path.endswith("/messages"):
                    flavour = "anthropic"
                else:
                    self._send(404, {"error": {"type": "not_found", "message": path}})
                    return
                if behaviour.kind == "status":
                    extra = dict(behaviour.headers)
                    if behaviour.retry_after is not None:
                        extra["Retry-After"] = str(behaviour.retry_after)
                    self._send(behaviour.status_code, _error_body(flavour, behaviour), extra)
                    return
                self._send(200, _reply_body(flavour, body, behaviour), dict(behaviour.headers))

            def _send(
                self, code: int, payload: dict[str, Any], headers: dict | None = None
            ) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _error_body(flavour: str, b: Behaviour) -> dict[str, Any]:
    kind = {
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
    }.get(b.status_code, "invalid_request_error" if b.status_code < 500 else "api_error")
    if flavour == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": b.content}}
    return {"error": {"message": b.content, "type": kind, "param": None, "code": None}}


def _reply_body(flavour: str, request: dict[str, Any], b: Behaviour) -> dict[str, Any]:
    model = request.get("model") or "judge-model"
    if flavour == "anthropic":
        return {
            "id": "msg_loopback",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": b.content}],
            "stop_reason": "max_tokens" if b.truncated else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": b.content, "refusal": None},
                "finish_reason": "length" if b.truncated else "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    """Yield a started JudgeServer; shut it down after the test."""
    with JudgeServer() as server:
        yield server
