"""Judge and auditor backends: plain inputs in, plain results out, no Django.

    backend = get_backend({"backend": "openai", "model": "gpt-4.1", "api_key_env": "OPENAI_API_KEY"})
    result = backend.grade(GradingInput(question, key_answer, citation_text, response, [0, 1, 2]))
    verdict = backend.audit(AuditInput(question, key_answer, citation_text))

Errors: JudgeConfigError (bad config, missing key env var, HTTP 4xx other than
408/429: do not retry), JudgeUnavailable (still failing after the retry cap:
mark the pair failed), LimiterTimeout (a JudgeUnavailable: no rate-limit slot in time).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from .base import CONFIG_KEYS, DEFAULT_CACHE_MIN_TOKENS, JudgeBackend, JudgeConfig
from .endpoint import EndpointPolicy, EndpointRefused
from .limits import LimiterTimeout, NullLimiter, RedisLimiter, get_limiter
from .llm import AnthropicBackend, ChatBackend, OpenAIBackend
from .parsing import is_truncated, parse_grade, parse_verdict
from .prompts import (
    AUDITOR_PROMPT_VERSION,
    JUDGE_PROMPT_VERSION,
    render_auditor_prompt,
    render_judge_prompt,
)
from .reference import REFERENCE_AUDITOR_VERSION, REFERENCE_JUDGE_VERSION, ReferenceBackend
from .types import (
    AuditInput,
    AuditResult,
    GradeResult,
    GradingInput,
    JudgeConfigError,
    JudgeError,
    JudgeUnavailable,
    Usage,
)


def get_backend(
    config: Mapping[str, Any] | JudgeConfig,
    *,
    http_client: Any | None = None,
    sleep: Callable[[float], None] | None = None,
    rng: random.Random | None = None,
    limiter: Any | None = None,
    endpoint_policy: EndpointPolicy | None = None,
) -> JudgeBackend:
    """Return the backend a judge config names ("reference", "openai" or "anthropic").

    config keys: see JudgeConfig / CONFIG_KEYS. http_client (an httpx-style client
    the SDK accepts), sleep, rng and limiter are for the model backends: tests
    inject a mock transport, a no-op sleep and a seeded random source. endpoint_policy
    (judges.endpoint.EndpointPolicy) is checked before every call of a model
    backend; None checks nothing (the Django side always passes one).
    Raises JudgeConfigError for an invalid config.
    """
    cfg = config if isinstance(config, JudgeConfig) else JudgeConfig.from_dict(config)
    if cfg.backend == "reference":
        return ReferenceBackend(cfg)
    cls = OpenAIBackend if cfg.backend == "openai" else AnthropicBackend
    return cls(
        cfg,
        http_client=http_client,
        sleep=sleep,
        rng=rng,
        limiter=limiter,
        endpoint_policy=endpoint_policy,
    )


def limiter_for(
    config: Mapping[str, Any] | JudgeConfig, redis_client: Any | None, judge_key: str, **kwargs: Any
) -> RedisLimiter | NullLimiter:
    """Return the limiter for a judge config's `concurrency` and `rpm` (NullLimiter without Redis).

    judge_key names the judge across workers (e.g. "<benchmark>:<judge_id>").
    kwargs go to RedisLimiter (lease_seconds, window_seconds, prefix, ...).
    """
    cfg = config if isinstance(config, JudgeConfig) else JudgeConfig.from_dict(config)
    return get_limiter(
        redis_client, judge_key, max_concurrency=cfg.concurrency, rpm=cfg.rpm, **kwargs
    )


__all__ = [
    "EndpointPolicy",
    "EndpointRefused",
    "AUDITOR_PROMPT_VERSION",
    "CONFIG_KEYS",
    "DEFAULT_CACHE_MIN_TOKENS",
    "JUDGE_PROMPT_VERSION",
    "REFERENCE_AUDITOR_VERSION",
    "REFERENCE_JUDGE_VERSION",
    "AnthropicBackend",
    "AuditInput",
    "AuditResult",
    "ChatBackend",
    "GradeResult",
    "GradingInput",
    "JudgeBackend",
    "JudgeConfig",
    "JudgeConfigError",
    "JudgeError",
    "JudgeUnavailable",
    "LimiterTimeout",
    "NullLimiter",
    "OpenAIBackend",
    "RedisLimiter",
    "ReferenceBackend",
    "Usage",
    "get_backend",
    "get_limiter",
    "limiter_for",
    "is_truncated",
    "parse_grade",
    "parse_verdict",
    "render_auditor_prompt",
    "render_judge_prompt",
]
