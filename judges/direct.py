"""The openai backend's judge call on the event loop without the SDK's per-request pipeline.

Profiled in a grade run (bench/README.md, "Judge call CPU"), the openai SDK's request path
was ~68% of a worker's Python time per judge call, aiohttp's own part of it ~15%: per call
the SDK copies a pydantic options model, builds and merges an httpx request and its headers,
passes it through its auth, redirect and transport layers and wraps aiohttp's reply in an
httpx response. `DirectHttp` sends the same request (the URL, the headers the SDK client
sends: its defaults and its Authorization, read once per client, and the SDK's JSON
encoding) straight through one aiohttp session, and keeps the SDK's contract where the
backend relies on it:
- a reply that is not 2xx raises the SDK's own APIStatusError subclass, made by the SDK
  client from the reply (same message, status and headers: Retry-After is read as before);
- a timeout (connect or read, each `timeout` seconds, as the SDK's transport maps its
  timeout) raises APITimeoutError, any other transport failure APIConnectionError;
- a 2xx reply is decoded as the SDK does for `cast_to=object`: JSON when its content type
  says JSON (a body that does not decode raises, as there), its text otherwise;
- the limiter slot (`slot()`) is held from just before the request is sent until its body
  has been read, as judges.clients' _SlotTransport holds it for the SDK's requests.
No redirect is followed (`allow_redirects=False`; the 3xx reply raises the SDK's
APIStatusError, which the backend reports as a non-retried redirect: judges.egress), and a
connection made without a proxy resolves through judges.egress.CheckedResolver, so it goes
only to addresses the backend's EndpointPolicy allows. A proxy comes from the environment
(HTTPS_PROXY, NO_PROXY, ...) as read once per SDK client, when the client is made, as the
SDK's httpx client reads it: aiohttp's own trust_env would look for it, and for a .netrc
entry, in a thread per request (~24% of the worker's Python time per call, profiled), and a
.netrc entry would clash with the Authorization header. Used only when aiohttp is installed
(the SDK's `aiohttp` extra); without it the backend posts through the SDK.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .endpoint import EndpointPolicy

# As the openai SDK's aiohttp client (openai._constants.DEFAULT_CONNECTION_LIMITS).
MAX_CONNECTIONS = 1000
KEEPALIVE_SECONDS = 5.0


def available() -> bool:
    """Return True when aiohttp can be imported (the direct path's transport)."""
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return False
    return True


class DirectHttp:
    """A backend's HTTP side on the judge loop: the SDK's slotted async httpx client
    (`sdk_http`, for the SDK client the backend still builds: its headers and errors) and
    aiohttp sessions for the calls themselves, made on first use on the running loop: one for
    direct connections, whose look-ups are checked against `policy` (judges.egress
    .CheckedResolver; None: unchecked), and one for calls through the environment's proxy,
    whose only connections are to that proxy, the administrator's choice (not checked)."""

    def __init__(
        self,
        sdk_http: Any,
        timeout: float,
        slot: Callable[[], Any],
        tls: Any,
        policy: EndpointPolicy | None = None,
    ) -> None:
        self.sdk_http = sdk_http
        self.slot = slot
        self.tls = tls
        self.policy = policy
        self.timeout_seconds = timeout
        self._sessions: dict[bool, Any] = {}
        self._timeout: Any = None

    def session(self, *, proxied: bool = False) -> Any:
        """Return the aiohttp session for calls through a proxy (`proxied`) or not, built on
        its first call, on the running loop."""
        session = self._sessions.get(proxied)
        if session is None:
            import aiohttp

            from .egress import aiohttp_connector

            connector = aiohttp_connector(
                None if proxied else self.policy,
                ssl=self.tls if self.tls is not None else True,
                limit=MAX_CONNECTIONS,
                keepalive_timeout=KEEPALIVE_SECONDS,
            )
            session = aiohttp.ClientSession(connector=connector, trust_env=False)
            self._sessions[proxied] = session
            t = self.timeout_seconds
            self._timeout = aiohttp.ClientTimeout(sock_connect=t, sock_read=t, connect=t)
        return session

    async def aclose(self) -> None:
        """Close the aiohttp sessions and the SDK's client."""
        sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            await session.close()
        await self.sdk_http.aclose()


class DirectChat:
    """One SDK client's Chat Completions endpoint, called through a DirectHttp."""

    def __init__(self, sdk_client: Any, url: str, http: DirectHttp) -> None:
        from aiohttp.helpers import get_env_proxy_for_url
        from yarl import URL

        headers = {**sdk_client.default_headers, **sdk_client.auth_headers}
        self.headers = {k: v for k, v in headers.items() if isinstance(v, str)}  # no Omit()
        self.sdk_client = sdk_client
        self.url = url
        self.http = http
        try:  # the environment's proxy for this URL (NO_PROXY applied), or none
            self.proxy, self.proxy_auth = get_env_proxy_for_url(URL(url))
        except LookupError:
            self.proxy, self.proxy_auth = None, None

    def _request(self, data: bytes) -> Any:
        import httpx2

        return httpx2.Request("POST", self.url, headers=self.headers, content=data)

    async def post(self, body: dict[str, Any]) -> Any:
        """POST `body` (JSON) and return the decoded reply (module docstring). Raises the
        SDK's APIStatusError (a 3xx reply too: not followed) / APITimeoutError /
        APIConnectionError, the slot's LimiterTimeout, or EndpointRefused when the host
        resolves to an address the policy refuses (nothing sent)."""
        import aiohttp
        import openai

        data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        data = data.encode()
        session = self.http.session(proxied=self.proxy is not None)
        async with self.http.slot():
            try:
                async with session.post(
                    self.url,
                    data=data,
                    headers=self.headers,
                    timeout=self.http._timeout,
                    proxy=self.proxy,
                    proxy_auth=self.proxy_auth,
                    allow_redirects=False,
                ) as reply:
                    content = await reply.read()
                    status, raw_headers = reply.status, reply.raw_headers
            except TimeoutError:
                raise openai.APITimeoutError(request=self._request(data)) from None
            except (aiohttp.ClientError, OSError):
                raise openai.APIConnectionError(request=self._request(data)) from None
        if not 200 <= status < 300:
            import httpx2

            response = httpx2.Response(
                status, headers=raw_headers, content=content, request=self._request(data)
            )
            raise self.sdk_client._make_status_error_from_response(response) from None
        kind = next((v for k, v in raw_headers if k.lower() == b"content-type"), b"*")
        if not kind.split(b";")[0].strip().endswith(b"json"):
            return content.decode("utf-8", errors="replace")
        return json.loads(content)
