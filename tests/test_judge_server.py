"""The judge backends through the REAL openai / anthropic SDKs over real loopback HTTP.

tests/test_judges.py covers the same rules with an in-process mock transport;
here the SDKs' own transports, connection pools, header handling and error
classes run end to end against tests/judge_server.py. No database.

Every case runs twice: `grade` (sync SDK client over httpx, the threaded path) and
`agrade` on the judge event loop (async SDK client over aiohttp, the path grade runs use).
"""

from __future__ import annotations

import time
from typing import Any

import anthropic  # noqa: F401  (imported here so its import cost is not billed to the first test)
import openai  # noqa: F401
import pytest
import uvloop

import tests.judge_server as loopback
from judges import GradingInput, JudgeConfigError, JudgeUnavailable, aio, get_backend
from tests.judge_server import (
    GOOD_GRADE,
    JudgeServer,
    cut_off,
    malformed,
    ok,
    refusal,
    slow,
    status,
)

KEY_ENV = "SNAGLIST_JUDGE_KEY_LOOPBACK_TEST"
SECRET = "sk-loopback-SECRET-7f3a9c2e4b6d8f10a2c4e6b8d0f1a3c5"
SDKS = ["openai", "anthropic"]
INPUT = GradingInput(
    question="What is the minimum height of a guarding barrier to a flat roof?",
    key_answer="At least 1100 mm.",
    citation_text="Approved Document K (2013) Diagram 3.1: 1100 mm",
    response="The barrier must be at least 1100 mm high.",
)


# Register the `judge_server` fixture of tests/judge_server.py in this module.
judge_server = loopback.judge_server


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> Any:
    """How a test calls its backends: "sync" (grade) or "async" (agrade on the judge loop).
    Backends made by `backend()` are closed after the test (their connection pools)."""
    yield request.param
    while _MADE:
        _MADE.pop().close()


_MADE: list[Any] = []


def grade(b: Any, mode: str) -> Any:
    """Return b.grade(INPUT), or the same through agrade on the judge event loop."""
    if mode == "async":
        return aio.run(b.agrade(INPUT), timeout=30)
    return b.grade(INPUT)


