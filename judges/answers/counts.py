"""Counts as answers: "0 brothers", "no brothers", "none" to "how many ..." (judges.answers).

A question *counts* a noun when it states a number of it ("three sisters") or asks "how
many" of it ("How many brothers does David have?": the asked noun "brother", the subject
"david"). A count is a number word ("no", "none", "zero", "one" ... "twenty") or digits
before such a noun, or "not ... any <noun>" (0). A count the question itself states ("one
brother") is an echo, passed over, unless the question asks that noun and the asked
subject leads it: "David has only one brother" answers "how many brothers does
David have", "Each sister has one brother" does not. When the question asks "how many", a
response's whole explicit answer that is a bare number or number word ("0", "None",
"two") is a count of the asked noun (a key's bare number stays a ``number``, so responses
are read for it as numbers).
"""

from __future__ import annotations

import re
from functools import lru_cache

from .kinds import Answer, _stem
from .numeric import _WORD_VALUE, _WORDS

_NOUN_WORDS = "|".join(_WORDS) + r"|none|\d+"
_COUNT_RE = re.compile(
    r"\b(" + _NOUN_WORDS + r")\s+(?:(?:more|other|additional)\s+)?([a-z]+)",
    re.IGNORECASE,
)
_NOT_NOUNS = frozenset(
    "in on at of to for and or is are was the a an more less than times per by with".split()
)
_ASKED_RE = re.compile(
    r"\bhow\s+many\s+(?:(?:more|other|different|distinct)\s+)?([a-z]+)"
    r"(?:\s+(?:do|does|did|will|would|can|could|is|are|was|were|has|have|had)"
    r"\s+(?:the\s+|a\s+|an\s+)?([A-Za-z]+))?",
    re.IGNORECASE,
)
_ASKED_NOT_NOUNS = _NOT_NOUNS | frozenset("do does did are is were was can will of".split())
_WHOLE_RE = re.compile(
    r"^\W*(" + _NOUN_WORDS + r")(?:\s+(?:(?:more|other|additional)\s+)?([a-z]+))?\W*$",
    re.IGNORECASE,
)


@lru_cache(maxsize=4096)
def asked_count(question: str) -> tuple[str, str]:
    """Return (stemmed noun, subject lower case) of the question's last "how many <noun>".

    ("", "") when the question asks no "how many"; the subject is "" when none follows
    ("how many brothers does David have" -> ("brother", "david")).
    """
    hits = [m for m in _ASKED_RE.finditer(question) if m.group(1).lower() not in _ASKED_NOT_NOUNS]
    if not hits:
        return "", ""
    return _stem(hits[-1].group(1)), (hits[-1].group(2) or "").lower()


@lru_cache(maxsize=4096)
def counted_nouns(question: str) -> frozenset[str]:
    """Return the stemmed nouns the question counts (states a number of, or asks how many)."""
    nouns = {
        _stem(m.group(2))
        for m in _COUNT_RE.finditer(question)
        if m.group(1).lower() not in ("no", "none") and m.group(2).lower() not in _NOT_NOUNS
    }
    asked, _ = asked_count(question)
    return frozenset(nouns | ({asked} if asked else set()))


@lru_cache(maxsize=1024)
def _not_any_re(noun: str) -> re.Pattern[str]:
    return re.compile(
        rf"\b(?:not|n't|never)\s+(?:\w+\s+){{0,2}}any\s+(?:(?:more|other)\s+)?({noun}s?)\b",
        re.IGNORECASE,
    )


@lru_cache(maxsize=1024)
def _number_of_re(noun: str) -> re.Pattern[str]:
    return re.compile(
        rf"\bnumber\s+of\s+({noun}s?)\b[^.;]{{0,40}}?\b(?:is|are|=|:|equals)\s+({_NOUN_WORDS})\b",
        re.IGNORECASE,
    )


def _value(word: str) -> float:
    word = word.lower()
    return 0.0 if word == "none" else _WORD_VALUE.get(word, float(word) if word.isdigit() else 0.0)


def _count(value: float, noun: str, written: str) -> Answer:
    return Answer("count", value, f"{value:g} {written.lower()}", noun, 0)


def read_count(sentence: str, question: str, *, whole: bool = False) -> Answer | None:
    """Return the count a sentence (or, ``whole``, an explicit answer) gives, or None.

    ``whole``: the text is a response's whole explicit answer (the reader passes False for
    a key). Module docstring for the rules; of the asked noun's counts the first that is not an
    echo wins, then "not ... any <noun>", then an echo naming the asked subject. A count of
    another counted noun is read only when the question asks no "how many".
    """
    asked, subject = asked_count(question)
    if whole and asked and (m := _WHOLE_RE.match(sentence.strip())):
        written = m.group(2) or ""
        if not written or _stem(written) == asked:
            return _count(_value(m.group(1)), asked, written or asked)
    nouns = {asked} if asked else counted_nouns(question)
    lowered_q = question.lower()
    echoes = []
    for m in _COUNT_RE.finditer(sentence):
        noun = _stem(m.group(2))
        if noun not in nouns:
            continue
        if m.group(0).lower() not in lowered_q:
            return _count(_value(m.group(1)), noun, m.group(2))
        echoes.append(m)
    if not asked:
        return None
    if m := _number_of_re(re.escape(asked)).search(sentence):
        return _count(_value(m.group(2)), asked, m.group(1))
    if m := _not_any_re(re.escape(asked)).search(sentence):
        return _count(0.0, asked, m.group(1))
    for m in echoes:
        if subject and re.search(
            rf"\b{re.escape(subject)}\b(?:\W+\w+){{0,3}}\W*$", sentence[: m.start()], re.I
        ):
            return _count(_value(m.group(1)), asked, m.group(2))
    return None
