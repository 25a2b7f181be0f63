"""A loopback judge API for tests and benchmarks: OpenAI Chat Completions and Anthropic Messages.

Real HTTP/1.1 on 127.0.0.1 (an asyncio server on a background thread), so the
official SDKs run unmodified, transport and all. Replies are scripted:

    server.script(ok('{"grade": 2}'), status(429, retry_after=0.01), ...)   # one per request
    server.default = ok('{"grade": 2}')                                      # once the queue is empty
    server.latency = 0.1                                                     # added to every reply

Behaviours: ok(content), cut_off(content) (finish_reason "length" / stop_reason "max_tokens"),
refusal(), malformed(), status(code, retry_after=...), slow(seconds, content),
no_usage(content) (a reply without a usage object).
Every reply reports usage the way its vendor does (OpenAI: prompt_tokens,
completion_tokens, prompt_tokens_details.cached_tokens; Anthropic: input_tokens,
output_tokens, cache_read_input_tokens, cache_creation_input_tokens), counted by
`count_tokens` over the request's message texts and the reply's text, with the vendor's
prompt caching emulated per server (PrefixCache, `server.prefix_cache`): OpenAI reports
as cached (prompt_tokens_details.cached_tokens) the longest prefix, in steps of 128 tokens
from `cache_min_tokens` (1,024) on, that an earlier request to the same model began with;
Anthropic caches the text blocks up to and including the last one marked cache_control,
when they hold at least `cache_min_tokens`: cache_creation_input_tokens the first time,
cache_read_input_tokens after (input_tokens is then the rest, as Anthropic reports it).
A test lowers `server.cache_min_tokens`; `server.prefix_cache.ready` says when a
prefix becomes readable: "reply" (default, as the vendors do: once the reply of a request
carrying it is written; calls sent together before that all miss, and each Anthropic one
writes the prefix) or "arrival" (as soon as a request carrying it arrived; issue 30 item
12: the estimate was built on it and a run with 8 calls in flight cost 7.8 % more).
The batch endpoints of both vendors (files, batches; message batches) are in
tests.judge_batches: a batch's requests take scripted behaviours as live calls do, and
`server.plan_batches(BatchPlan(polls=2, expire_after=3), ...)` scripts batch-level states.
Every request is recorded in server.requests (path, json body, headers without
authorization / x-api-key / api-key, t = time.monotonic() on arrival, replied = when
the reply was written).

    with JudgeServer() as server:
        get_backend({"backend": "openai", "base_url": server.url + "/v1", ...})
        get_backend({"backend": "anthropic", "base_url": server.url, ...})
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.judge_batches import BatchEndpoints, BatchPlan

GOOD_GRADE = '{"grade": 2, "rationale": "matches the key", "flag": false, "flag_reason": ""}'
SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization"})

# What an administrator sets to let judges reach a loopback server over http (docs/admin.md,
# "Judges' addresses and keys"): the tests (tests/conftest.py) and the bench scripts put it
# in the environment before Django starts.
LOOPBACK_JUDGES = {
    "SNAGLIST_JUDGE_HTTP_HOSTS": "127.0.0.1",
    "SNAGLIST_JUDGE_ALLOWED_NETWORKS": "127.0.0.0/8",
}


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
    report_usage: bool = True


def ok(content: str = GOOD_GRADE) -> Behaviour:
    """A normal completion with this text."""
    return Behaviour(content=content)


def cut_off(content: str = '{"grade": 2, "rationale": "the fig') -> Behaviour:
    """A reply cut off by the token budget: finish_reason "length" / stop_reason "max_tokens"."""
    return Behaviour(content=content, truncated=True)


def no_usage(content: str = GOOD_GRADE) -> Behaviour:
    """A normal completion whose reply carries no usage object (a backend that reports none)."""
    return Behaviour(content=content, report_usage=False)


# A stand-in for a vendor's tokenizer (no tokenizer ships with the SDKs): a word is one token
# per 6 letters or digits begun, every other visible character one token. On English prose
# this gives 1 token per 4.2-4.6 characters, in the range the vendors quote (~4).
_TOKEN = re.compile(r"\w{1,6}|[^\w\s]")
# Tokens a chat request adds around each message and the reply (role markers).
MESSAGE_OVERHEAD_TOKENS = 4
REPLY_PRIMING_TOKENS = 3


def count_tokens(text: str) -> int:
    """Return the loopback server's token count of `text` (see _TOKEN)."""
    return len(_TOKEN.findall(text))


