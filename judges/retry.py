"""Retry transient judge-API failures with capped exponential backoff and full jitter.

Rules (ours, not the SDK's: SDK clients are built with max_retries=0):
- Transient: HTTP 408, 429 and 5xx (incl. Anthropic's 529 "overloaded"), timeouts,
  connection errors. Retried up to `max_retries` times, then JudgeUnavailable.
- Delay before retry n (0-based): uniform(0, min(max_delay, base_delay * 2**n)),
  "full jitter" (AWS Architecture Blog, Brooker 2015, "Exponential Backoff And Jitter").
- A `Retry-After` header (RFC 9110 §10.2.3: delay-seconds or an HTTP-date) or
  OpenAI's `retry-after-ms` replaces the jittered delay, clamped to [0, max_delay].
- Any other 4xx: JudgeConfigError at once, no retry.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from .types import JudgeConfigError, JudgeUnavailable, without_nul

T = TypeVar("T")

DEFAULT_MAX_RETRIES = 5
DEFAULT_BASE_DELAY = 1.0
DEFAULT_MAX_DELAY = 60.0


@dataclass(frozen=True)
class Failure:
    """A classified API failure: transient or not, with the server's wait hint and a safe message.

    message must already be free of secrets (see `redact`).
    """

    transient: bool
    message: str
    status: int | None = None
    retry_after: float | None = None


def is_transient_status(status: int) -> bool:
    """Return True for statuses worth retrying: 408, 429 and every 5xx."""
    return status in (408, 429) or status >= 500


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: Callable[[], datetime] | None = None
) -> float | None:
    """Return the server's requested wait in seconds, or None.

    Reads `retry-after-ms` (OpenAI) then `Retry-After` as delay-seconds or an
    HTTP-date (RFC 9110 §10.2.3). Past dates give 0.0; unreadable values give None.
    """
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms and re.fullmatch(r"\s*\d+(?:\.\d+)?\s*", ms):
        return float(ms) / 1000.0
    value = lowered.get("retry-after")
    if not value:
        return None
    value = value.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now() if now else datetime.now(UTC)
    return max(0.0, (when - current).total_seconds())


@dataclass
class RetryPolicy:
    """How often and how long to retry; `sleep`, `asleep` and `rng` are injectable so tests run instantly."""

    max_retries: int = DEFAULT_MAX_RETRIES
    base_delay: float = DEFAULT_BASE_DELAY
    max_delay: float = DEFAULT_MAX_DELAY
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)
    # The event-loop twin of `sleep`, used by acall_with_retries.
    asleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Return seconds to wait before retry `attempt` (0-based), honouring Retry-After."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        ceiling = min(self.max_delay, self.base_delay * (2**attempt))
        return self.rng.uniform(0.0, ceiling)


def call_with_retries(
    call: Callable[[], T],
    classify: Callable[[BaseException], Failure | None],
    policy: RetryPolicy,
) -> T:
    """Return call()'s result, retrying transient failures per `policy`.

    classify maps an exception to a Failure, or None to let it propagate untouched.
    Raises JudgeConfigError for a non-transient failure (no retry) and
    JudgeUnavailable once `policy.max_retries` retries are spent. The raised
    errors carry no exception context, so SDK objects holding request headers
    (and the API key) are not chained into tracebacks.
    """
    attempt = 0
    while True:
        try:
            return call()
        except Exception as exc:
            failure = _classified(exc, classify)
        # Decided outside the except block on purpose: no __context__ chaining.
        policy.sleep(_delay_or_raise(failure, attempt, policy))
        attempt += 1


async def acall_with_retries(
    call: Callable[[], Awaitable[T]],
    classify: Callable[[BaseException], Failure | None],
    policy: RetryPolicy,
) -> T:
    """call_with_retries for a coroutine function: the same rules, errors and delays, but the
    waits are `await policy.asleep(seconds)` so other calls on the event loop go on."""
    attempt = 0
    while True:
        try:
            return await call()
        except Exception as exc:
            failure = _classified(exc, classify)
        await policy.asleep(_delay_or_raise(failure, attempt, policy))
        attempt += 1


def _classified(exc: Exception, classify: Callable[[BaseException], Failure | None]) -> Failure:
    """Return classify(exc); re-raise the exception being handled when it is not an API failure."""
    failure = classify(exc)
    if failure is None:
        raise  # noqa: PLE0704 - called from an except block: re-raises `exc` untouched
    return failure


def _delay_or_raise(failure: Failure, attempt: int, policy: RetryPolicy) -> float:
    """Return the wait before retry `attempt`; raise JudgeConfigError / JudgeUnavailable instead
    when the failure is not transient or the retries are spent."""
    if not failure.transient:
        raise JudgeConfigError(failure.message)
    if attempt >= policy.max_retries:
        raise JudgeUnavailable(f"judge unavailable after {attempt + 1} attempts: {failure.message}")
    return policy.delay(attempt, failure.retry_after)


_TOKENISH = re.compile(r"\b(?:sk|pk|rk|key|token)[-_][A-Za-z0-9*_\-.]{6,}|\b[A-Za-z0-9_\-]{32,}\b")


def redact(text: str, *secrets: str | None) -> str:
    """Return text with each secret, and anything shaped like an API key, replaced by [REDACTED],
    and any NUL character by U+FFFD (the text is stored, and PostgreSQL text cannot hold NUL).

    Some APIs echo a masked key in 401 bodies ("Incorrect API key provided: sk-...abcd").
    """
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[REDACTED]")
    return without_nul(_TOKENISH.sub("[REDACTED]", text))
