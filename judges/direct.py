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
  has been read, as judges.llm's _SlotTransport holds it for the SDK's requests.
Redirects are followed as the SDK's client follows them. A proxy comes from the environment
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
    one aiohttp session for the calls themselves, made on first use on the running loop."""

    def __init__(self, sdk_http: Any, timeout: float, slot: Callable[[], Any], tls: Any) -> None:
        self.sdk_http = sdk_http
        self.slot = slot
        self.tls = tls
        self.timeout_seconds = timeout
        self._session: Any = None
        self._timeout: Any = None

    def session(self) -> Any:
        """Return the aiohttp session (built on the first call, on the running loop)."""
        if self._session is None:
            import aiohttp

            connector = aiohttp.TCPConnector(
                ssl=self.tls if self.tls is not None else True,
                limit=MAX_CONNECTIONS,
                keepalive_timeout=KEEPALIVE_SECONDS,
            )
            self._session = aiohttp.ClientSession(connector=connector, trust_env=False)
            t = self.timeout_seconds
            self._timeout = aiohttp.ClientTimeout(sock_connect=t, sock_read=t, connect=t)
        return self._session

    async def aclose(self) -> None:
        """Close the aiohttp session and the SDK's client."""
        if self._session is not None:
            await self._session.close()
            self._session = None
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
        SDK's APIStatusError / APITimeoutError / APIConnectionError, or the slot's
        LimiterTimeout."""
        import aiohttp
        import openai

        data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        data = data.encode()
        session = self.http.session()
        async with self.http.slot():
            try:
                async with session.post(
                    self.url,
                    data=data,
                    headers=self.headers,
                    timeout=self.http._timeout,
                    proxy=self.proxy,
                    proxy_auth=self.proxy_auth,
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
