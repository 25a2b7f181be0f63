"""Judge backends that call a hosted model through the official openai / anthropic SDKs.

The API key is read from os.environ[config.api_key_env] at each call. The sync path hands
it to a short-lived SDK client (cheap: it wraps the backend's pooled httpx client, built once
per backend and shared by threads); the async path (`agrade`, on the judge event loop of
judges.aio) keeps one async SDK client per backend while the variable's value stays
the same (the openai backend's async request itself is sent by judges.direct, with
that client's headers and error classes). The key is never written to the database, logged, or put into raw_output or
exception text (exception text is redacted, and raised errors carry no chained SDK exception).

Before each call (each attempt, sync, async or batch: `_api_key` is the one place) a backend
given an EndpointPolicy (judges.endpoint; scoring.runs.services.backends.judge_backend
always gives one) checks the key variable's name and the base_url's host against it, the
host's addresses as resolved then (DNS rebinding; a resolution is reused for
RESOLVE_TTL_SECONDS), and refuses the call with EndpointRefused (a JudgeConfigError).
Every HTTP client a backend builds follows no redirect and checks, with the same policy, the
addresses it connects to when it connects (judges.egress): a 3xx reply fails the call, not
retried, with a JudgeConfigError naming the URL and its Location; a connection to a refused
address raises the EndpointRefused itself, not a (retried) connection error.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .base import JudgeBackend, JudgeConfig
from .clients import default_tls_context, slotted_http_client
from .endpoint import EndpointPolicy
from .limits import LimiterTimeout, NullLimiter
from .parsing import is_truncated, parse_grade, parse_verdict
from .prompts import (
    AUDITOR_PROMPT_VERSION,
    JUDGE_PROMPT_VERSION,
    JudgePrompt,
    check_version,
    render_auditor_prompt,
    render_judge_prompt,
)
from .retry import (
    Failure,
    RetryPolicy,
    acall_with_retries,
    call_with_retries,
    is_transient_status,
    parse_retry_after,
    redact,
)
from .types import (
    AuditInput,
    AuditResult,
    GradeResult,
    GradingInput,
    JudgeConfigError,
    Usage,
    anthropic_usage,
    openai_usage,
)

# A cut-off reply is retried once with this many times the token budget (brief: x2).
TRUNCATION_BUDGET_FACTOR = 2
# How long a backend trusts its last check of base_url's resolved addresses: a look-up per
# call would block the judge event loop on DNS for every call (glibc keeps no cache).
RESOLVE_TTL_SECONDS = 5.0


@dataclass(frozen=True)
class Completion:
    """One model reply: its text, the API's stop reason and the tokens it reported (None:
    the reply reported no usage)."""

    text: str
    stop_reason: str | None
    usage: Usage | None = None


def _with_retry_usage(first: Completion, second: Completion) -> Completion:
    """Return `second` (the reply asked again after a cut-off) carrying the usage of both
    calls: both were paid. Unknown on either side makes the sum unknown."""
    usage = None if first.usage is None or second.usage is None else first.usage + second.usage
    return Completion(text=second.text, stop_reason=second.stop_reason, usage=usage)


class ChatBackend(JudgeBackend):
    """Render a prompt, call the model with our retries, parse the reply.

    A reply cut off by the token budget is asked for once more with
    TRUNCATION_BUDGET_FACTOR x max_tokens; if still cut off, the result has
    parse_error "truncated" and grade/verdict None.
    """

    def __init__(
        self,
        config: JudgeConfig,
        *,
        http_client: Any | None = None,
        sleep: Callable[[float], None] | None = None,
        rng: random.Random | None = None,
        limiter: Any | None = None,
        limiter_timeout: float | None = 600.0,
        endpoint_policy: EndpointPolicy | None = None,
    ) -> None:
        self.config = config
        self.endpoint_policy = endpoint_policy
        self._endpoint_checked_at: float | None = None
        self.limiter_timeout = limiter_timeout
        self._http_client = http_client
        self._owns_http_client = http_client is None
        self._http_lock = threading.Lock()
        # The event-loop side (see `agrade`): built on the judge loop's thread, used only there.
        self._aio: _AsyncState | None = None
        self.policy = RetryPolicy(
            max_retries=config.max_retries,
            base_delay=config.base_delay,
            max_delay=config.max_delay,
        )
        if sleep is not None:
            self.policy.sleep = sleep
            self.policy.asleep = _as_coroutine(sleep)
        if rng is not None:
            self.policy.rng = rng
        self.limiter = limiter or NullLimiter()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.config.model!r}, base_url={self.config.base_url!r})"
        )

    def close(self) -> None:
        """Close the pooled HTTP clients this backend created (an injected one is left open)."""
        if self._owns_http_client and self._http_client is not None:
            self._http_client.close()
            self._http_client = None
        state, self._aio = self._aio, None
        if state is None or state.loop.is_closed():
            return
        try:
            on_loop = asyncio.get_running_loop() is state.loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            state.loop.create_task(state.http_client.aclose())
        elif state.loop.is_running():
            asyncio.run_coroutine_threadsafe(state.http_client.aclose(), state.loop).result(5)

    @property
    def supports_async(self) -> bool:
        """True when `agrade` can be used: the backend owns its transport (tests that inject a
        sync `http_client` get the sync path only)."""
        return self._owns_http_client

    def _pooled_http_client(self, factory: Callable[[], Any]) -> Any:
        """Return the backend's httpx client (one connection pool), built once, thread-safely."""
        if self._http_client is None:
            with self._http_lock:
                if self._http_client is None:
                    self._http_client = factory()
        return self._http_client

    def prompt_version(self, role: str) -> str:
        """Return the template this backend renders for `role` ("judge" or "auditor"): its
        config's prompt_version, or the role's default. Raises JudgeConfigError when the
        configured version is another role's template."""
        default = JUDGE_PROMPT_VERSION if role == "judge" else AUDITOR_PROMPT_VERSION
        try:
            return check_version(self.config.prompt_version or default, role)
        except ValueError as exc:
            raise JudgeConfigError(str(exc)) from None

    def judge_prompt(self, inp: GradingInput) -> JudgePrompt:
        """Return the prompt this backend sends to grade `inp` (judges.prompts
        .JudgePrompt: the text, with the prefix shared by a question's responses and the
        per-response suffix). Batch and live requests are built from it alike."""
        return render_judge_prompt(inp, self.prompt_version("judge"))

    def grade(self, inp: GradingInput) -> GradeResult:
        """Return the model's grade; grade None with parse_error when its reply is unusable."""
        return self.grade_result(self._complete_with_budget(self.judge_prompt(inp)), inp.scale)

    def grade_result(self, reply: Completion, scale: list[int]) -> GradeResult:
        """Return the GradeResult of one judge reply on the grade `scale` (parse_grade): the
        one reading of a reply, live or from a vendor batch (judges.batch)."""
        grade, fields, error = parse_grade(reply.text, scale, stop_reason=reply.stop_reason)
        return GradeResult(
            grade=grade,
            rationale=fields["rationale"],
            flag=fields["flag"],
            flag_reason=fields["flag_reason"],
            raw_output=reply.text,
            stop_reason=reply.stop_reason,
            prompt_version=self.prompt_version("judge"),
            parse_error=error,
            usage=reply.usage,
        )

    async def agrade(self, inp: GradingInput) -> GradeResult:
        """`grade` as a coroutine, for the judge event loop (judges.aio).

        Same prompt, parsing, retries and limits; the call goes through the SDK's async
        client, and at most `concurrency` calls of this backend per process wait on the
        shared Redis limiter at once (the others wait on a local semaphore, at no cost).
        """
        state = self._async_state()
        async with state.local_slots:
            reply = await self._acomplete_with_budget(self.judge_prompt(inp), state)
        return self.grade_result(reply, inp.scale)

    def audit(self, inp: AuditInput) -> AuditResult:
        """Return the model's verdict; verdict None with parse_error when its reply is unusable."""
        version = self.prompt_version("auditor")
        reply = self._complete_with_budget(render_auditor_prompt(inp, version))
        verdict, fields, error = parse_verdict(reply.text, stop_reason=reply.stop_reason)
        return AuditResult(
            verdict=verdict,  # type: ignore[arg-type]
            rationale=fields["rationale"],
            raw_output=reply.text,
            stop_reason=reply.stop_reason,
            prompt_version=version,
            parse_error=error,
            usage=reply.usage,
        )

    def _complete_with_budget(self, prompt: str) -> Completion:
        reply = self._complete_retrying(prompt, self.config.max_tokens)
        if is_truncated(reply.stop_reason):
            reply = _with_retry_usage(
                reply,
                self._complete_retrying(prompt, self.config.max_tokens * TRUNCATION_BUDGET_FACTOR),
            )
        return reply

    def _complete_retrying(self, prompt: str, max_tokens: int) -> Completion:
        def attempt() -> Completion:
            # Each attempt, retries included, takes a concurrency slot and an RPM token.
            with self.limiter.slot(timeout=self.limiter_timeout):
                try:
                    return self._complete(prompt, max_tokens, self._api_key())
                except Exception as exc:
                    _raise_refusal(exc)
                    raise

        return call_with_retries(attempt, self._classify, self.policy)

    async def _acomplete_with_budget(self, prompt: str, state: _AsyncState) -> Completion:
        reply = await self._acomplete_retrying(prompt, self.config.max_tokens, state)
        if is_truncated(reply.stop_reason):
            reply = _with_retry_usage(
                reply,
                await self._acomplete_retrying(
                    prompt, self.config.max_tokens * TRUNCATION_BUDGET_FACTOR, state
                ),
            )
        return reply

    async def _acomplete_retrying(
        self, prompt: str, max_tokens: int, state: _AsyncState
    ) -> Completion:
        async def attempt() -> Completion:
            # The concurrency slot and RPM token are taken by the transport (judges.clients._SlotTransport),
            # around the HTTP exchange only; the SDK reports a LimiterTimeout raised there as
            # a connection error, which is unwrapped here so it is not retried as one.
            try:
                return await self._acomplete(state.client(self._api_key()), prompt, max_tokens)
            except Exception as exc:
                if isinstance(exc.__cause__, LimiterTimeout):
                    raise exc.__cause__ from None
                _raise_refusal(exc)
                raise

        return await acall_with_retries(attempt, self._classify, self.policy)

    def _async_state(self) -> _AsyncState:
        """Return the loop-side state (async HTTP pool, SDK client, local semaphore), built on
        first use on the running loop and again if the backend moves to another loop."""
        loop = asyncio.get_running_loop()
        if self._aio is None or self._aio.loop is not loop:
            self._aio = _AsyncState(
                loop=loop,
                http_client=self._async_http_client(
                    lambda: self.limiter.aslot(timeout=self.limiter_timeout)
                ),
                local_slots=asyncio.Semaphore(max(1, self.config.concurrency or 64)),
                factory=self._async_client,
            )
        return self._aio

    def _api_key(self) -> str:
        """Return the key for one call, after the endpoint checks (module docstring). Raises
        EndpointRefused for a refused key variable, URL or resolved address, and
        JudgeConfigError when the variable is not set."""
        self._check_endpoint()
        name = self.config.api_key_env or ""
        key = os.environ.get(name, "")
        if not key:
            raise JudgeConfigError(f"environment variable {name} is not set")
        return key

    def _check_endpoint(self) -> None:
        policy = self.endpoint_policy
        if policy is None:
            return
        policy.check_key_env(self.config.api_key_env)
        now = time.monotonic()
        checked = self._endpoint_checked_at
        if checked is not None and now - checked < RESOLVE_TTL_SECONDS:
            return
        policy.check_resolved(self.config.base_url)
        self._endpoint_checked_at = now

    def _classify(self, exc: BaseException) -> Failure | None:
        secret = os.environ.get(self.config.api_key_env or "", "")
        status_error, timeout_error, connection_error = self._sdk_errors()
        if isinstance(exc, status_error):
            status = int(exc.status_code)
            response = getattr(exc, "response", None)
            headers = getattr(response, "headers", None)
            if 300 <= status < 400:  # never followed, never retried (judges.egress)
                from .egress import redirect_message

                url = str(getattr(getattr(response, "request", None), "url", "") or "")
                location = headers.get("location") if headers is not None else None
                text = redirect_message(status, url or (self.config.base_url or ""), location)
                return Failure(
                    transient=False,
                    message=redact(f"{self.config.model}: {text}", secret),
                    status=status,
                )
            message = redact(f"HTTP {status} from {self.config.model}: {exc.message}", secret)
            return Failure(
                transient=is_transient_status(status),
                message=message,
                status=status,
                retry_after=parse_retry_after(headers),
            )
        if isinstance(exc, timeout_error):
            return Failure(transient=True, message=f"timeout calling {self.config.model}")
        if isinstance(exc, connection_error):
            return Failure(transient=True, message=f"connection error calling {self.config.model}")
        return None

    @abstractmethod
    def _sdk_errors(self) -> tuple[type[Exception], type[Exception], type[Exception]]:
        """Return the SDK's (APIStatusError, APITimeoutError, APIConnectionError)."""

    @abstractmethod
    def _complete(self, prompt: str, max_tokens: int, api_key: str) -> Completion:
        """Return one reply from the API; SDK errors propagate to _classify."""

    @abstractmethod
    def _async_http_client(self, slot: Callable[[], Any]) -> Any:
        """Return a new pooled async HTTP client for the SDK (aiohttp transport if installed)
        whose every request holds `slot()` (see _slotted_http_client)."""

    @abstractmethod
    def _async_client(self, api_key: str, http_client: Any) -> Any:
        """Return the SDK's async client for this key over `http_client`."""

    @abstractmethod
    async def _acomplete(self, client: Any, prompt: str, max_tokens: int) -> Completion:
        """Return one reply from the API through the async SDK client; SDK errors propagate."""


