"""Lettered options of a question and the letter a response chooses (scoring.judges.answers)."""

from __future__ import annotations

import re
from functools import lru_cache

from .kinds import Answer

_OPTION_LINE_RE = re.compile(
    r"(?m)^[ \t]*(?:[-*][ \t]+)?(?:\(([A-Za-z])\)|\[([A-Za-z])\]|([A-Za-z])[.):])[ \t]+(\S.*?)[ \t]*$"
)
_OPTION_INLINE_RE = re.compile(
    r"(?<![\w(])\(([A-Z])\)\s*(.+?)(?=\s*(?<![\w(])\([A-Z]\)|\s*$)", re.S
)


@lru_cache(maxsize=4096)
def question_options(question: str) -> tuple[tuple[str, str], ...]:
    """Return the question's lettered options as ((letter lower case, option text), ...).

    Options are lines opening with a letter in any style ("(A) x", "A. x", "A) x", "[A] x",
    "a) x") or inline "(A) x (B) y"; kept only when the letters run a, b, c, ... from a
    (two at least), so a sentence opening "I." or "A." is no option list.
    """
    for pattern in (_OPTION_LINE_RE, _OPTION_INLINE_RE):
        found: list[tuple[str, str]] = []
        for m in pattern.finditer(question or ""):
            groups = [g for g in m.groups() if g is not None]
            letter, text = groups[0].lower(), groups[-1].strip()
            expected = chr(ord("a") + len(found))
            if letter == expected:
                found.append((letter, text))
            elif letter == "a":
                found = [(letter, text)]
        if len(found) >= 2:
            return tuple(found)
    return ()


@lru_cache(maxsize=256)
def _choice_patterns(letters: str) -> list[re.Pattern[str]]:
    up, low = letters.upper(), letters.lower()
    cls = f"[{up}{low}]"
    return [
        re.compile(
            rf"(?:\banswer\b(?:\s+is)?|\boption\b|\bchoice\b)\s*(?:is|:|=)?\s*(?:option\s*)?"
            rf"[*_(\[]*({cls})(?![\w'’])",
            re.I,
        ),
        re.compile(rf"\*\*\s*\(?([{up}])\)?[.):]?\s*\*\*"),
        re.compile(rf"[(\[]({cls})[)\]]"),
        re.compile(rf"(?<![\w(])({cls})\)(?!\w)"),
        re.compile(rf"^\W*([{up}])(?:[.):]|\s*$)(?:\s|$)"),
    ]


def _norm_text(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def _choice(text: str, question: str, whole: bool = False) -> Answer | None:
    options = question_options(question)
    letters = "".join(letter for letter, _ in options)
    texts = dict(options)
    upper_style = any(c.isupper() for c in _OPTION_STYLE_RE.findall(question or "")) or any(
        m.group(1).isupper() for m in _OPTION_INLINE_RE.finditer(question or "")
    )
    if whole:
        m = re.match(rf"^\W*([{letters}{letters.upper()}])\W*$", text.strip())
        if m:
            return _choice_answer(m.group(1).lower(), texts, upper_style)
    for pattern in _choice_patterns(letters):
        hits = list(pattern.finditer(text))
        if hits:
            return _choice_answer(hits[-1].group(1).lower(), texts, upper_style)
    said = _norm_text(text)
    matched = [
        letter
        for letter, option in options
        if (o := _norm_text(option)) and re.search(rf"(?:^| ){re.escape(o)}(?: |$)", said)
    ]
    # "the red one" and "the red one with stripes": the longer option text wins
    matched = [
        letter
        for letter in matched
        if not any(
            other != letter and _norm_text(texts[letter]) in _norm_text(texts[other])
            for other in matched
        )
    ]
    if len(matched) == 1:
        return _choice_answer(matched[0], texts, upper_style)
    return None


_OPTION_STYLE_RE = re.compile(r"(?m)^\s*[(\[]?([A-Za-z])[)\].:]\s")


def _choice_answer(letter: str, texts: dict[str, str], upper: bool) -> Answer:
    shown = letter.upper() if upper else letter
    option = texts.get(letter, "")
    short = option if len(option) <= 40 else option[:39].rstrip() + "…"
    return Answer(
        "choice", letter, f"({shown}) {short}".strip() if upper else f"{shown}) {short}".strip()
    )
