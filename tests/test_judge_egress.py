"""Judge calls follow no redirect and connect only to checked addresses (judges.egress).

Two holes in the endpoint policy of issue 26 ("no data may choose an address to call"):
- a judge endpoint answering 30x sent the request, key and all, to the Location, an
  address nobody checked: a loopback server answers 302 to a second port, which must get no
  connection at all, and the error names both;
- the host name was checked before the call and resolved again at connect time (DNS
  rebinding): a getaddrinfo that answers a public address to the check and 127.0.0.1 later
  must see the connection refused, with nothing reaching the loopback server.
Each through every client a backend builds: the sync SDK clients (and the batch upload over
them), the openai backend's direct aiohttp call, the SDKs' async clients over aiohttp, and
their httpx fallback when aiohttp is missing. A proxy in the environment, the
administrator's choice, is connected to unchecked (docs/admin.md).
"""

from __future__ import annotations

import http.server
import ipaddress
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpcore2
import httpx2
import pytest

from judges import EndpointPolicy, EndpointRefused, JudgeConfigError, aio, direct, get_backend
from judges.batch import OpenAIBatchAPI
from judges.egress import CheckedBackend, redirect_message
from tests.test_judge_server import INPUT, KEY_ENV, SECRET

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)

# (sdk, how it is called): every HTTP client a backend builds.
PATHS = [
    ("openai", "sync"),
    ("anthropic", "sync"),
    ("openai", "direct"),  # judges.direct's aiohttp session (what grade runs take)
    ("openai", "async-sdk"),  # the SDK's async client over aiohttp
    ("anthropic", "async-sdk"),
    ("openai", "async-httpx"),  # the SDK's async httpx client (aiohttp missing)
    ("anthropic", "async-httpx"),
]


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


class Recorder(http.server.ThreadingHTTPServer):
    """A loopback HTTP server answering every request with `status` and `headers`,
    recording (method, path, headers) of each request."""

    daemon_threads = True

    def __init__(self, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.status, self.reply_headers = status, headers or {}
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                recorder.requests.append((self.command, self.path, dict(self.headers)))
                self.send_response(recorder.status)
                for name, value in recorder.reply_headers.items():
                    self.send_header(name, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()


@pytest.fixture
def elsewhere() -> Iterator[socket.socket]:
    """A listening socket nobody accepts on: the kernel completes any TCP handshake into its
    backlog, so a non-blocking accept() after the call tells whether anything connected."""
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setblocking(False)
    yield sock
    sock.close()


def connected(sock: socket.socket) -> bool:
    """True when a connection is waiting on `sock` (see `elsewhere`)."""
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def _policy(**kw: Any) -> EndpointPolicy:
    return EndpointPolicy(key_env_allowed=frozenset({KEY_ENV}), **kw)


def _backend(sdk: str, base: str, policy: EndpointPolicy | None) -> Any:
    config = {
        "backend": sdk,
        "base_url": base + "/v1" if sdk == "openai" else base,
        "model": "m",
        "api_key_env": KEY_ENV,
        "max_retries": 3,  # a redirect or a refusal must not be retried
        "base_delay": 0.01,
        "max_delay": 0.02,
        "timeout": 5.0,
    }
    return get_backend(config, endpoint_policy=policy)


def _call(sdk: str, how: str, base: str, policy: EndpointPolicy | None, monkeypatch) -> None:
    """Grade INPUT through the path `how` names (PATHS); whatever it raises propagates."""
    import anthropic
    import openai

    monkeypatch.setattr(direct, "available", lambda: how == "direct")
    if how == "async-httpx":
        module = openai if sdk == "openai" else anthropic

        def missing(**_kw: Any) -> Any:
            raise RuntimeError("no aiohttp extra")

        class Missing(module.DefaultAsyncHttpxClient):
            def __init__(self, **kw: Any) -> None:
                missing(**kw)

        monkeypatch.setattr(module, "DefaultAioHttpClient", Missing)
    made = _backend(sdk, base, policy)
    try:
        if how == "sync":
            made.grade(INPUT)
        else:
            aio.run(made.agrade(INPUT), timeout=30)
    finally:
        made.close()


def _path(sdk: str) -> str:
    return "/v1/chat/completions" if sdk == "openai" else "/v1/messages"


@pytest.mark.parametrize(("sdk", "how"), PATHS)
def test_a_redirect_is_not_followed_and_the_error_says_where_it_pointed(
    sdk, how, secret_env, elsewhere, monkeypatch
):
    target = f"http://127.0.0.1:{elsewhere.getsockname()[1]}/steal"
    server = Recorder(302, {"Location": target})
    policy = _policy(http_hosts=frozenset({"127.0.0.1"}), allowed_networks=LOOPBACK)
    try:
        with pytest.raises(JudgeConfigError) as caught:
            _call(sdk, how, f"http://127.0.0.1:{server.port}", policy, monkeypatch)
    finally:
        server.close()
    url = f"http://127.0.0.1:{server.port}{_path(sdk)}"
    assert str(caught.value) == f"m: {redirect_message(302, url, target)}"
    assert f"answered HTTP 302, a redirect to '{target}'" in str(caught.value)
    assert len(server.requests) == 1  # asked once: not retried
    assert not connected(elsewhere)  # the Location got no connection, so never the key
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize("status", [301, 303, 307, 308])
def test_every_redirect_status_is_refused_even_without_a_policy(
    status, secret_env, elsewhere, monkeypatch
):
    target = f"http://127.0.0.1:{elsewhere.getsockname()[1]}/v1/chat/completions"
    server = Recorder(status, {"Location": target})
    try:
        with pytest.raises(JudgeConfigError, match=f"answered HTTP {status}, a redirect to"):
            _call("openai", "sync", f"http://127.0.0.1:{server.port}", None, monkeypatch)
        with pytest.raises(JudgeConfigError, match=f"answered HTTP {status}, a redirect to"):
            _call("openai", "direct", f"http://127.0.0.1:{server.port}", None, monkeypatch)
    finally:
        server.close()
    assert len(server.requests) == 2
    assert not connected(elsewhere)


def test_the_batch_upload_does_not_follow_a_redirect(secret_env, elsewhere, monkeypatch):
    target = f"http://127.0.0.1:{elsewhere.getsockname()[1]}/v1/files"
    server = Recorder(307, {"Location": target})
    policy = _policy(http_hosts=frozenset({"127.0.0.1"}), allowed_networks=LOOPBACK)
    made = _backend("openai", f"http://127.0.0.1:{server.port}", policy)
    try:
        with pytest.raises(JudgeConfigError) as caught:
            OpenAIBatchAPI(made).submit([{"custom_id": "c1"}], "tag")
    finally:
        made.close()
        server.close()
    assert str(caught.value).startswith(
        f"batch API: m: http://127.0.0.1:{server.port}/v1/files answered HTTP 307, "
        f"a redirect to '{target}'"
    )
    assert [r[1] for r in server.requests] == ["/v1/files"]
    assert not connected(elsewhere)


class Rebinding:
    """socket.getaddrinfo for `name`: `first` for the first `checks` look-ups, then
    127.0.0.1 (a rebinding DNS answer); other names as the real one answers."""

    def __init__(self, real: Any, name: str, first: str, checks: int = 1) -> None:
        self.real, self.name, self.first, self.checks = real, name, first, checks
        self.asked: list[str] = []

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> list:
        host = host.decode() if isinstance(host, bytes) else host
        if host != self.name:
            return self.real(host, port, *args, **kwargs)
        address = self.first if len(self.asked) < self.checks else "127.0.0.1"
        self.asked.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port)))]