@dataclass
class _AsyncState:
    """A backend's state on the judge event loop: its async HTTP pool, the SDK client (kept
    while the key in the environment stays the same) and the per-process call semaphore."""

    loop: asyncio.AbstractEventLoop
    http_client: Any
    local_slots: asyncio.Semaphore
    factory: Callable[[str, Any], Any]
    _key: str | None = None
    _client: Any = None

    def client(self, api_key: str) -> Any:
        """Return the SDK client for `api_key`, building a new one when the key changed."""
        if self._client is None or api_key != self._key:
            self._client, self._key = self.factory(api_key, self.http_client), api_key
        return self._client


def _endpoint(client: Any, path: str) -> str:
    """Return the absolute URL of `path` (relative, e.g. "chat/completions") under the SDK
    client's base_url, for the backend to keep. The SDK accepts an absolute
    URL where it takes a path, and then parses it once instead of parsing the path and
    re-parsing the joined URL on every call (~20 us of a call's CPU). The SDK's base_url
    always ends in "/", so this is the URL it would build itself; a base_url with a query
    string keeps the SDK's own joining (the path is returned as given)."""
    base = client.base_url
    if base.query or base.fragment:
        return "/" + path
    return str(base.join(path))


def _raise_refusal(exc: BaseException) -> None:
    """Raise the EndpointRefused a connection was refused with (judges.egress) when `exc`,
    an SDK's connection error, wraps one: a refusal, not a failure worth retrying."""
    from .egress import refusal_in

    refused = refusal_in(exc)
    if refused is not None and refused is not exc:
        raise refused from None


