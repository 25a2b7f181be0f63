"""Judge backends that call a hosted model through the official openai / anthropic SDKs.

The API key is read from os.environ[config.api_key_env] at each call and handed
straight to a short-lived SDK client (cheap: it wraps the backend's pooled httpx client,
which is built once per backend and shared by threads); it is never stored on the backend, logged,
or put into raw_output or exception text (exception text is redacted, and
raised errors carry no chained SDK exception).
"""

from __future__ import annotations

import os
import random
import threading
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .base import JudgeBackend, JudgeConfig
from .limits import NullLimiter
from .parsing import is_truncated, parse_grade, parse_verdict
from .prompts import (
    AUDITOR_PROMPT_VERSION,
    JUDGE_PROMPT_VERSION,
    render_auditor_prompt,
    render_judge_prompt,
)
from .retry import (
    Failure,
    RetryPolicy,
    call_with_retries,
    is_transient_status,
    parse_retry_after,
    redact,
)
from .types import AuditInput, AuditResult, GradeResult, GradingInput, JudgeConfigError

# A cut-off reply is retried once with this many times the token budget (brief: x2).
TRUNCATION_BUDGET_FACTOR = 2


@dataclass(frozen=True)
class Completion:
    """One model reply: its text and the API's stop reason."""

    text: str
    stop_reason: str | None


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
    ) -> None:
        self.config = config
        self.limiter_timeout = limiter_timeout
        self._http_client = http_client
        self._owns_http_client = http_client is None
        self._http_lock = threading.Lock()
        self.policy = RetryPolicy(
            max_retries=config.max_retries,
            base_delay=config.base_delay,
            max_delay=config.max_delay,
        )
        if sleep is not None:
            self.policy.sleep = sleep
        if rng is not None:
            self.policy.rng = rng
        self.limiter = limiter or NullLimiter()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.config.model!r}, base_url={self.config.base_url!r})"
        )

    def close(self) -> None:
        """Close the pooled HTTP client if this backend created it (an injected one is left open)."""
        if self._owns_http_client and self._http_client is not None:
            self._http_client.close()
            self._http_client = None

    def _pooled_http_client(self, factory: Callable[[], Any]) -> Any:
        """Return the backend's httpx client (one connection pool), built once, thread-safely."""
        if self._http_client is None:
            with self._http_lock:
                if self._http_client is None:
                    self._http_client = factory()
        return self._http_client

    def grade(self, inp: GradingInput) -> GradeResult:
        """Return the model's grade; grade None with parse_error when its reply is unusable."""
        reply = self._complete_with_budget(render_judge_prompt(inp))
        grade, fields, error = parse_grade(reply.text, inp.scale, stop_reason=reply.stop_reason)
        return GradeResult(
            grade=grade,
            rationale=fields["rationale"],
            flag=fields["flag"],
            flag_reason=fields["flag_reason"],
            raw_output=reply.text,
            stop_reason=reply.stop_reason,
            prompt_version=JUDGE_PROMPT_VERSION,
            parse_error=error,
        )

    def audit(self, inp: AuditInput) -> AuditResult:
        """Return the model's verdict; verdict None with parse_error when its reply is unusable."""
        reply = self._complete_with_budget(render_auditor_prompt(inp))
        verdict, fields, error = parse_verdict(reply.text, stop_reason=reply.stop_reason)
        return AuditResult(
            verdict=verdict,  # type: ignore[arg-type]
            rationale=fields["rationale"],
            raw_output=reply.text,
            stop_reason=reply.stop_reason,
            prompt_version=AUDITOR_PROMPT_VERSION,
            parse_error=error,
        )

    def _complete_with_budget(self, prompt: str) -> Completion:
        reply = self._complete_retrying(prompt, self.config.max_tokens)
        if is_truncated(reply.stop_reason):
            reply = self._complete_retrying(
                prompt, self.config.max_tokens * TRUNCATION_BUDGET_FACTOR
            )
        return reply

    def _complete_retrying(self, prompt: str, max_tokens: int) -> Completion:
        def attempt() -> Completion:
            # Each attempt, retries included, takes a concurrency slot and an RPM token.
            with self.limiter.slot(timeout=self.limiter_timeout):
                return self._complete(prompt, max_tokens, self._api_key())

        return call_with_retries(attempt, self._classify, self.policy)

    def _api_key(self) -> str:
        name = self.config.api_key_env or ""
        key = os.environ.get(name, "")
        if not key:
            raise JudgeConfigError(f"environment variable {name} is not set")
        return key

    def _classify(self, exc: BaseException) -> Failure | None:
        secret = os.environ.get(self.config.api_key_env or "", "")
        status_error, timeout_error, connection_error = self._sdk_errors()
        if isinstance(exc, status_error):
            status = int(exc.status_code)
            message = redact(f"HTTP {status} from {self.config.model}: {exc.message}", secret)
            headers = getattr(getattr(exc, "response", None), "headers", None)
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


class OpenAIBackend(ChatBackend):
    """Any OpenAI-compatible Chat Completions endpoint via the official `openai` SDK.

    Sends temperature (default 0) and, when json_mode (default true),
    response_format={"type": "json_object"}; the stop reason is finish_reason.
    """

    def _sdk_errors(self) -> tuple[type[Exception], type[Exception], type[Exception]]:
        import openai

        return openai.APIStatusError, openai.APITimeoutError, openai.APIConnectionError

    def _client(self, api_key: str) -> Any:
        import openai

        return openai.OpenAI(
            api_key=api_key,
            base_url=self.config.base_url,
            timeout=self.config.timeout,
            max_retries=0,
            http_client=self._pooled_http_client(openai.DefaultHttpxClient),
        )

    def _complete(self, prompt: str, max_tokens: int, api_key: str) -> Completion:
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": "user", "content": prompt}],
            self.config.max_tokens_param: max_tokens,
        }
        if self.config.temperature is not None:
            kwargs["temperature"] = self.config.temperature
        if self.config.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        # The SDK's own POST (same client, errors, retries off, typed ChatCompletion reply)
        # without `chat.completions.create`'s per-call TypedDict transform of the request:
        # the body is already plain JSON, and the transform cost ~0.5 ms of CPU per call.
        completion = self._client(api_key).post(
            "/chat/completions", body=kwargs, cast_to=_chat_completion_type()
        )
        if not completion.choices:
            return Completion(text="", stop_reason=None)
        choice = completion.choices[0]
        return Completion(text=choice.message.content or "", stop_reason=choice.finish_reason)


def _chat_completion_type() -> type:
    from openai.types.chat import ChatCompletion

    return ChatCompletion


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

        kwargs: dict[str, Any] = {
            "api_key": api_key,
            "timeout": self.config.timeout,
            "max_retries": 0,
            "http_client": self._pooled_http_client(anthropic.DefaultHttpxClient),
        }
        if self.config.base_url:
            kwargs["base_url"] = self.config.base_url
        return anthropic.Anthropic(**kwargs)

    def _complete(self, prompt: str, max_tokens: int, api_key: str) -> Completion:
        extra_body = {}
        if self.config.temperature is not None:
            extra_body["temperature"] = self.config.temperature
        message = self._client(api_key).messages.create(
            model=self.config.model,
            max_tokens=max_tokens,
            messages=[{"role": "user", "content": prompt}],
            extra_body=extra_body or None,
        )
        text = "".join(
            block.text for block in message.content if getattr(block, "type", "") == "text"
        )
        return Completion(text=text, stop_reason=message.stop_reason)
