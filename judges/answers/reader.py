"""final_answer and read_key_and_responses: where an answer is looked for (judges.answers)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from ..figures import extract_locators, is_yes_no_question, polarity
from .choices import _choice, question_options
from .counts import asked_count, read_count
from .explicit import _JSON_SHAPED_RE, _NEXT_TURN_RE, _explicit
from .kinds import Answer, unread
from .literals import _is_number, _literal, _literal_answer, _literal_value
from .numeric import _number

_CODE_RE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_LIST_MARKER_RE = re.compile(r"(?m)^[ \t]*(?:\d{1,2}[.)]|[-*\u2022])[ \t]+")
_CONCLUSION_RE = re.compile(
    r"\b(?:therefore|thus|hence|so|answer|in conclusion|in summary|finally|overall)\b",
    re.IGNORECASE,
)
_NAME_RE = re.compile(r"\b([A-Z][a-zA-Z]+)\b")
_SENTENCE_START_RE = re.compile(r"(?:^|[.!?:]\s+|\n\s*(?:[*\-]\s*)?)$")


@lru_cache(maxsize=4096)
def _question_names(question: str) -> frozenset[str]:
    """Return the capitalised words of the question that do not merely open a sentence."""
    return frozenset(
        m.group(1)
        for m in _NAME_RE.finditer(question)
        if not _SENTENCE_START_RE.search(question[: m.start()])
    )


@lru_cache(maxsize=4096)
def _name_patterns(question: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((n, re.compile(rf"\b{n}\b")) for n in sorted(_question_names(question)))


def _in_sentence(
    sentence: str,
    kind: str,
    question: str,
    unit: str | None = None,
    *,
    whole: bool = False,
    strict: bool = False,
    key_is_str: bool = False,
) -> Answer | None:
    if kind == "choice":
        return _choice(sentence, question, whole)
    if kind == "literal":
        return _literal(sentence, key_is_str, whole)
    if kind == "true_false":
        return _true_false(sentence, whole)
    if kind == "yes_no":
        pol = polarity(sentence, infer=False)
        return Answer("yes_no", pol, pol.capitalize()) if pol else None
    if kind == "count":
        return read_count(sentence, question, whole=whole and not strict)
    if kind == "number":
        return _number(sentence, question, unit, strict)
    if kind == "locator":
        locs = extract_locators(sentence)
        return Answer("locator", locs[0].label().lower(), locs[0].label()) if locs else None
    if kind == "name":
        names = {n for n, pattern in _name_patterns(question) if pattern.search(sentence)}
        return Answer("name", next(iter(names)), next(iter(names))) if len(names) == 1 else None
    raise ValueError(f"unknown answer kind {kind!r}")


#: A question asking true or false: "True or false: ...", "... (true/false)", "T/F".
_TRUE_FALSE_QUESTION_RE = re.compile(
    r"\btrue\s+or\s+false\b|\btrue\s*/\s*false\b|\bT\s*/\s*F\b|"
    r"\b(?:is|are)\s+(?:this|the\s+following|these|the)\s+(?:statements?\s+)?(?:true|false)\b",
    re.I,
)
_TF_WHOLE_RE = re.compile(r"^\W*(true|false|t|f)\W*$", re.I)
_TF_SENTENCE_RE = re.compile(
    r"^\W*(true|false)\b|\b(?:is|are|was|answer(?:\s+is)?[:\s]*|statement\s+is)\s*\**\s*"
    r"(not\s+)?(true|false|correct|incorrect)\b",
    re.I,
)


def _true_false(text: str, whole: bool) -> Answer | None:
    """Read True/False: a whole "True"/"F", an opening "False,", or "is (not) true/false"."""
    m = _TF_WHOLE_RE.match(text) if whole else None
    if m:
        value = m.group(1).lower().startswith("t")
    else:
        hits = list(_TF_SENTENCE_RE.finditer(text))
        if not hits:
            return None
        h = hits[-1]
        word = (h.group(1) or h.group(3)).lower()
        value = word in ("true", "correct")
        if h.group(2):
            value = not value
    label = "True" if value else "False"
    return Answer("true_false", label.lower(), label)


KINDS = ("choice", "literal", "true_false", "yes_no", "count", "number", "locator", "name")


def answer_kinds(question: str) -> list[str]:
    """Return the answer kinds to try for a question, in order (module docstring)."""
    kinds = []
    if question_options(question or ""):
        kinds.append("choice")
    if _TRUE_FALSE_QUESTION_RE.search(question or ""):
        kinds.append("true_false")
    elif is_yes_no_question(question or ""):
        kinds.append("yes_no")
    if asked_count(question or "")[0]:
        kinds.append("count")
    return kinds + ["number", "locator", "name"]


def _sentences(text: str) -> list[str]:
    text = _NEXT_TURN_RE.split(text or "", maxsplit=1)[0]
    text = _LIST_MARKER_RE.sub("", _CODE_RE.sub("\n", text))
    return [s.strip() for s in _SENTENCE_RE.split(text) if s and s.strip()]


#: Strict reading (a key): the answer must be in a conclusion sentence or in one of the
#: last this-many sentences, where an answer is stated; earlier sentences of a long
#: explanation or of code comments yield stray numbers.
LAST_SENTENCES = 2


def _with_source(a: Answer, source: str) -> Answer:
    return Answer(a.kind, a.value, a.label, a.unit, a.decimals, a.ambiguous, a.percent, source)


def final_answer(
    text: str,
    *,
    question: str,
    kind: str | None = None,
    unit: str | None = None,
    strict: bool = False,
    key_is_str: bool = False,
) -> Answer:
    """Return the final answer of ``text`` to ``question``; an unread Answer when none is found.

    ``kind`` restricts the search to one kind (pass the key's kind when reading a response,
    so both are read the same way); None tries ``literal`` on the whole text, then
    :func:`answer_kinds` in order; ``unit`` (with kind "number") accepts only numbers of
    that dimension ("" = bare numbers; a figure with a unit then counts by its number), so
    "3 months" is no answer to a key in m². ``strict`` (for a key): only conclusion
    sentences and the last LAST_SENTENCES sentences are read, and of several figures the
    one the question asks about. ``key_is_str`` (with kind "literal"): an explicit answer
    that is no literal is read as a string ("xyz" for a key 'xyz'). Never raises for any
    text; raises ValueError for an unknown kind. The result is cached per argument tuple.
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown answer kind {kind!r}")
    return _final_answer(text or "", question or "", kind, unit, strict, key_is_str)