@pytest.mark.parametrize(("sdk", "how"), PATHS)
def test_a_name_that_rebinds_to_loopback_after_the_check_is_refused_at_connect_time(
    sdk, how, secret_env, monkeypatch
):
    server = Recorder(200)
    rebinding = Rebinding(socket.getaddrinfo, "judge.test", "93.184.215.14")
    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    policy = _policy(http_hosts=frozenset({"judge.test"}))  # loopback not allowed
    try:
        with pytest.raises(EndpointRefused) as caught:
            _call(sdk, how, f"http://judge.test:{server.port}", policy, monkeypatch)
    finally:
        server.close()
    assert str(caught.value) == (
        "base_url: judge.test (127.0.0.1) is a loopback address; an administrator allows "
        "such a range with SNAGLIST_JUDGE_ALLOWED_NETWORKS"
    )
    # The check before the call saw the public address; the connection's own look-up saw
    # loopback, and was refused once (not retried): the server got nothing.
    assert rebinding.asked == ["93.184.215.14", "127.0.0.1"]
    assert server.requests == []


def test_without_the_connect_time_check_the_rebound_name_would_reach_loopback(
    secret_env, monkeypatch
):
    """The attack of the test above is real: with the check only before the call (a bare
    httpx client, as the SDKs build), the rebound name's request reaches the server."""
    server = Recorder(200)
    rebinding = Rebinding(socket.getaddrinfo, "judge.test", "93.184.215.14")
    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    policy = _policy(http_hosts=frozenset({"judge.test"}))
    url = f"http://judge.test:{server.port}/v1/chat/completions"
    try:
        policy.check_resolved(url)  # passes: the public answer
        with httpx2.Client() as client:
            assert client.post(url, content=b"{}").status_code == 200
    finally:
        server.close()
    assert len(server.requests) == 1


def test_a_connection_goes_to_the_checked_address_with_tls_for_the_host_name(monkeypatch):
    """CheckedBackend connects to the address the policy checked; httpcore still hands the
    URL's host name to start_tls, so the certificate is verified for judge.test."""
    seen: dict[str, Any] = {}

    class Stream(httpcore2.NetworkStream):
        def start_tls(self, ssl_context, server_hostname=None, timeout=None):
            seen["server_hostname"] = server_hostname
            raise httpcore2.ConnectError("stop here")

        def close(self) -> None:
            pass

    class Inner(httpcore2.NetworkBackend):
        def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            seen["connected"] = (host, port)
            return Stream()

    answers = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", 443))]
    policy = _policy(resolve=lambda *a, **k: answers)
    pool = httpcore2.ConnectionPool(network_backend=CheckedBackend(policy, Inner()))
    with pytest.raises(httpcore2.ConnectError):
        pool.request("GET", "https://judge.test/v1/models")
    assert seen == {"connected": ("93.184.215.14", 443), "server_hostname": "judge.test"}


@pytest.mark.parametrize("how", ["sync", "direct", "async-sdk"])
def test_the_administrators_proxy_is_reached_unchecked_and_the_judge_host_checked_before(
    how, secret_env, monkeypatch
):
    """docs/admin.md: a proxy in the environment is the administrator's choice. Here it is on
    loopback, which the policy does not allow for judges, and still gets the call; the judge's
    own host is checked before the call (a public answer), and the proxy resolves it."""
    proxy = Recorder(200)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("NO_PROXY", "")
    rebinding = Rebinding(socket.getaddrinfo, "judge.test", "93.184.215.14", checks=99)
    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    policy = _policy(http_hosts=frozenset({"judge.test"}))
    try:
        _call("openai", how, "http://judge.test:8000", policy, monkeypatch)
    finally:
        proxy.close()
    assert [r[1] for r in proxy.requests] == ["http://judge.test:8000/v1/chat/completions"]
    assert rebinding.asked == ["93.184.215.14"]  # the check before the call, only
