"""Plain inputs, results and errors shared by every judge backend (no Django)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Verdict = Literal["correct", "wrong", "ungradeable"]
VERDICTS: tuple[str, ...] = ("correct", "wrong", "ungradeable")
DEFAULT_SCALE: tuple[int, ...] = (0, 1, 2)

# Stop reasons that mean the reply was cut off by the token budget:
# OpenAI Chat Completions finish_reason "length", Anthropic stop_reason "max_tokens".
TRUNCATED_STOP_REASONS: frozenset[str] = frozenset({"length", "max_tokens"})


class JudgeError(Exception):
    """Base class of every error raised by `judges`."""


class JudgeConfigError(JudgeError):
    """Raise when a judge is misconfigured or the API refuses the request (4xx other than 429).

    Retrying cannot help; an admin must fix the configuration.
    """


class JudgeUnavailable(JudgeError):
    """Raise when the judge stayed unreachable (429/5xx/timeouts) after the retry cap.

    The caller marks the (response, judge) pair failed and may try again later.
    """


def validate_scale(scale: list[int] | tuple[int, ...]) -> list[int]:
    """Return the scale sorted ascending; raise ValueError unless it is distinct ints.

    Shape: a non-empty list of distinct ints, e.g. [0, 1, 2] or list(range(1, 11)).
    """
    values = list(scale)
    if not values:
        raise ValueError("scale must not be empty")
    if any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        raise ValueError(f"scale must hold ints, got {values!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"scale must not repeat a grade, got {values!r}")
    return sorted(values)


@dataclass(frozen=True)
class GradingInput:
    """What a judge sees to grade one response: never which model wrote it (methodology rule 1).

    citation_text: e.g. "Approved Document B Vol 1 (2019) Table 4.1: <quote>".
    scale: the grades allowed, default [0, 1, 2] (0 wrong, 1 partly right, 2 right).
    """

    question: str
    key_answer: str
    citation_text: str
    response: str
    scale: list[int] = field(default_factory=lambda: list(DEFAULT_SCALE))

    def __post_init__(self) -> None:
        validate_scale(self.scale)


@dataclass(frozen=True)
class AuditInput:
    """What an auditor sees to check one key entry: no response (methodology rule 4)."""

    question: str
    key_answer: str
    citation_text: str


@dataclass(frozen=True)
class Usage:
    """The tokens one judge call was billed for, as the vendor's API reported them.

    input_tokens: every prompt token, cached or not (OpenAI usage.prompt_tokens; Anthropic
    usage.input_tokens + cache_read_input_tokens + cache_creation_input_tokens, since
    Anthropic's input_tokens leaves out the cached part). output_tokens: OpenAI
    usage.completion_tokens, Anthropic usage.output_tokens. cached_tokens: the prompt
    tokens read from the vendor's prompt cache (OpenAI
    usage.prompt_tokens_details.cached_tokens, Anthropic cache_read_input_tokens).
    cache_write_tokens: prompt tokens written to the cache (Anthropic
    cache_creation_input_tokens; None for OpenAI, which reports none).
    Any field is None when the reply did not report it: unknown, never 0.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None

    def __add__(self, other: Usage) -> Usage:
        """Return the usage of both calls together (a cut-off reply asked again is paid
        twice); a field unknown on either side is unknown in the sum."""

        def both(a: int | None, b: int | None) -> int | None:
            return None if a is None or b is None else a + b

        return Usage(
            input_tokens=both(self.input_tokens, other.input_tokens),
            output_tokens=both(self.output_tokens, other.output_tokens),
            cached_tokens=both(self.cached_tokens, other.cached_tokens),
            cache_write_tokens=both(self.cache_write_tokens, other.cache_write_tokens),
        )


def _count(value: Any) -> int | None:
    """Return a reported token count as an int, or None when it is absent or not a
    non-negative integer (a vendor field we cannot trust is unknown, not 0)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def openai_usage(usage: Any) -> Usage | None:
    """Return the Usage of an OpenAI Chat Completions reply's `usage` (decoded JSON: a dict),
    or None when the reply carries none. cache_write_tokens is None (OpenAI reports none);
    cached_tokens is None when prompt_tokens_details is absent."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    return Usage(
        input_tokens=_count(usage.get("prompt_tokens")),
        output_tokens=_count(usage.get("completion_tokens")),
        cached_tokens=cached,
    )


def anthropic_usage(usage: Any) -> Usage | None:
    """Return the Usage of an Anthropic Messages reply's `usage` (the SDK's Usage object or a
    dict), or None when the reply carries none. input_tokens adds Anthropic's separately
    reported cache reads and writes to its input_tokens (absent cache fields count 0 there:
    Anthropic leaves them out, or null, when no cache was used)."""
    if usage is None:
        return None

    def field_of(name: str) -> Any:
        return usage.get(name) if isinstance(usage, dict) else getattr(usage, name, None)

    plain = _count(field_of("input_tokens"))
    read = _count(field_of("cache_read_input_tokens")) or 0
    write = _count(field_of("cache_creation_input_tokens")) or 0
    return Usage(
        input_tokens=None if plain is None else plain + read + write,
        output_tokens=_count(field_of("output_tokens")),
        cached_tokens=None if plain is None else read,
        cache_write_tokens=None if plain is None else write,
    )


@dataclass(frozen=True)
class GradeResult:
    """One judge's grade of one response.

    grade is None when the output could not be parsed (parse_error says why, e.g.
    "truncated", "refusal", "grade 3 is not on the scale [0, 1, 2]").
    flag: the judge thinks the key answer itself looks wrong or out of date (rule 3).
    raw_output: the judge's reply text exactly as received (never request headers or secrets),
    except that a NUL character (U+0000), which PostgreSQL text cannot hold, becomes U+FFFD
    (the Unicode replacement character) here as in every text field of a result.
    usage: the tokens the call(s) behind this result were billed for (Usage), None when the
    backend reports none (the offline reference judge, test doubles): unknown, not 0.
    """

    grade: int | None
    rationale: str
    flag: bool
    flag_reason: str
    raw_output: str
    stop_reason: str | None
    prompt_version: str
    parse_error: str | None = None
    usage: Usage | None = None

    def __post_init__(self) -> None:
        _replace_nul(self)


@dataclass(frozen=True)
class AuditResult:
    """One auditor's verdict on one key entry; verdict None when unparseable (see parse_error).
    Text fields hold no NUL character: it becomes U+FFFD, as in GradeResult."""

    verdict: Verdict | None
    rationale: str
    raw_output: str
    stop_reason: str | None
    prompt_version: str
    parse_error: str | None = None
    usage: Usage | None = None

    def __post_init__(self) -> None:
        _replace_nul(self)


def without_nul(text: str) -> str:
    """Return text with each NUL character (U+0000) replaced by U+FFFD, the Unicode
    replacement character: PostgreSQL text cannot hold NUL.

    What a judge sends back is untrusted text: a NUL in a reply (raw, or escaped in the JSON
    it returns) or in an error body would make PostgreSQL refuse the whole batch of rows it
    is written with, and the pair would be paid for again on every retry.
    """
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def _replace_nul(result: Any) -> None:
    """Apply without_nul to every str field of a frozen result dataclass."""
    for name in result.__dataclass_fields__:
        value = getattr(result, name)
        if isinstance(value, str):
            object.__setattr__(result, name, without_nul(value))