class Sleeps(list):
    """Record the backend's retry delays, and really sleep them (they are tiny)."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
        time.sleep(seconds)


def backend(sdk: str, server: JudgeServer, sleeps: Sleeps | None = None, **extra: Any) -> Any:
    config = {
        "backend": sdk,
        "base_url": server.url + "/v1" if sdk == "openai" else server.url,
        "model": "m",
        "api_key_env": KEY_ENV,
        "max_tokens": 300,
        "max_retries": 3,
        "base_delay": 0.01,
        "max_delay": 0.05,
        "timeout": 5.0,
        **extra,
    }
    made = get_backend(config, sleep=sleeps)
    _MADE.append(made)
    return made


def expected_path(sdk: str) -> str:
    return "/v1/chat/completions" if sdk == "openai" else "/v1/messages"


def assert_no_secret(server: JudgeServer, *texts: str) -> None:
    for text in texts:
        assert SECRET not in text
    for request in server.requests:
        assert SECRET not in repr(request)  # the server's record drops auth headers


@pytest.mark.parametrize("sdk", SDKS)
def test_good_json_grade(sdk: str, judge_server: JudgeServer, secret_env: str, mode: str) -> None:
    judge_server.script(ok(GOOD_GRADE))
    result = grade(backend(sdk, judge_server), mode)
    assert (result.grade, result.parse_error) == (2, None)
    assert result.rationale == "matches the key"
    assert result.raw_output == GOOD_GRADE
    assert result.stop_reason == ("stop" if sdk == "openai" else "end_turn")
    assert judge_server.paths == [expected_path(sdk)]
    sent = judge_server.requests[0]
    assert sent["json"]["model"] == "m"
    assert sent["json"]["max_tokens"] == 300
    assert "1100 mm" in loopback.request_text(sent["json"])
    if sdk == "openai":
        assert sent["json"]["response_format"] == {"type": "json_object"}
    else:
        assert sent["headers"].get("anthropic-version")
    assert_no_secret(judge_server, result.raw_output, result.rationale)


@pytest.mark.parametrize("sdk", SDKS)
def test_429_with_retry_after_then_200(
    sdk: str, judge_server: JudgeServer, secret_env: str, mode: str
) -> None:
    judge_server.script(status(429, retry_after="1"), ok())
    sleeps = Sleeps()
    result = grade(backend(sdk, judge_server, sleeps), mode)
    assert result.grade == 2
    assert len(judge_server.requests) == 2
    # Retry-After: 1 is honoured, clamped to max_delay (no jitter).
    assert sleeps == [0.05]


@pytest.mark.parametrize("sdk", SDKS)
def test_500_then_200(sdk: str, judge_server: JudgeServer, secret_env: str, mode: str) -> None:
    judge_server.script(status(500), ok())
    sleeps = Sleeps()
    result = grade(backend(sdk, judge_server, sleeps), mode)
    assert result.grade == 2
    assert len(judge_server.requests) == 2
    assert len(sleeps) == 1 and 0.0 <= sleeps[0] <= 0.01  # full jitter under base_delay


@pytest.mark.parametrize("sdk", SDKS)
def test_cut_off_then_good_asks_with_a_bigger_budget(
    sdk: str, judge_server: JudgeServer, secret_env: str, mode: str
) -> None:
    judge_server.script(cut_off(), ok())
    result = grade(backend(sdk, judge_server), mode)
    assert (result.grade, result.parse_error) == (2, None)
    first, second = judge_server.max_tokens()
    assert second > first == 300


@pytest.mark.parametrize("sdk", SDKS)
def test_cut_off_twice_is_truncated(
    sdk: str, judge_server: JudgeServer, secret_env: str, mode: str
) -> None:
    judge_server.script(cut_off(), cut_off())
    result = grade(backend(sdk, judge_server), mode)
    assert result.grade is None and result.parse_error and "truncated" in result.parse_error
    assert len(judge_server.requests) == 2


@pytest.mark.parametrize("sdk", SDKS)
def test_refusal_gives_no_grade(
    sdk: str, judge_server: JudgeServer, secret_env: str, mode: str
) -> None:
    judge_server.script(refusal())
    result = grade(backend(sdk, judge_server), mode)
    assert result.grade is None
    assert result.parse_error and "refusal" in result.parse_error
    assert len(judge_server.requests) == 1


@pytest.mark.parametrize("sdk", SDKS)
def test_malformed_output_gives_no_grade(
    sdk: str, judge_server: JudgeServer, secret_env: str, mode: str
) -> None:
    judge_server.script(malformed())
    result = grade(backend(sdk, judge_server), mode)
    assert result.grade is None and result.parse_error
    assert result.raw_output == malformed().content
    assert len(judge_server.requests) == 1


@pytest.mark.parametrize("sdk", SDKS)
def test_persistent_500_is_unavailable_after_the_cap(
    sdk: str, judge_server: JudgeServer, secret_env: str, mode: str
) -> None:
    judge_server.default = status(500, message=f"upstream exploded for key {SECRET}")
    sleeps = Sleeps()
    with pytest.raises(JudgeUnavailable) as caught:
        grade(backend(sdk, judge_server, sleeps, max_retries=2), mode)
    assert len(judge_server.requests) == 3  # 1 try + max_retries
    assert len(sleeps) == 2
    assert "500" in str(caught.value)
    assert SECRET not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__context__ is None


@pytest.mark.parametrize("sdk", SDKS)
def test_401_is_a_config_error_without_retry(
    sdk: str, judge_server: JudgeServer, secret_env: str, mode: str
) -> None:
    # Real APIs echo (part of) the key back in 401 bodies.
    judge_server.script(status(401, message=f"Incorrect API key provided: {SECRET}"), ok())
    sleeps = Sleeps()
    with pytest.raises(JudgeConfigError) as caught:
        grade(backend(sdk, judge_server, sleeps), mode)
    assert len(judge_server.requests) == 1
    assert sleeps == []
    assert "401" in str(caught.value)
    assert SECRET not in str(caught.value) and SECRET not in repr(caught.value)
    assert caught.value.__cause__ is None and caught.value.__context__ is None


@pytest.mark.parametrize("sdk", SDKS)
def test_key_never_reaches_the_result_or_the_server_record(
    sdk: str, judge_server: JudgeServer, secret_env: str, mode: str
) -> None:
    judge_server.script(ok(GOOD_GRADE))
    result = grade(backend(sdk, judge_server), mode)
    assert_no_secret(
        judge_server, result.raw_output, result.rationale, result.flag_reason, repr(result)
    )


@pytest.mark.parametrize("sdk", SDKS)
def test_slow_reply_beyond_the_timeout_is_retried(
    sdk: str, judge_server: JudgeServer, secret_env: str, mode: str
) -> None:
    judge_server.script(slow(0.6), ok())
    result = grade(backend(sdk, judge_server, Sleeps(), timeout=0.3), mode)
    assert result.grade == 2
    assert len(judge_server.requests) == 2


def test_fixed_latency_applies_to_every_reply(
    judge_server: JudgeServer, secret_env: str, mode: str
) -> None:
    judge_server.latency = 0.1
    b = backend("openai", judge_server)
    started = time.monotonic()
    assert grade(b, mode).grade == 2
    assert grade(b, mode).grade == 2
    assert time.monotonic() - started >= 0.2


@pytest.mark.parametrize("sdk", SDKS)
def test_async_calls_hold_a_limiter_slot_only_for_the_request_on_the_wire(
    sdk: str, judge_server: JudgeServer, secret_env: str
) -> None:
    """The event-loop path takes its concurrency slot in the HTTP transport: with a cap of 2,
    8 calls started together never have more than 2 requests at the server at once (each
    request's span from its arrival to its reply), and all 8 are graded with 8 requests."""
    import asyncio
    import uuid

    import redis

    from judges import RedisLimiter

    client = redis.Redis(host="127.0.0.1", port=6379, db=15)
    limiter = RedisLimiter(
        client,
        f"wire-{uuid.uuid4().hex}",
        prefix="snaglist-test:judges",
        max_concurrency=2,
        poll_seconds=0.005,
    )
    judge_server.latency = 0.05
    b = backend(sdk, judge_server)
    b.limiter = limiter

    async def eight() -> list[Any]:
        return await asyncio.gather(*(b.agrade(INPUT) for _ in range(8)))

    try:
        results = aio.run(eight(), timeout=30)
        spans = [(r["t"], r["replied"]) for r in judge_server.requests]
    finally:
        client.delete(*limiter.keys())
        client.close()
    assert [r.grade for r in results] == [2] * 8
    assert len(spans) == 8
    events = sorted([(t, 1) for t, _ in spans] + [(t, -1) for _, t in spans])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    assert peak == 2


@pytest.mark.parametrize("sdk", SDKS)
def test_async_limiter_timeout_is_not_retried_as_a_connection_error(
    sdk: str, judge_server: JudgeServer, secret_env: str
) -> None:
    """A slot that does not come in time (LimiterTimeout, raised inside the SDK's transport,
    which reports it as a connection error) reaches the caller as LimiterTimeout, at once:
    no retries, no request sent."""
    from contextlib import asynccontextmanager

    from judges import LimiterTimeout

    class NoSlot:
        @asynccontextmanager
        async def aslot(self, timeout: float | None = None) -> Any:
            raise LimiterTimeout("judge rate limit: no slot within the timeout")
            yield  # pragma: no cover - makes this an async generator

    sleeps = Sleeps()
    b = backend(sdk, judge_server, sleeps)
    b.limiter = NoSlot()
    with pytest.raises(LimiterTimeout):
        aio.run(b.agrade(INPUT), timeout=30)
    assert judge_server.requests == []
    assert sleeps == []


@pytest.mark.parametrize("sdk", SDKS)
def test_server_on_uvloop_answers_both_sdks_with_its_latency(
    sdk: str, secret_env: str, mode: str
) -> None:
    """The throughput benchmark runs the loopback API on uvloop (`loop_factory`): it still
    speaks both protocols, scripted replies included, and still holds every reply for the
    fixed latency (measured from arrival to the reply being written)."""
    server = JudgeServer(latency=0.05, loop_factory=uvloop.new_event_loop).start()
    try:
        server.script(status(500), ok('{"grade": 1, "rationale": "partly"}'))
        b = backend(sdk, server)
        result = grade(b, mode)
        assert (result.grade, result.rationale) == (1, "partly")
        assert [r["path"] for r in server.requests] == [expected_path(sdk)] * 2
        assert all(r["replied"] - r["t"] >= 0.05 for r in server.requests)
        assert isinstance(server._loop, uvloop.Loop)
    finally:
        server.stop()


EMPTY_POST = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"


def raw_exchange(
    server: JudgeServer,
    *parts: bytes,
    pause: float = 0.0,
    shut_write: bool = False,
    read: bool = True,
) -> bytes:
    """Send `parts` to the server over a raw TCP connection (sleeping `pause` between them),
    optionally shut down the sending side, then read until the server closes; return what
    was read (nothing when read is False: the connection is closed at once)."""
    import socket

    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        for part in parts:
            sock.sendall(part)
            time.sleep(pause)
        if shut_write:
            sock.shutdown(socket.SHUT_WR)
        received = b""
        while read and (chunk := sock.recv(65536)):
            received += chunk
    return received


def test_server_reads_requests_split_across_packets_chunked_and_one_after_another(
    judge_server: JudgeServer,
) -> None:
    """The server's own HTTP reading, over a raw socket: a chunked body sent a few bytes at a
    time, then (on the same keep-alive connection) two requests in one packet, the second
    with Connection: close. Each gets its own reply in order, and each body is recorded."""
    import json

    judge_server.script(ok("first"), ok("second"), status(429, retry_after=2))
    body = json.dumps({"model": "m", "messages": []}).encode()
    chunked = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        + f"{len(body[:7]):x}\r\n".encode()
        + body[:7]
        + b"\r\n"
        + f"{len(body[7:]):x};ext=1\r\n".encode()
        + body[7:]
        + b"\r\n0\r\nTrailer: t\r\n\r\n"
    )
    plain = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
        + body
    )
    closing = plain.replace(b"Host: x\r\n", b"Host: x\r\nConnection: close\r\n")
    pieces = [chunked[at : at + 5] for at in range(0, len(chunked), 5)]
    received = raw_exchange(judge_server, *pieces, plain + closing, pause=0.001)
    replies = received.split(b"HTTP/1.1 ")[1:]
    assert [r.split(b"\r\n", 1)[0] for r in replies] == [
        b"200 OK",
        b"200 OK",
        b"429 Too Many Requests",
    ]
    assert b'"content": "first"' in replies[0] and b'"content": "second"' in replies[1]
    assert b"Retry-After: 2\r\n" in replies[2] and b"Connection: close\r\n" in replies[2]
    assert [r["json"] for r in judge_server.requests] == [{"model": "m", "messages": []}] * 3
    assert all(r["replied"] >= r["t"] for r in judge_server.requests)


