"""A loopback judge API for tests and benchmarks: OpenAI Chat Completions and Anthropic Messages.

Real HTTP/1.1 on 127.0.0.1 (an asyncio server on a background thread), so the
official SDKs run unmodified, transport and all. Replies are scripted:

    server.script(ok('{"grade": 2}'), status(429, retry_after=0.01), ...)   # one per request
    server.default = ok('{"grade": 2}')                                      # once the queue is empty
    server.latency = 0.1                                                     # added to every reply

Behaviours: ok(content), cut_off(content) (finish_reason "length" / stop_reason "max_tokens"),
refusal(), malformed(), status(code, retry_after=...), slow(seconds, content).
Every request is recorded in server.requests (path, json body, headers without
authorization / x-api-key / api-key, t = time.monotonic() on arrival, replied = when
the reply was written).

    with JudgeServer() as server:
        get_backend({"backend": "openai", "base_url": server.url + "/v1", ...})
        get_backend({"backend": "anthropic", "base_url": server.url, ...})
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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


_REASONS = {
    200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    408: "Request Timeout", 429: "Too Many Requests", 500: "Internal Server Error",
    501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable", 529: "Overloaded",
}


class JudgeServer:
    """Scripted loopback server; see the module docstring. Thread-safe.

    HTTP/1.1 with keep-alive on an asyncio event loop in a background thread: each connection
    is a coroutine and the fixed latency an `asyncio.sleep`, so dozens of calls in flight cost
    the test process little CPU (the throughput benchmark shares 2 CPUs with the worker).
    `loop_factory` makes that loop (the benchmark passes uvloop.new_event_loop).
    """

    def __init__(
        self,
        *,
        latency: float = 0.0,
        default: Behaviour | None = None,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
    ) -> None:
        self.latency = latency
        self.loop_factory = loop_factory
        self.default = default or ok()
        self.requests: list[dict[str, Any]] = []
        self._queue: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        # The default listen backlog resets connections under bursts of concurrent clients.
        self._sock = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connections: dict[asyncio.Task, asyncio.StreamWriter] = {}
        self._server: asyncio.AbstractServer | None = None

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:54321 (OpenAI clients add "/v1")."""
        host, port = self._sock.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self) -> JudgeServer:
        loop = self.loop_factory()
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._serve, sock=self._sock, backlog=1024)
                )
            except BaseException as exc:  # reported by start() below
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="judge-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            self._sock.close()
            return

        async def shutdown() -> None:
            self._server.close()
            # Close the connections' transports (their readers see EOF and their coroutines
            # end); cancelling the tasks instead makes asyncio's stream callback log an error.
            for writer in list(self._connections.values()):
                writer.transport.abort()
            await asyncio.gather(*self._connections, return_exceptions=True)

        if thread.is_alive():
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
        loop.close()
        self._sock.close()
        self._loop = self._thread = None

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

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: requests one after another (keep-alive) until the client closes."""
        task = asyncio.current_task()
        self._connections[task] = writer
        try:
            sock = writer.get_extra_info("socket")
            if sock is not None:  # header and body go out in one write anyway; no Nagle delay
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                request = await _read_request(reader)
                if request is None:
                    break
                method, target, headers, raw = request
                code, payload, extra, record = await self._respond(method, target, headers, raw)
                data = json.dumps(payload).encode()
                close = headers.get("connection", "").lower() == "close"
                head = [f"HTTP/1.1 {code} {_REASONS.get(code, 'Status')}",
                        "Content-Type: application/json", f"Content-Length: {len(data)}"]
                head += [f"{k}: {v}" for k, v in extra.items()]
                if close:
                    head.append("Connection: close")
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
                await writer.drain()
                record["replied"] = time.monotonic()
                if close:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass  # a client that timed out and hung up mid-reply (slow behaviours) is expected
        finally:
            self._connections.pop(task, None)
            writer.close()

    async def _respond(
        self, method: str, target: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, Any], dict[str, str], dict[str, Any]]:
        """Return (status, JSON payload, extra headers, the request's record) for one request,
        after its delay; the record gets "replied" (time.monotonic()) once the reply is sent."""
        if method != "POST":
            return 501, {"error": {"type": "not_implemented", "message": method}}, {}, {}
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unparseable": raw.decode("utf-8", "replace")}
        path = target.split("?", 1)[0]
        safe = {k: v for k, v in headers.items() if k not in SECRET_HEADERS}
        record = {"path": path, "json": body, "headers": safe, "t": time.monotonic()}
        behaviour = self._next(record)
        wait = self.latency + behaviour.delay
        if wait:
            await asyncio.sleep(wait)
        if path.endswith("/chat/completions"):
            flavour = "openai"
        elif path.endswith("/messages"):
            flavour = "anthropic"
        else:
            return 404, {"error": {"type": "not_found", "message": path}}, {}, record
        if behaviour.kind == "status":
            extra = dict(behaviour.headers)
            if behaviour.retry_after is not None:
                extra["Retry-After"] = str(behaviour.retry_after)
            return behaviour.status_code, _error_body(flavour, behaviour), extra, record
        return 200, _reply_body(flavour, body, behaviour), dict(behaviour.headers), record


async def _read_request(
    reader: asyncio.StreamReader,
) -> tuple[str, str, dict[str, str], bytes] | None:
    """Read one HTTP/1.1 request: (method, target, lower-cased headers, body); None at EOF.

    Bodies come with Content-Length or chunked transfer encoding; raises ValueError for a
    request line it cannot read.
    """
    line = await reader.readline()
    if not line.strip():
        return None
    method, target, _version = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while True:
        header = await reader.readline()
        if header in (b"\r\n", b"\n", b""):
            break
        name, _, value = header.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while size := int((await reader.readline()).split(b";", 1)[0].strip() or b"0", 16):
            parts.append(await reader.readexactly(size))
            await reader.readline()
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass  # trailers
        raw = b"".join(parts)
    else:
        length = int(headers.get("content-length") or 0)
        raw = await reader.readexactly(length) if length else b""
    return method, target, headers, raw


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