def read_key_and_responses(
    key_text: str, responses: Mapping[str, str], *, question: str
) -> tuple[Answer, dict[str, Answer]]:
    """Read a key strictly and each response the same way as the key: the one recipe.

    Returns (the key's Answer, {response id: Answer}); the responses are read only when the
    key is read (an empty mapping otherwise), each with the key's kind and unit and, for a
    string literal key, ``key_is_str``. Every detector that compares answers with the key
    calls this, so the same (cached) readings serve them all. Never raises for any text.
    """
    key = final_answer(key_text, question=question, strict=True)
    if not key.is_read:
        return key, {}
    key_is_str = key.kind == "literal" and str(key.value)[:1] in "'\""
    return key, {
        rid: final_answer(
            text, question=question, kind=key.kind, unit=key.unit, key_is_str=key_is_str
        )
        for rid, text in responses.items()
    }


@lru_cache(maxsize=65536)
def _final_answer(
    text: str, question: str, kind: str | None, unit: str | None, strict: bool, key_is_str: bool
) -> Answer:
    if not text.strip():
        return unread("empty")
    kinds = [kind] if kind else answer_kinds(question)
    for source, candidate in _explicit(text):
        for k in kinds:
            found = _in_sentence(
                candidate, k, question, unit, whole=True, strict=strict, key_is_str=key_is_str
            )
            if found is not None:
                return _with_source(found, source)
    if kind is None and "true_false" not in kinds:
        ok, value = _literal_value(text)
        if ok and not _is_number(value) and not isinstance(value, str):
            return _with_source(_literal_answer(value), "whole")
        if ok and isinstance(value, str) and text.strip()[:1] in "'\"":
            return _with_source(_literal_answer(value), "whole")
    if kind == "literal":
        found = _literal(text, False, whole=True)
        if found is not None:
            return _with_source(found, "whole")
    if _JSON_SHAPED_RE.match(text) and next(_explicit(text), None) is None:
        return unread("a JSON object without an answer field")
    sentences = _sentences(text)
    ordered = [s for s in reversed(sentences) if _CONCLUSION_RE.search(s)]
    tail = sentences[-LAST_SENTENCES:] if strict else sentences
    ordered += [s for s in reversed(tail) if s not in ordered]
    for sentence in ordered:
        for k in kinds:
            found = _in_sentence(sentence, k, question, unit, strict=strict, key_is_str=key_is_str)
            if found is not None:
                return _with_source(found, "sentence")
    return unread("no answer found")
