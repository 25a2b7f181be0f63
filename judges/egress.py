"""What a judge call's connection may reach: no redirect followed, every address connected to
checked when the connection is made.

judges.endpoint checks a judge's base_url when it is configured and again before each call
(resolving the host then). Two ways past those checks remain once the request is on its way,
and this module closes both for every HTTP client a backend builds (judges.llm's sync and
async SDK clients, judges.direct's aiohttp session, and so judges.batch's uploads, which go
through the sync client):

- **Redirects.** A 30x reply would send the request, API key and all, to its Location, an
  address nobody checked. Judge APIs never redirect, so no judge client follows one
  (httpx `follow_redirects=False`, aiohttp `allow_redirects=False`); the backend turns a 3xx
  reply into a non-retried JudgeConfigError naming the URL and the Location
  (`redirect_message`).
- **DNS rebinding between the check and the connection.** The HTTP library resolves the host
  again when it connects; a name that answered a public address to the check could answer
  127.0.0.1 or 169.254.169.254 then. The connection itself resolves through the policy:
  httpx's connections use `CheckedBackend` / `AsyncCheckedBackend` (httpcore network backends
  that resolve with EndpointPolicy.resolve_checked, refuse when any address is refused, and
  connect to the checked addresses only; TLS is still verified against the URL's host name,
  which httpcore passes to start_tls as the SNI and certificate name, not the address), and
  aiohttp's connector uses `CheckedResolver` (aiohttp's default resolver, every answer checked
  with EndpointPolicy.check_address). An IP literal is not resolved: check_url has checked it
  before the call, and it cannot change.

A proxy set by the administrator in the environment (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY,
NO_PROXY) is the administrator's choice: connections to it are not checked against the
policy (a proxy on the private network is the rule), the proxy resolves the judge's host
itself, so only the pre-call check (check_resolved, from this machine's resolver) applies to
that host; redirects are still not followed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

import aiohttp
import httpcore2
from aiohttp.abc import AbstractResolver, ResolveResult

from .endpoint import EndpointPolicy, EndpointRefused

# The longest part of a Location header quoted in an error message.
LOCATION_SHOWN = 200


def redirect_message(status: int, url: str, location: str | None) -> str:
    """Return the error text for a judge endpoint's 3xx reply: the URL that answered, the
    status and the Location it pointed to (quoted, cut to LOCATION_SHOWN characters; the
    caller redacts the key), and why it is not followed."""
    if location:
        where = location if len(location) <= LOCATION_SHOWN else location[:LOCATION_SHOWN] + "..."
        to = f"a redirect to {where!r}"
    else:
        to = "a redirect with no Location"
    return (
        f"{url} answered HTTP {status}, {to}: judge calls do not follow redirects (the request "
        "and its key would go to an address that was never checked); set the judge's base_url "
        "to the address that answers"
    )


def refusal_in(exc: BaseException | None) -> EndpointRefused | None:
    """Return the EndpointRefused raised at connect time that `exc` is or wraps (the SDKs
    report it as a connection error caused by it), else None. Follows __cause__ and
    __context__, at most 8 links."""
    for _ in range(8):
        if exc is None:
            return None
        if isinstance(exc, EndpointRefused):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


class CheckedBackend(httpcore2.NetworkBackend):
    """An httpcore network backend (sync) whose TCP connections go only to addresses
    `policy` allows: connect_tcp resolves the host with policy.resolve_checked (raises
    EndpointRefused when any address is refused, or the host does not resolve) and tries the
    checked addresses in order; the last connection error is raised when none answers."""

    def __init__(self, policy: EndpointPolicy, inner: httpcore2.NetworkBackend | None = None):
        self.policy = policy
        self.inner = inner or httpcore2.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        """Return a stream to the first checked address of `host` that accepts (see class)."""
        error: Exception | None = None
        for address in self.policy.resolve_checked(host, port):
            try:
                return self.inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                error = exc
        assert error is not None  # resolve_checked returns at least one address
        raise error

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options=None):
        """Not used by judge clients (no `uds`); delegated."""
        return self.inner.connect_unix_socket(path, timeout, socket_options)

    def sleep(self, seconds: float) -> None:
        """Delegated to the wrapped backend."""
        self.inner.sleep(seconds)


class AsyncCheckedBackend(httpcore2.AsyncNetworkBackend):
    """CheckedBackend for httpcore's async connections (the SDKs' async httpx client, used
    when aiohttp is missing): the look-up and check run in the loop's default executor, so DNS
    does not block the event loop."""

    def __init__(
        self, policy: EndpointPolicy, inner: httpcore2.AsyncNetworkBackend | None = None
    ) -> None:
        self.policy = policy
        self.inner = inner or httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        """Return a stream to the first checked address of `host` that accepts."""
        loop = asyncio.get_running_loop()
        addresses = await loop.run_in_executor(None, self.policy.resolve_checked, host, port)
        error: Exception | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    async def connect_unix_socket(self, path: str, timeout=None, socket_options=None):
        """Not used by judge clients (no `uds`); delegated."""
        return await self.inner.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        """Delegated to the wrapped backend."""
        await self.inner.sleep(seconds)


class CheckedResolver(AbstractResolver):
    """An aiohttp resolver: aiohttp's default resolver, then every address it answers checked
    with policy.check_address (EndpointRefused when any is refused), so the connector only
    ever connects to checked addresses. aiohttp caches the (checked) answers for its DNS TTL
    (10 s by default) and does not call a resolver for IP literals."""

    def __init__(self, policy: EndpointPolicy, inner: AbstractResolver | None = None) -> None:
        self.policy = policy
        self.inner = inner or aiohttp.DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Return the wrapped resolver's answers for `host` once each is allowed."""
        answers = await self.inner.resolve(host, port, family)
        for answer in answers:
            address = ipaddress.ip_address(answer["host"].split("%", 1)[0])
            self.policy.check_address(address, host.lower())
        return answers

    async def close(self) -> None:
        """Close the wrapped resolver."""
        await self.inner.close()


