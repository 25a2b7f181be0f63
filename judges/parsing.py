"""Parse a judge's or an auditor's reply text into a grade or a verdict.

Accepted, in order of authority:
1. JSON objects, bare or inside ```json fences: {"grade": 2, ...} / {"verdict": "correct", ...}.
   When any JSON object carries a grade, only JSON objects are read.
2. Labelled text: "Grade: 2", "Final grade: **1**", "Score: 7/10", "Verdict: wrong".
   When a label says "final" ("Final grade: 1"), only such labels are read: the judge's
   conclusion, not the grades it considered ("a score of 2 requires ...") on the way.
3. A fraction over the scale's top grade: "2/2", "7/10" (denominator must equal max(scale)).
4. A bold bare number on the scale: "**2**"; a reply that is only a number: "2".
Everything else is refused with a reason (grade None): empty replies, refusals,
numbers off the scale ("-1" is minus one, never 1), non-integers (".2") and two different
grades in one reply. Invisible format characters (Unicode category Cf: zero-width space,
word joiner, byte-order mark ...) are ignored in text, so "GRADE:\u200b2" reads as 2.
A reply cut off by the token budget (stop reason "length" / "max_tokens") is
refused as "truncated" whatever it contains.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from .types import TRUNCATED_STOP_REASONS, VERDICTS, validate_scale

Fields = dict[str, Any]

# ".2" is a number too (and not an integer), so its "2" is never read as a grade.
_NUMBER = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)"
_LABELLED_GRADE = re.compile(
    r"\b(?P<final>final\s+)?(?:grade|score|rating|mark)\b[\s*_\"']*(?:is|of|=|:|-|—)?[\s*_\"']*"
    rf"(?P<value>{_NUMBER})(?:[\s*_]*(?:/|out\s+of)\s*(?P<out_of>\d+))?",
    re.IGNORECASE,
)
_FRACTION = re.compile(rf"(?<![\d/.])({_NUMBER})\s*/\s*(\d+)(?![\d/])")
_BOLD_NUMBER = re.compile(rf"(?:\*\*|__)\s*({_NUMBER})\s*(?:\*\*|__)")
# Lazy \W*?: the sign belongs to the number ("-1", "**-1**"), not to the surrounding marks.
_ONLY_NUMBER = re.compile(rf"^\W*?({_NUMBER})\W*$")
_REFUSAL = re.compile(
    r"\b(?:I\s+(?:cannot|can't|can\s*not|am\s+unable|'m\s+unable|won't|will\s+not|am\s+not\s+able)"
    r"|unable\s+to\s+(?:grade|assess|evaluate|determine)|as\s+an\s+ai\b|I\s+(?:do\s+not|don't)\s+know)",
    re.IGNORECASE,
)
_VERDICT_WORD = r"(correct|incorrect|wrong|ungradeable|ungradable|not\s+gradeable|not\s+gradable)"
_LABELLED_VERDICT = re.compile(
    rf"\bverdict\b[\s*_\"']*(?:is|=|:|-|—)?[\s*_\"']*{_VERDICT_WORD}\b", re.IGNORECASE
)
_BOLD_VERDICT = re.compile(rf"(?:\*\*|__)\s*{_VERDICT_WORD}\s*(?:\*\*|__)", re.IGNORECASE)
_ONLY_VERDICT = re.compile(rf"^\W*{_VERDICT_WORD}\W*$", re.IGNORECASE)

_MAX_RATIONALE = 4000


def is_truncated(stop_reason: str | None) -> bool:
    """Return True when a stop reason means the reply was cut off by the token budget."""
    return (stop_reason or "").lower() in TRUNCATED_STOP_REASONS


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Return every JSON object found in the text, in order, fenced or bare.

    The whole text is scanned, not the insides of ``` fences: a fence inside a JSON string
    ("uses ```6.3.1.2```") would otherwise cut the object in two.
    """
    found: list[dict[str, Any]] = []
    decoder = json.JSONDecoder()
    i = 0
    while True:
        start = text.find("{", i)
        if start < 0:
            break
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            i = start + 1
            continue
        if isinstance(obj, dict):
            found.append(obj)
        i = end
    return found


def _without_format_characters(text: str) -> str:
    """Remove Unicode format characters (category Cf), which are invisible in a reply."""
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def _as_int(value: Any) -> tuple[int | None, str | None]:
    """Return (int, None) for 2, 2.0 or "2"; (None, reason) for anything else."""
    if isinstance(value, bool) or value is None:
        return None, f"grade {value!r} is not an integer"
    if isinstance(value, int):
        return value, None
    if isinstance(value, float):
        return (
            (int(value), None) if value.is_integer() else (None, f"grade {value} is not an integer")
        )
    if isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d+(?:\.0+)?\s*", value):
        return int(float(value)), None
    return None, f"grade {value!r} is not an integer"


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"true", "yes", "1"}
    return bool(value)


def _text_fields(text: str) -> Fields:
    return {"rationale": text.strip()[:_MAX_RATIONALE], "flag": False, "flag_reason": ""}


def _json_fields(obj: dict[str, Any]) -> Fields:
    reason = obj.get("flag_reason") or ""
    return {
        "rationale": str(obj.get("rationale") or obj.get("reason") or "")[:_MAX_RATIONALE],
        "flag": _as_bool(obj.get("flag", False)),
        "flag_reason": str(reason)[:_MAX_RATIONALE],
    }