def _as_coroutine(sleep: Callable[[float], None]) -> Callable[[float], Any]:
    """Wrap an injected sync sleep (tests) as the awaitable `asleep` the async path uses."""

    async def asleep(seconds: float) -> None:
        sleep(seconds)

    return asleep


# The openai SDK makes an idempotency key per request (a uuid4: ~5% of the worker's CPU per
# judge call in bench/README.md's profile) for a header its OpenAI clients never send (their
# _idempotency_header is None); a request that brings its own key, even an empty one, skips
# that. Our retries are our own (max_retries=0), each a request of its own in the ledger.
_NO_IDEMPOTENCY_KEY: dict[str, Any] = {"idempotency_key": ""}


class OpenAIBackend(ChatBackend):
    """Any OpenAI-compatible Chat Completions endpoint via the official `openai` SDK.

    Sends temperature (default 0) and, when json_mode (default true),
    response_format={"type": "json_object"}; the stop reason is finish_reason.
    """

    _chat_url: str | None = None

    def _sdk_errors(self) -> tuple[type[Exception], type[Exception], type[Exception]]:
        import openai

        return openai.APIStatusError, openai.APITimeoutError, openai.APIConnectionError

    def _client(self, api_key: str) -> Any:
        import openai

        from . import egress

        return openai.OpenAI(
            api_key=api_key,
            base_url=self.config.base_url,
            timeout=self.config.timeout,
            max_retries=0,
            http_client=self._pooled_http_client(
                lambda: egress.judge_http_client(openai.DefaultHttpxClient, self.endpoint_policy)
            ),
        )

    def _body(self, prompt: str, max_tokens: int) -> dict[str, Any]:
        """Return the Chat Completions request body for `prompt` (a str, or a JudgePrompt).

        OpenAI caches prompt prefixes of 1,024 tokens or more by itself, with no marker: the
        prompt goes as one message whose text begins with the JudgePrompt's shared prefix,
        byte for byte, so a question's responses share their cacheable part.
        """
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": "user", "content": str(prompt)}],
            self.config.max_tokens_param: max_tokens,
        }
        if self.config.temperature is not None:
            kwargs["temperature"] = self.config.temperature
        if self.config.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs

    def _complete(self, prompt: str, max_tokens: int, api_key: str) -> Completion:
        # The SDK's own POST (same client, errors, retries off) without
        # `chat.completions.create`'s per-call TypedDict transform of the request (the body is
        # already plain JSON; ~0.5 ms of CPU per call) and with the reply as plain JSON
        # (cast_to=object) rather than a pydantic ChatCompletion (~0.2 ms more): we read two fields.
        completion = self._client(api_key).post(
            "/chat/completions",
            body=self._body(prompt, max_tokens),
            cast_to=object,
            options=_NO_IDEMPOTENCY_KEY,
        )
        return self._completion(completion)

    def _async_http_client(self, slot: Callable[[], Any]) -> Any:
        import openai

        from . import direct

        policy = self.endpoint_policy
        sdk_http = slotted_http_client(openai, self.config.timeout, slot, policy)
        if not direct.available():
            return sdk_http
        return direct.DirectHttp(sdk_http, self.config.timeout, slot, default_tls_context(), policy)

    def _async_client(self, api_key: str, http_client: Any) -> Any:
        """Return the SDK's async client for `api_key`, or, over a direct.DirectHttp, a
        direct.DirectChat that sends the SDK client's requests itself (judges.direct:
        the SDK's per-request pipeline was most of a worker's CPU per judge call)."""
        import openai

        from . import direct

        over = http_client.sdk_http if isinstance(http_client, direct.DirectHttp) else http_client
        client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=self.config.base_url,
            timeout=self.config.timeout,
            max_retries=0,
            http_client=over,
        )
        if over is http_client or client.base_url.query or client.base_url.fragment:
            return client  # (a base_url with a query string: the SDK joins it with the path)
        return direct.DirectChat(client, _endpoint(client, "chat/completions"), http_client)

    async def _acomplete(self, client: Any, prompt: str, max_tokens: int) -> Completion:
        from . import direct

        if isinstance(client, direct.DirectChat):
            return self._completion(await client.post(self._body(prompt, max_tokens)))
        if self._chat_url is None:  # depends on base_url only, which a backend keeps
            self._chat_url = _endpoint(client, "chat/completions")
        completion = await client.post(
            self._chat_url,
            body=self._body(prompt, max_tokens),
            cast_to=object,
            options=_NO_IDEMPOTENCY_KEY,
        )
        return self._completion(completion)

    @staticmethod
    def _completion(completion: Any) -> Completion:
        """Return the text, finish_reason and usage (judges.types.openai_usage) of a
        Chat Completions reply (decoded JSON); a reply without choices, or not shaped like
        one, gives empty text (parsed as no grade)."""
        usage = openai_usage(completion.get("usage")) if isinstance(completion, dict) else None
        choices = completion.get("choices") if isinstance(completion, dict) else None
        choice = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(choice, dict):
            return Completion(text="", stop_reason=None, usage=usage)
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        reason = choice.get("finish_reason")
        return Completion(
            text=content if isinstance(content, str) else "",
            stop_reason=reason if isinstance(reason, str) else None,
            usage=usage,
        )