def aiohttp_connector(
    policy: EndpointPolicy | None, *, ssl: Any, limit: int, keepalive_timeout: float
) -> aiohttp.TCPConnector:
    """Return an aiohttp connector for judge calls made without a proxy: its look-ups
    checked by CheckedResolver when `policy` is given (None: aiohttp's default resolver)."""
    resolver = None if policy is None else CheckedResolver(policy)
    return aiohttp.TCPConnector(
        ssl=ssl, limit=limit, keepalive_timeout=keepalive_timeout, resolver=resolver
    )


def check_connections(transport: Any, policy: EndpointPolicy | None) -> Any:
    """Make `transport` (one a judge's httpx client built for direct connections, not a
    proxy's) connect only to addresses `policy` allows, and return it: httpx2's HTTPTransport
    / AsyncHTTPTransport get a Checked network backend on their connection pool, the SDKs'
    aiohttp transports a session whose connector uses CheckedResolver. `policy` None:
    returned unchanged. Raises TypeError for a transport of another kind (fails closed: a
    changed SDK must not drop the check silently)."""
    if policy is None:
        return transport
    import httpx2

    if isinstance(transport, httpx2.HTTPTransport):
        transport._pool._network_backend = CheckedBackend(policy)
    elif isinstance(transport, httpx2.AsyncHTTPTransport):
        transport._pool._network_backend = AsyncCheckedBackend(policy)
    elif isinstance(transport, _aiohttp_transports()) and transport.client is None:
        limits = transport.limits
        limit = 100 if limits.max_connections is None else limits.max_connections

        def session() -> aiohttp.ClientSession:
            connector = aiohttp_connector(
                policy,
                ssl=transport.ssl_context,
                limit=limit,
                keepalive_timeout=limits.keepalive_expiry,
            )
            return aiohttp.ClientSession(connector=connector)

        transport.client = session
    else:
        raise TypeError(f"cannot check the connections of a {type(transport).__name__}")
    return transport


def _aiohttp_transports() -> tuple[type, ...]:
    """The SDKs' vendored httpx-over-aiohttp transport classes (openai's, anthropic's)."""
    found: list[type] = []
    try:
        from openai._vendor.httpx_aiohttp import AiohttpTransport as OpenAITransport

        found.append(OpenAITransport)
    except ImportError:
        pass
    try:
        from anthropic._vendor.httpx_aiohttp import AiohttpTransport as AnthropicTransport

        found.append(AnthropicTransport)
    except ImportError:
        pass
    return tuple(found)


def judge_http_client(base: type, policy: EndpointPolicy | None, **kwargs: Any) -> Any:
    """Return an instance of the SDK's httpx client class `base` (e.g.
    openai.DefaultHttpxClient) for judge calls: follow_redirects=False and its direct
    transport made by check_connections (proxy transports, the administrator's, as made)."""

    class JudgeHttpClient(base):
        def _init_transport(self, *args: Any, **kw: Any) -> Any:
            return check_connections(super()._init_transport(*args, **kw), policy)

    return JudgeHttpClient(follow_redirects=False, **kwargs)
