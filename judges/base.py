"""The judge backend interface and its validated configuration."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .prompts import RELEASED_SHA256
from .retry import DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY, DEFAULT_MAX_RETRIES
from .types import AuditInput, AuditResult, GradeResult, GradingInput, JudgeConfigError

BACKENDS = ("reference", "openai", "anthropic")
STRICTNESS = ("lenient", "strict")
DEFAULT_API_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
CONFIG_KEYS = frozenset(
    {
        "backend",
        "model",
        "base_url",
        "api_key_env",
        "temperature",
        "max_tokens",
        "max_tokens_param",
        "timeout",
        "strictness",
        "max_retries",
        "base_delay",
        "max_delay",
        "json_mode",
        "concurrency",
        "rpm",
        "prompt_version",
        "cache_min_tokens",
    }
)

# The fewest prompt tokens a vendor caches (the shared prefix must reach it): 1,024 for
# OpenAI ("Prompt caching", platform.openai.com/docs/guides/prompt-caching) and for
# Anthropic's Sonnet and Opus models; Anthropic's Haiku models need 2,048 ("Prompt caching",
# docs.anthropic.com/en/docs/build-with-claude/prompt-caching), set per judge.
DEFAULT_CACHE_MIN_TOKENS = 1024


@dataclass(frozen=True)
class JudgeConfig:
    """A judge's settings. Holds the NAME of the env var with the API key, never the key.

    temperature None means "do not send one" (the default for anthropic, whose
    current SDK no longer takes it as a typed parameter); openai defaults to 0.
    max_tokens_param: "max_tokens" or "max_completion_tokens" (newer OpenAI models).
    concurrency / rpm: limits for `limiter_for` (None = unlimited); backends ignore them.
    prompt_version: the released template the model backends render (e.g. "judge-v2"; a
    key of judges.prompts.RELEASED_SHA256); None = the role's default
    (JUDGE_PROMPT_VERSION / AUDITOR_PROMPT_VERSION). The reference judge ignores it.
    cache_min_tokens: the fewest prompt tokens the vendor's prompt cache takes (a positive
    int; DEFAULT_CACHE_MIN_TOKENS = 1,024, OpenAI's and Anthropic Sonnet/Opus's documented
    minimum; Anthropic Haiku's is 2,048): what scoring.runs.estimate predicts the cache from
    before a judge has calls at its prompt version. The reference judge caches nothing.
    """

    backend: str
    model: str = ""
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: float | None = None
    max_tokens: int = 1024
    max_tokens_param: str = "max_tokens"
    timeout: float = 60.0
    strictness: str = "lenient"
    max_retries: int = DEFAULT_MAX_RETRIES
    base_delay: float = DEFAULT_BASE_DELAY
    max_delay: float = DEFAULT_MAX_DELAY
    json_mode: bool = True
    concurrency: int | None = None
    rpm: int | None = None
    prompt_version: str | None = None
    cache_min_tokens: int = DEFAULT_CACHE_MIN_TOKENS

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> JudgeConfig:
        """Return a validated config; raise JudgeConfigError naming the bad key.

        Unknown keys are refused so a typo ("max_token") cannot be silently ignored.
        """
        if not isinstance(config, Mapping):
            raise JudgeConfigError("judge config must be a mapping")
        unknown = sorted(set(config) - CONFIG_KEYS)
        if unknown:
            raise JudgeConfigError(f"unknown judge config keys: {', '.join(unknown)}")
        backend = config.get("backend")
        if backend not in BACKENDS:
            raise JudgeConfigError(f"backend must be one of {BACKENDS}, got {backend!r}")
        values: dict[str, Any] = {"backend": backend}

        model = config.get("model") or ""
        if not isinstance(model, str):
            raise JudgeConfigError("model must be a string")
        if backend != "reference" and not model:
            raise JudgeConfigError(f"model is required for backend {backend!r}")
        values["model"] = model

        for key in ("base_url", "api_key_env"):
            value = config.get(key)
            if value is not None and not isinstance(value, str):
                raise JudgeConfigError(f"{key} must be a string")
            values[key] = value or None
        if backend != "reference" and values["api_key_env"] is None:
            values["api_key_env"] = DEFAULT_API_KEY_ENV[backend]

        temperature = config.get("temperature", 0.0 if backend == "openai" else None)
        if temperature is not None:
            temperature = _number(config, "temperature", temperature, low=0.0, high=2.0)
        values["temperature"] = temperature

        for key, default, low in (
            ("max_tokens", 1024, 1),
            ("max_retries", DEFAULT_MAX_RETRIES, 0),
            ("cache_min_tokens", DEFAULT_CACHE_MIN_TOKENS, 1),
        ):
            value = config.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise JudgeConfigError(f"{key} must be an integer >= {low}, got {value!r}")
            values[key] = value
        for key, default in (
            ("timeout", 60.0),
            ("base_delay", DEFAULT_BASE_DELAY),
            ("max_delay", DEFAULT_MAX_DELAY),
        ):
            values[key] = _number(config, key, config.get(key, default), low=0.0)

        param = config.get("max_tokens_param", "max_tokens")
        if param not in ("max_tokens", "max_completion_tokens"):
            raise JudgeConfigError("max_tokens_param must be max_tokens or max_completion_tokens")
        values["max_tokens_param"] = param

        strictness = config.get("strictness", "lenient")
        if strictness not in STRICTNESS:
            raise JudgeConfigError(f"strictness must be one of {STRICTNESS}, got {strictness!r}")
        values["strictness"] = strictness

        for key in ("concurrency", "rpm"):
            value = config.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise JudgeConfigError(f"{key} must be a positive integer or null, got {value!r}")
            values[key] = value

        json_mode = config.get("json_mode", True)
        if not isinstance(json_mode, bool):
            raise JudgeConfigError("json_mode must be true or false")
        values["json_mode"] = json_mode

        version = config.get("prompt_version")
        if version is not None and version not in RELEASED_SHA256:
            raise JudgeConfigError(
                f"prompt_version must be a released prompt ({', '.join(sorted(RELEASED_SHA256))}),"
                f" got {version!r}"
            )
        values["prompt_version"] = version
        return cls(**values)


def _number(
    config: Mapping[str, Any], key: str, value: Any, *, low: float, high: float = math.inf
) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (low <= value <= high):
        raise JudgeConfigError(f"{key} must be a number in [{low}, {high}], got {value!r}")
    return float(value)


class JudgeBackend(ABC):
    """Grade responses and audit key entries; one instance per configured judge.

    Implementations never raise for an unparseable reply (grade/verdict None and
    parse_error set instead). They raise JudgeConfigError for a configuration
    the API refuses and JudgeUnavailable when the API stays down past the retry cap.
    """

    config: JudgeConfig

    @abstractmethod
    def grade(self, inp: GradingInput) -> GradeResult:
        """Return this judge's grade of one response against the key entry."""

    @abstractmethod
    def audit(self, inp: AuditInput) -> AuditResult:
        """Return this auditor's verdict on one key entry."""
