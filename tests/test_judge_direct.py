"""The openai backend's event-loop call without the SDK's request pipeline
(judges.direct, issue 28 item 1) sends what the SDK's own async client sends.

The cases of tests/test_judge_server.py (429 with Retry-After, 500s, 401, timeouts, the
limiter's slot) run their "async" half through this path; here the request itself is
compared with the one the SDK sends when the direct path is not available.
"""

from __future__ import annotations

import tests.judge_server as loopback
from judges import aio, direct
from tests.judge_server import GOOD_GRADE, ok
from tests.test_judge_server import INPUT, backend, secret_env  # noqa: F401 (fixture)

judge_server = loopback.judge_server

# Headers the SDK sets per request (its retry count and timeout) or that belong to the HTTP
# library under it (aiohttp's or httpx's own), not to the request the backend makes.
PER_REQUEST = {
    "x-stainless-retry-count",
    "x-stainless-read-timeout",
    "content-length",
    "host",
    "connection",  # httpx says keep-alive; HTTP/1.1 (aiohttp) keeps the connection without it
}


def _sent(server, monkeypatch, *, direct_path: bool) -> dict:
    monkeypatch.setattr(direct, "available", lambda: direct_path)
    made = backend("openai", server)
    try:
        result = aio.run(made.agrade(INPUT), timeout=30)
    finally:
        made.close()
    assert (result.grade, result.parse_error, result.raw_output) == (2, None, GOOD_GRADE)
    return server.requests[-1]


def test_the_direct_call_sends_the_sdks_body_and_headers(judge_server, secret_env, monkeypatch):  # noqa: F811
    judge_server.script(ok(GOOD_GRADE), ok(GOOD_GRADE))
    through_sdk = _sent(judge_server, monkeypatch, direct_path=False)
    direct_call = _sent(judge_server, monkeypatch, direct_path=True)
    assert direct_call["path"] == through_sdk["path"] == "/v1/chat/completions"
    assert direct_call["json"] == through_sdk["json"]
    assert direct_call["json"]["response_format"] == {"type": "json_object"}
    mine = {k: v for k, v in direct_call["headers"].items() if k not in PER_REQUEST}
    sdk = {k: v for k, v in through_sdk["headers"].items() if k not in PER_REQUEST}
    assert mine == sdk
    assert sdk["user-agent"].startswith("AsyncOpenAI/Python")


def test_the_direct_call_is_the_one_grade_runs_take(judge_server, secret_env):  # noqa: F811
    made = backend("openai", judge_server)
    try:

        async def client():
            return made._async_state().client(made._api_key())

        assert isinstance(aio.run(client(), timeout=30), direct.DirectChat)
    finally:
        made.close()


def test_the_environments_proxy_is_read_once_per_client(judge_server, secret_env, monkeypatch):  # noqa: F811
    """HTTPS_PROXY / NO_PROXY as the SDK's httpx client reads them: when the client is made."""
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", "")
    made = backend("openai", judge_server)
    try:

        async def client():
            return made._async_state().client(made._api_key())

        chat = aio.run(client(), timeout=30)
        assert str(chat.proxy) == "http://proxy.invalid:3128"
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        assert aio.run(client(), timeout=30).proxy is not None  # the same client, read once
    finally:
        made.close()
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    made = backend("openai", judge_server)
    try:
        judge_server.script(ok(GOOD_GRADE))
        assert aio.run(made.agrade(INPUT), timeout=30).grade == 2  # straight to the server
    finally:
        made.close()