def prompt_tokens(request: dict[str, Any]) -> int:
    """Return the prompt tokens the loopback server bills for a chat request (decoded JSON):
    each message's text plus MESSAGE_OVERHEAD_TOKENS, plus REPLY_PRIMING_TOKENS."""
    total = REPLY_PRIMING_TOKENS
    for message in request.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):  # content blocks
            content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
        total += MESSAGE_OVERHEAD_TOKENS + count_tokens(content if isinstance(content, str) else "")
    return total


def _texts(request: dict[str, Any]) -> list[tuple[str, bool]]:
    """Return [(text, marked)] of a chat request's messages in order: one entry per string
    message and per text block; marked: the block carries cache_control."""
    out: list[tuple[str, bool]] = []
    for message in request.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            out.append((content, False))
        elif isinstance(content, list):
            out += [
                (b.get("text", ""), bool(b.get("cache_control")))
                for b in content
                if isinstance(b, dict)
            ]
    return out


def request_text(request: dict[str, Any]) -> str:
    """Return the text of a chat request's messages (decoded JSON), text blocks joined."""
    return "".join(text for text, _ in _texts(request))


@dataclass
class CacheLookup:
    """What the prefix cache found for one request: `read` tokens cached, `write` tokens
    written now (Anthropic's first sight of a marked prefix), and the prefix keys the
    request makes readable once remembered."""

    read: int = 0
    write: int = 0
    keys: list[bytes] = field(default_factory=list)


class PrefixCache:
    """A loopback server's emulation of the vendors' prompt caches (see the module
    docstring); thread-safe. Keys are sha256 digests of (vendor, model, prefix tokens);
    nothing expires (the vendors keep an entry ~5 minutes after its last use)."""

    def __init__(self, min_tokens: int = 1024, step: int = 128, ready: str = "reply") -> None:
        self.min_tokens, self.step, self.ready = min_tokens, step, ready
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()

    def lookup(self, flavour: str, request: dict[str, Any]) -> CacheLookup:
        """Return what a request to `flavour` ("openai" / "anthropic") finds in the cache;
        with `ready` "arrival" its prefixes are remembered at once."""
        found = (self._openai if flavour == "openai" else self._anthropic)(request)
        if self.ready == "arrival":
            self.remember(found)
        return found

    def remember(self, found: CacheLookup) -> None:
        """Make the prefixes of a looked-up request readable by later requests."""
        with self._lock:
            self._seen.update(found.keys)

    def _digest(self, flavour: str, request: dict[str, Any]) -> Any:
        return hashlib.sha256(f"{flavour}\0{request.get('model')}\0".encode())

    def _openai(self, request: dict[str, Any]) -> CacheLookup:
        tokens = _TOKEN.findall(request_text(request))
        digest, keys, at = self._digest("openai", request), [], 0
        for end in range(self.min_tokens, len(tokens) + 1, self.step):
            digest.update("\0".join(tokens[at:end]).encode() + b"\0")
            keys.append(digest.copy().digest())
            at = end
        with self._lock:
            hits = [i for i, key in enumerate(keys) if key in self._seen]
        read = self.min_tokens + self.step * hits[-1] if hits else 0
        return CacheLookup(read=read, keys=keys)

    def _anthropic(self, request: dict[str, Any]) -> CacheLookup:
        texts = _texts(request)
        marked = [i for i, (_, mark) in enumerate(texts) if mark]
        if not marked:
            return CacheLookup()
        prefix = "".join(text for text, _ in texts[: marked[-1] + 1])
        tokens = count_tokens(prefix)
        if tokens < self.min_tokens:
            return CacheLookup()  # too short to cache: no error, nothing written
        digest = self._digest("anthropic", request)
        digest.update(prefix.encode())
        key = digest.digest()
        with self._lock:
            seen = key in self._seen
        return CacheLookup(read=tokens, keys=[]) if seen else CacheLookup(write=tokens, keys=[key])


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
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    429: "Too Many Requests",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    529: "Overloaded",
}


