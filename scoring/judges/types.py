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
    """Base class of every error raised by `scoring.judges`."""


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
class GradeResult:
    """One judge's grade of one response.

    grade is None when the output could not be parsed (parse_error says why, e.g.
    "truncated", "refusal", "grade 3 is not on the scale [0, 1, 2]").
    flag: the judge thinks the key answer itself looks wrong or out of date (rule 3).
    raw_output: the judge's reply text exactly as received (never request headers or secrets),
    except that a NUL character (U+0000), which PostgreSQL text cannot hold, becomes U+FFFD
    (the Unicode replacement character) here as in every text field of a result.
    """

    grade: int | None
    rationale: str
    flag: bool
    flag_reason: str
    raw_output: str
    stop_reason: str | None
    prompt_version: str
    parse_error: str | None = None

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