def test_server_drops_the_reply_of_a_client_that_hung_up_and_serves_the_next(
    judge_server: JudgeServer,
) -> None:
    """A client that hangs up while its (slow) reply is pending costs nothing later: the
    reply goes to a closed connection (at its end of file the server cannot tell a hang-up
    from a half-close, so it answers), and a new connection is served as usual."""
    judge_server.script(slow(0.3), ok("after"))
    raw_exchange(judge_server, EMPTY_POST, read=False)
    time.sleep(0.4)
    received = raw_exchange(
        judge_server, EMPTY_POST.replace(b"Host: x", b"Host: x\r\nConnection: close")
    )
    assert received.startswith(b"HTTP/1.1 200 OK") and b'"content": "after"' in received
    assert [r["path"] for r in judge_server.requests] == ["/v1/chat/completions"] * 2
    assert "replied" in judge_server.requests[1]


def test_server_answers_a_client_that_shut_down_its_side_after_sending(
    judge_server: JudgeServer,
) -> None:
    """A client may send its request(s) and shut down its sending side (half-close) before
    reading: each buffered request is still answered after its latency, then the server
    closes the connection."""
    judge_server.latency = 0.05
    judge_server.script(ok("one"), ok("two"))
    received = raw_exchange(judge_server, EMPTY_POST + EMPTY_POST, shut_write=True)
    assert received.count(b"HTTP/1.1 200 OK") == 2
    assert received.index(b'"content": "one"') < received.index(b'"content": "two"')
    assert [("replied" in r) for r in judge_server.requests] == [True, True]