class JudgeServer:
    """Scripted loopback server; see the module docstring. Thread-safe.

    HTTP/1.1 with keep-alive on an asyncio event loop in a background thread: each connection
    is a protocol object (_Connection) and the fixed latency a timer on the loop, so dozens of
    calls in flight cost the test process little CPU (the throughput benchmark shares 2 CPUs
    with the worker).
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
        self.prefix_cache = PrefixCache()
        self._queue: deque[Behaviour] = deque()
        self._batch_plans: deque[BatchPlan] = deque()
        self.batch_lines: list[dict[str, Any]] = []
        self.batch_api = BatchEndpoints(self)
        self._lock = threading.Lock()
        # The default listen backlog resets connections under bursts of concurrent clients.
        self._sock = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[asyncio.BaseTransport] = set()
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
                    loop.create_server(lambda: _Connection(self), sock=self._sock, backlog=1024)
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
            for transport in list(self._connections):
                transport.abort()
            await asyncio.sleep(0)  # let the aborted connections' connection_lost run

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

    @property
    def cache_min_tokens(self) -> int:
        """The shortest prefix the emulated prompt caches hold (PrefixCache.min_tokens)."""
        return self.prefix_cache.min_tokens

    @cache_min_tokens.setter
    def cache_min_tokens(self, value: int) -> None:
        self.prefix_cache.min_tokens = value

    # -- scripting ----------------------------------------------------------------------

    def script(self, *behaviours: Behaviour) -> None:
        """Queue behaviours, one per incoming request; `default` applies once they run out."""
        with self._lock:
            self._queue.extend(behaviours)

    def plan_batches(self, *plans: BatchPlan) -> None:
        """Queue batch-level plans (tests.judge_batches.BatchPlan), one per batch submitted;
        a batch with none left ends at its first retrieval with every request run."""
        with self._lock:
            self._batch_plans.extend(plans)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self._batch_plans.clear()
            self.batch_lines.clear()

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

    def _respond(
        self, method: str, target: str, headers: dict[str, str], raw: bytes
    ) -> tuple[float, Callable[[], tuple[int, dict[str, Any], dict[str, str]]], dict[str, Any]]:
        """Record one request and return (seconds to wait before replying, a function giving
        (status, JSON payload, extra headers), the request's record); the record gets
        "replied" (time.monotonic()) once the reply is written."""
        path = target.split("?", 1)[0]
        if BatchEndpoints.handles(path):
            record = {"path": path, "method": method, "json": {}, "t": time.monotonic()}
            with self._lock:
                self.requests.append(record)
            return self.latency, lambda: self.batch_api.respond(method, path, headers, raw), record
        if method != "POST":
            return (
                0.0,
                lambda: (501, {"error": {"type": "not_implemented", "message": method}}, {}),
                {},
            )
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unparseable": raw.decode("utf-8", "replace")}
        path = target.split("?", 1)[0]
        safe = {k: v for k, v in headers.items() if k not in SECRET_HEADERS}
        record = {"path": path, "json": body, "headers": safe, "t": time.monotonic()}
        behaviour = self._next(record)
        flavour = (
            "openai"
            if path.endswith("/chat/completions")
            else "anthropic"
            if path.endswith("/messages")
            else None
        )
        # The cache is looked up on arrival, for a request that will be answered.
        cached = (
            self.prefix_cache.lookup(flavour, body)
            if flavour and behaviour.kind == "ok" and isinstance(body, dict)
            else CacheLookup()
        )

        def reply() -> tuple[int, dict[str, Any], dict[str, str]]:
            if flavour is None:
                return 404, {"error": {"type": "not_found", "message": path}}, {}
            if behaviour.kind == "status":
                extra = dict(behaviour.headers)
                if behaviour.retry_after is not None:
                    extra["Retry-After"] = str(behaviour.retry_after)
                return behaviour.status_code, _error_body(flavour, behaviour), extra
            if self.prefix_cache.ready == "reply":
                self.prefix_cache.remember(cached)
            return 200, _reply_body(flavour, body, behaviour, cached), dict(behaviour.headers)

        return self.latency + behaviour.delay, reply, record


class _Connection(asyncio.Protocol):
    """One client connection: HTTP/1.1 requests one after another (keep-alive), each answered
    after its wait by a timer on the loop (no task or stream per request: the throughput
    benchmark's judge API shares its 2 CPUs with the worker). A request that arrives while
    the previous one is still waiting is read once that one has been answered."""

    def __init__(self, server: JudgeServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.pending: asyncio.TimerHandle | None = None  # the reply being waited for
        self.busy = False
        self.eof = False  # the client has shut down its side (it may still read replies)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:  # header and body go out in one write anyway; no Nagle delay
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server._connections.add(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        # A client that timed out and hung up mid-wait (slow behaviours) is expected.
        if self.pending is not None:
            self.pending.cancel()
        self.server._connections.discard(self.transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self._next_request()

    def eof_received(self) -> bool:
        """A client that sends its request and shuts down its side still gets the reply: keep
        the transport open while a reply is due (closed once the buffered requests are
        answered)."""
        self.eof = True
        return self.busy

    def _next_request(self) -> None:
        try:
            request = _parse_request(self.buffer)
        except ValueError:
            self.transport.close()
            return
        if request is None:
            return  # incomplete: wait for more data
        (method, target, headers, raw), used = request
        del self.buffer[:used]
        self.busy = True
        wait, reply, record = self.server._respond(method, target, headers, raw)
        close = headers.get("connection", "").lower() == "close"
        if wait:
            self._wait_until(record.get("t", time.monotonic()) + wait, reply, record, close)
        else:
            self._send(reply, record, close)

    def _wait_until(
        self,
        deadline: float,
        reply: Callable[[], tuple[int, dict[str, Any], dict[str, str]]],
        record: dict[str, Any],
        close: bool,
    ) -> None:
        """Reply once time.monotonic() has reached `deadline`. A loop's timer may fire a
        little early by the clock the record is kept in (uvloop schedules from libuv's cached
        loop time, in whole milliseconds), so an early wake-up waits out the remainder."""
        left = deadline - time.monotonic()
        if left <= 0:
            self._send(reply, record, close)
            return
        loop = asyncio.get_running_loop()
        self.pending = loop.call_later(left, self._wait_until, deadline, reply, record, close)

    def _send(
        self,
        reply: Callable[[], tuple[int, dict[str, Any], dict[str, str]]],
        record: dict[str, Any],
        close: bool,
    ) -> None:
        self.pending = None
        if self.transport.is_closing():
            return
        code, payload, extra = reply()
        raw = isinstance(payload, bytes)  # a file's content (batch results: JSONL)
        data = payload if raw else json.dumps(payload).encode()
        head = [
            f"HTTP/1.1 {code} {_REASONS.get(code, 'Status')}",
            "Content-Type: " + ("application/octet-stream" if raw else "application/json"),
            f"Content-Length: {len(data)}",
        ]
        head += [f"{k}: {v}" for k, v in extra.items()]
        if close:
            head.append("Connection: close")
        self.transport.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
        record["replied"] = time.monotonic()
        self.busy = False
        if close:
            self.transport.close()
            return
        if self.buffer:
            self._next_request()
        if self.eof and not self.busy:
            self.transport.close()


def _parse_request(
    buffer: bytearray,
) -> tuple[tuple[str, str, dict[str, str], bytes], int] | None:
    """Parse one HTTP/1.1 request from the start of `buffer`: ((method, target, lower-cased
    headers, body), bytes used), or None while it is incomplete.

    Bodies come with Content-Length or chunked transfer encoding; raises ValueError for a
    request line or chunk size it cannot read.
    """
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    at = end + 4
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            eol = buffer.find(b"\r\n", at)
            if eol < 0:
                return None
            size = int(bytes(buffer[at:eol]).split(b";", 1)[0].strip() or b"0", 16)
            at = eol + 2
            if size == 0:
                break
            if len(buffer) < at + size + 2:
                return None
            parts.append(bytes(buffer[at : at + size]))
            at += size + 2
        while True:  # trailers, up to the empty line
            eol = buffer.find(b"\r\n", at)
            if eol < 0:
                return None
            line, at = buffer[at:eol], eol + 2
            if not line:
                break
        raw = b"".join(parts)
    else:
        length = int(headers.get("content-length") or 0)
        if len(buffer) < at + length:
            return None
        raw = bytes(buffer[at : at + length])
        at += length
    return (method, target, headers, raw), at


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


def _reply_body(
    flavour: str, request: dict[str, Any], b: Behaviour, cached: CacheLookup
) -> dict[str, Any]:
    model = request.get("model") or "judge-model"
    tokens_in, tokens_out = prompt_tokens(request), count_tokens(b.content)
    if flavour == "anthropic":
        usage = {  # Anthropic's input_tokens leaves out the cache reads and writes
            "input_tokens": tokens_in - cached.read - cached.write,
            "output_tokens": tokens_out,
            "cache_read_input_tokens": cached.read,
            "cache_creation_input_tokens": cached.write,
        }
        return {
            "id": "msg_loopback",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": b.content}],
            "stop_reason": "max_tokens" if b.truncated else "end_turn",
            "stop_sequence": None,
            **({"usage": usage} if b.report_usage else {}),
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
        **(
            {
                "usage": {
                    "prompt_tokens": tokens_in,
                    "completion_tokens": tokens_out,
                    "total_tokens": tokens_in + tokens_out,
                    "prompt_tokens_details": {"cached_tokens": cached.read},
                }
            }
            if b.report_usage
            else {}
        ),
    }


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    """Yield a started JudgeServer; shut it down after the test."""
    with JudgeServer() as server:
        yield server