def _decide(candidates: list[int], scale: list[int]) -> tuple[int | None, str | None]:
    distinct = sorted(set(candidates))
    if len(distinct) > 1:
        return None, f"conflicting grades {distinct}"
    grade = distinct[0]
    if grade not in scale:
        return None, f"grade {grade} is not on the scale {scale}"
    return grade, None


def parse_grade(
    text: str | None, scale: list[int], *, stop_reason: str | None = None
) -> tuple[int | None, Fields, str | None]:
    """Return (grade, fields, error) from a judge's reply.

    fields: {"rationale": str, "flag": bool, "flag_reason": str}.
    grade is None exactly when error is a reason string ("empty", "truncated",
    "refusal", "no grade found", "conflicting grades [1, 2]", "grade 3 is not on
    the scale [0, 1, 2]", ...). Raises ValueError only for an invalid scale.
    """
    ordered = validate_scale(scale)
    text = text or ""
    fields = _text_fields(text)
    if is_truncated(stop_reason):
        return None, fields, "truncated"
    if not text.strip():
        return None, fields, "empty"

    objects = _json_objects(text)
    graded = [o for o in objects if any(k in o for k in ("grade", "score"))]
    if graded:
        candidates: list[int] = []
        for obj in graded:
            value, error = _as_int(obj.get("grade", obj.get("score")))
            if error:
                return None, _json_fields(obj), error
            candidates.append(value)  # type: ignore[arg-type]
        grade, error = _decide(candidates, ordered)
        return grade, _json_fields(graded[0]), error
    if objects:
        fields = _json_fields(objects[0]) | {"rationale": fields["rationale"]}

    text = _without_format_characters(text)
    top = ordered[-1]
    candidates = []
    labelled = list(_LABELLED_GRADE.finditer(text))
    final = [m for m in labelled if m.group("final")]
    for match in final or labelled:
        value, error = _as_int(match.group("value"))
        if error:
            return None, fields, error
        if match.group("out_of") is not None and int(match.group("out_of")) != top:
            return None, fields, f"grade {match.group(0).strip()!r} is not out of {top}"
        candidates.append(value)  # type: ignore[arg-type]
    if final:  # the judge's stated conclusion; other numbers are its working
        grade, error = _decide(candidates, ordered)
        return grade, fields, error
    for match in _FRACTION.finditer(text):
        if int(match.group(2)) == top:
            value, error = _as_int(match.group(1))
            if error:
                return None, fields, error
            candidates.append(value)  # type: ignore[arg-type]
    for match in _BOLD_NUMBER.finditer(text):
        value, _ = _as_int(match.group(1))
        # Bold numbers off the scale are figures being quoted ("**1100** mm"), not grades.
        if value is not None and value in ordered:
            candidates.append(value)
    only = _ONLY_NUMBER.match(text.strip())
    if only:
        value, error = _as_int(only.group(1))
        if error:
            return None, fields, error
        candidates.append(value)  # type: ignore[arg-type]

    if not candidates:
        return None, fields, "refusal" if _REFUSAL.search(text) else "no grade found"
    grade, error = _decide(candidates, ordered)
    return grade, fields, error


def _normalise_verdict(word: str) -> str | None:
    word = re.sub(r"\s+", " ", word.strip().lower())
    if word in {"correct"}:
        return "correct"
    if word in {"wrong", "incorrect"}:
        return "wrong"
    if word in {"ungradeable", "ungradable", "not gradeable", "not gradable"}:
        return "ungradeable"
    return None


def parse_verdict(
    text: str | None, *, stop_reason: str | None = None
) -> tuple[str | None, Fields, str | None]:
    """Return (verdict, fields, error) from an auditor's reply.

    verdict is "correct", "wrong" or "ungradeable" ("incorrect" reads as "wrong");
    fields: {"rationale": str}. Refusals, empty or cut-off replies, unknown words
    and two different verdicts give (None, fields, reason).
    """
    text = text or ""
    fields: Fields = {"rationale": text.strip()[:_MAX_RATIONALE]}
    if is_truncated(stop_reason):
        return None, fields, "truncated"
    if not text.strip():
        return None, fields, "empty"

    objects = [o for o in _json_objects(text) if "verdict" in o]
    if objects:
        verdicts: list[str] = []
        for obj in objects:
            raw = obj.get("verdict")
            verdict = _normalise_verdict(raw) if isinstance(raw, str) else None
            if verdict is None:
                return (
                    None,
                    {"rationale": str(obj.get("rationale") or "")},
                    f"unknown verdict {raw!r}",
                )
            verdicts.append(verdict)
        fields = {"rationale": str(objects[0].get("rationale") or "")[:_MAX_RATIONALE]}
        distinct = sorted(set(verdicts), key=VERDICTS.index)
        if len(distinct) > 1:
            return None, fields, f"conflicting verdicts {distinct}"
        return distinct[0], fields, None

    found: list[str] = []
    for pattern in (_LABELLED_VERDICT, _BOLD_VERDICT):
        found += [v for m in pattern.finditer(text) if (v := _normalise_verdict(m.group(1)))]
    only = _ONLY_VERDICT.match(text.strip())
    if only and (v := _normalise_verdict(only.group(1))):
        found.append(v)
    if not found:
        return None, fields, "refusal" if _REFUSAL.search(text) else "no verdict found"
    distinct = sorted(set(found), key=VERDICTS.index)
    if len(distinct) > 1:
        return None, fields, f"conflicting verdicts {distinct}"
    return distinct[0], fields, None
