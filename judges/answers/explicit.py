"""Explicitly marked answers: JSON answer fields, \\boxed{}, "the answer is" (judges.answers)."""

from __future__ import annotations

import json
import re

import json5

_NEXT_TURN_RE = re.compile(r"\n\s*#*\s*(?:Human|User)\s*:", re.IGNORECASE)
_JSON_KEYS = ("final_answer", "answer", "final answer", "finalanswer")
_JSON_FIELD_RE = re.compile(
    r"(?:\"(?:final[_ ]?answer|answer)\"|'(?:final[_ ]?answer|answer)')\s*:\s*(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^,}\n]+)",
    re.IGNORECASE,
)
_FENCE_RE = re.compile(r"```[\w+-]*\s*\n?(.*?)(?:```|$)", re.DOTALL)
_JSON_SHAPED_RE = re.compile(r"\s*(?:```\s*json\s*)?\{\s*[\"']\w+[\"']\s*:")
_ANSWER_WORD_RE = re.compile(r"answer", re.IGNORECASE)
_TAG_RE = re.compile(r"<(?:final[_ ]?)?answer>(.*?)</(?:final[_ ]?)?answer>", re.I | re.S)
_BOXED_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_MARKER_RE = re.compile(
    r"(?:final\s+answer(?:\s+is)?|the\s+(?:correct\s+)?answer\s+is|answer\s*(?:is)?[*\"]*\s*[:：])"
    r"\s*[:：]?\s*(.+)",
    re.IGNORECASE,
)


#: Longest block handed to json5 (pure Python, slow): strict JSON and the field pattern
#: are tried first and read nearly every object; json5 is for the rest (comments, keys
#: without quotes), short ones only.
JSON5_MAX_CHARS = 4000


def _json_answer(text: str) -> str | None:
    """Return the ``answer`` / ``final_answer`` of the last JSON object holding one, as text.

    Fenced blocks and a text that is itself an object are parsed with the stdlib json;
    failing that the field is found by pattern (single quotes, escaped quotes, objects cut
    short); failing that json5 parses blocks up to JSON5_MAX_CHARS.
    """
    blocks = [m.group(1).strip() for m in _FENCE_RE.finditer(text)]
    if text.lstrip().startswith("{"):
        blocks.append(text.strip())
    blocks = [b for b in blocks if b.startswith("{")]
    found = None
    for block in blocks:
        obj = _parse_object(block, json.loads)
        value = _field(obj) if isinstance(obj, dict) else None
        if value is not None:
            found = value
    if found is not None:
        return found
    hits = list(_JSON_FIELD_RE.finditer(text.replace('\\"', '"')))
    if hits:
        raw = hits[-1].group(1).strip()
        if raw[:1] in "\"'":
            try:
                return str(json.loads(raw)) if raw[0] == '"' else raw[1:-1].replace("\\'", "'")
            except ValueError:
                return raw.strip("\"'")
        return raw
    for block in blocks:
        if len(block) <= JSON5_MAX_CHARS:
            obj = _parse_object(block, json5.loads)
            value = _field(obj) if isinstance(obj, dict) else None
            if value is not None:
                found = value
    return found


def _parse_object(block: str, loads):
    end = block.rfind("}")
    if end < 0:
        return None
    try:
        return loads(block[: end + 1])
    except (ValueError, RecursionError, TypeError, IndexError):
        return None


def _field(obj: dict):
    lowered = {str(k).lower().strip(): v for k, v in obj.items()}
    for key in _JSON_KEYS:
        if key in lowered:
            value = lowered[key]
            if value is None:
                return ""
            if isinstance(value, str):
                return value
            return repr(value)
    return None


def _boxed(text: str) -> str | None:
    """Return the content of the last ``\\boxed{...}`` (braces balanced), or None."""
    starts = [m.end() for m in _BOXED_RE.finditer(text)]
    if not starts:
        return None
    start, depth = starts[-1], 1
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
    return None


def explicit_answers(text: str) -> list[tuple[str, str]]:
    """Return the explicitly marked answers of ``text`` as [(source, answer text)], best first.

    Sources: "json" (the last JSON object's ``answer``/``final_answer``), "tag" (the last
    ``<answer>...</answer>`` or ``<final_answer>...</final_answer>``), "boxed" (the last
    ``\\boxed{}``), "marker" (the last "final answer"/"the answer is"/"Answer:" phrase, to
    the end of its line). Empty when none is marked.
    """
    return list(_explicit(text))


def _explicit(text: str):
    """Yield explicit answers best first, each looked for only when the previous is not used."""
    text = _NEXT_TURN_RE.split(text or "", maxsplit=1)[0]
    found = (
        _json_answer(text) if ("answer" in text or "Answer" in text or "ANSWER" in text) else None
    )
    if found is not None:
        yield ("json", found)
    if "answer>" in text.lower():
        tagged = _TAG_RE.findall(text)
        if tagged:
            yield ("tag", tagged[-1].strip())
    if "boxed" in text or "fbox" in text:
        boxed = _boxed(text)
        if boxed is not None:
            yield ("boxed", boxed)
    markers = list(_MARKER_RE.finditer(text)) if _ANSWER_WORD_RE.search(text) else []
    if markers:
        value = markers[-1].group(1).strip()
        value = _boxed(value) or value
        yield ("marker", _unwrap(value))


def _unwrap(value: str) -> str:
    """Strip quotes, commas, a final full stop and braces left from a JSON line or a TeX
    group ('"15"', '{15},', '15.'); braces a TeX command needs ('\\frac{1}{2}') are kept."""
    value = value.strip().strip('"“”,').rstrip(".").strip().strip('"“”')
    while value[:1] == "{" and value.count("{") > value.count("}"):
        value = value[1:].strip()
    while value[-1:] in ("}", ",") and value.count("}") > value.count("{"):
        value = value[:-1].strip()
    if value[:1] == "{" and value[-1:] == "}" and "\\" not in value:
        value = value[1:-1].strip()
    return value.strip().strip('"“”')