class AnthropicBackend(ChatBackend):
    """Anthropic's Messages API via the official `anthropic` SDK.

    The reply text is the concatenation of its text blocks; the stop reason is
    stop_reason ("end_turn", "max_tokens", "refusal", ...). A configured
    temperature is sent in the request body (the SDK no longer types it).
    """

    def _sdk_errors(self) -> tuple[type[Exception], type[Exception], type[Exception]]:
        import anthropic

        return anthropic.APIStatusError, anthropic.APITimeoutError, anthropic.APIConnectionError

    def _client(self, api_key: str) -> Any:
        import anthropic

        from . import egress

        kwargs: dict[str, Any] = {
            "api_key": api_key,
            "timeout": self.config.timeout,
            "max_retries": 0,
            "http_client": self._pooled_http_client(
                lambda: egress.judge_http_client(anthropic.DefaultHttpxClient, self.endpoint_policy)
            ),
        }
        if self.config.base_url:
            kwargs["base_url"] = self.config.base_url
        return anthropic.Anthropic(**kwargs)

    def _request(self, prompt: str, max_tokens: int) -> dict[str, Any]:
        """Return the messages.create arguments for `prompt` (a str, or a JudgePrompt).

        A JudgePrompt with a prefix is sent as two text blocks, the prefix marked
        `cache_control: {"type": "ephemeral"}` (Anthropic's 5-minute prompt cache): the
        first call of a question writes the prefix to the cache (cache_creation_input_tokens,
        billed at 1.25x the input price), later calls within 5 minutes read it
        (cache_read_input_tokens, ~0.1x). Anthropic caches only prefixes of at least a
        minimum length (1,024 tokens for Sonnet and Opus, 2,048 for Haiku, per model in its
        documentation); a shorter marked prefix is simply not cached: no error, no write,
        both cache counts 0. The model reads the blocks as one text, the same as a str.
        """
        extra_body = {}
        if self.config.temperature is not None:
            extra_body["temperature"] = self.config.temperature
        content: Any = str(prompt)
        if isinstance(prompt, JudgePrompt) and prompt.prefix:
            content = [
                {"type": "text", "text": prompt.prefix, "cache_control": {"type": "ephemeral"}}
            ]
            if prompt.suffix:  # the API refuses an empty text block
                content.append({"type": "text", "text": prompt.suffix})
        return {
            "model": self.config.model,
            "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": content}],
            "extra_body": extra_body or None,
        }

    def _complete(self, prompt: str, max_tokens: int, api_key: str) -> Completion:
        return self._completion(
            self._client(api_key).messages.create(**self._request(prompt, max_tokens))
        )

    def _async_http_client(self, slot: Callable[[], Any]) -> Any:
        import anthropic

        return slotted_http_client(anthropic, self.config.timeout, slot, self.endpoint_policy)

    def _async_client(self, api_key: str, http_client: Any) -> Any:
        import anthropic

        kwargs: dict[str, Any] = {
            "api_key": api_key,
            "timeout": self.config.timeout,
            "max_retries": 0,
            "http_client": http_client,
        }
        if self.config.base_url:
            kwargs["base_url"] = self.config.base_url
        return anthropic.AsyncAnthropic(**kwargs)

    async def _acomplete(self, client: Any, prompt: str, max_tokens: int) -> Completion:
        return self._completion(await client.messages.create(**self._request(prompt, max_tokens)))

    @staticmethod
    def _completion(message: Any) -> Completion:
        text = "".join(
            block.text for block in message.content if getattr(block, "type", "") == "text"
        )
        usage = anthropic_usage(getattr(message, "usage", None))
        return Completion(text=text, stop_reason=message.stop_reason, usage=usage)
