"""The async HTTP clients judge backends build (judges.llm): one shared TLS context, a
limiter slot held per request on the wire, no redirect followed and every connected address
checked (judges.egress).

Moved out of judges.llm, which builds its backends on these.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .endpoint import EndpointPolicy


def slotted_http_client(
    sdk: Any, timeout: float, slot: Callable[[], Any], policy: EndpointPolicy | None
) -> Any:
    """Return the SDK's aiohttp-backed async client (its documented choice for many concurrent
    calls: about 1.1 ms of CPU per call here against 1.5 ms over httpx), or its default
    async httpx client when the `aiohttp` extra is missing, with each transport it makes
    (direct and proxied) wrapped in a _SlotTransport holding `slot()` per request.

    The wrapping overrides the client's transport factories (`_init_transport`,
    `_init_proxy_transport`: the hooks the SDK's own aiohttp client overrides), so every
    request the SDK sends, through a proxy or not, holds a slot. The client follows no
    redirect, and its direct transport connects only to addresses `policy` allows
    (judges.egress.check_connections; None: unchecked)."""

    from .egress import check_connections

    def slotted(base: type) -> type:
        class SlottedClient(base):
            def _init_transport(self, *args: Any, **kwargs: Any) -> Any:
                inner = check_connections(super()._init_transport(*args, **kwargs), policy)
                return _SlotTransport(inner, slot)

            def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> Any:
                return _SlotTransport(super()._init_proxy_transport(*args, **kwargs), slot)

        return SlottedClient

    tls = {"verify": context} if (context := default_tls_context()) is not None else {}
    try:
        return slotted(sdk.DefaultAioHttpClient)(timeout=timeout, follow_redirects=False, **tls)
    except RuntimeError:
        return slotted(sdk.DefaultAsyncHttpxClient)(timeout=timeout, follow_redirects=False, **tls)


@functools.cache
def default_tls_context() -> Any:
    """Return the process's TLS context for judge clients: the SDKs' own default
    (httpx2.create_ssl_context(): the CA bundle, or SSL_CERT_FILE / SSL_CERT_DIR), built
    once and shared. Each async client otherwise builds its own, loading the CA bundle
    (~40 ms, plus ~55 ms of lazy imports the first time) on a worker's first call to each
    judge. None when the SDKs' HTTP library is not httpx2 (each client then builds its own).
    The worker builds it before forking (config.celery.warm_imports), so its processes share it.
    """
    try:
        import httpx2
    except ImportError:
        return None
    return httpx2.create_ssl_context()


class _SlotTransport:
    """An async HTTP transport (httpx's AsyncBaseTransport interface) that holds one limiter
    slot and RPM token (`slot()`, an async context manager) for each request, from just
    before it is sent until its whole body has been read, and no longer: the SDK's request
    building and reply parsing happen outside the slot, so a judge's `concurrency` counts
    requests on the wire. The response is returned with its body read and its connection
    back in the pool."""

    def __init__(self, inner: Any, slot: Callable[[], Any]) -> None:
        self.inner = inner
        self.slot = slot

    async def handle_async_request(self, request: Any) -> Any:
        """Send `request` through the wrapped transport within a slot; return the response
        (body read). Raises LimiterTimeout, or whatever the wrapped transport raises."""
        async with self.slot():
            response = await self.inner.handle_async_request(request)
            try:
                await response.aread()
            finally:
                await response.aclose()
            return response

    async def aclose(self) -> None:
        """Close the wrapped transport."""
        await self.inner.aclose()

    async def __aenter__(self) -> _SlotTransport:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.inner.__aexit__(*exc_info)
