"""Options of a question and the option a response chooses (judges.answers).

Options are lettered ("(A) x", "A. x", "a) x", inline "(A) x (B) y"), numbered ("1. x",
"(1) x", "1) x", "Option 1: x") or in roman numerals ("(i) x", "ii. x"); numbered and
roman lists count only when they close the question (nothing but options after the
first), so a worked list inside a question is no option list. Each option is known by
its index letter (a, b, c, ...) whatever its style, and shown in the question's own style.
"""

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


_ROMAN = ("i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x", "xi", "xii")
_ROMAN_ALT = "|".join(sorted(_ROMAN, key=len, reverse=True))
_NUMBERED_LINE_RE = re.compile(
    r"^[ \t]*(?:[-*][ \t]+)?(?:option[ \t]*)?(?:\((\d{1,2})\)|\[(\d{1,2})\]|(\d{1,2})[.):])[ \t]+(\S.*?)[ \t]*$",
    re.I,
)
_ROMAN_LINE_RE = re.compile(
    rf"^[ \t]*(?:[-*][ \t]+)?(?:\(({_ROMAN_ALT})\)|({_ROMAN_ALT})[.)])[ \t]+(\S.*?)[ \t]*$", re.I
)


@lru_cache(maxsize=4096)
def _closing_list(question: str) -> tuple[str, tuple[str, ...]]:
    """Return ("number" or "roman", option texts) of a numbered list closing the question.

    The list's markers must run 1, 2, 3 ... (or i, ii, iii ...) from the first, two at
    least, and every non-blank line after its first must be one of its options.
    """
    lines = [line for line in (question or "").splitlines() if line.strip()]
    for style, pattern, first in (
        ("number", _NUMBERED_LINE_RE, "1"),
        ("roman", _ROMAN_LINE_RE, "i"),
    ):
        texts: list[str] = []
        for line in reversed(lines):
            m = pattern.match(line)
            if not m:
                break
            groups = [g for g in m.groups() if g is not None]
            texts.insert(0, groups[-1].strip())
            if groups[0].lower() == first:
                break
        else:
            texts = []
        n = len(texts)
        markers = (
            [
                [g for g in pattern.match(line).groups() if g is not None][0].lower()
                for line in lines[len(lines) - n :]
            ]
            if n
            else []
        )
        expected = [str(i + 1) for i in range(n)] if style == "number" else list(_ROMAN[:n])
        if n >= 2 and markers == expected:
            return style, tuple(texts)
    return "", ()


def option_style(question: str) -> str:
    """Return how the question marks its options: "upper", "lower", "number", "roman" or ""."""
    if _closing_list(question)[0]:
        return _closing_list(question)[0]
    if not question_options(question):
        return ""
    upper = any(c.isupper() for c in _OPTION_STYLE_RE.findall(question or "")) or any(
        m.group(1).isupper() for m in _OPTION_INLINE_RE.finditer(question or "")
    )
    return "upper" if upper else "lower"


def option_mark(letter: str, style: str) -> str:
    """Return an option's mark in the question's style: "(B)", "b)", "(2)", "(ii)"."""
    index = ord(letter) - ord("a")
    if style == "number":
        return f"({index + 1})"
    if style == "roman":
        return f"({_ROMAN[index]})"
    return f"({letter.upper()})" if style == "upper" else f"{letter})"


@lru_cache(maxsize=4096)
def question_options(question: str) -> tuple[tuple[str, str], ...]:
    """Return the question's options as ((index letter lower case, option text), ...).

    Lettered options are lines opening with a letter in any style ("(A) x", "A. x",
    "A) x", "[A] x", "a) x") or inline "(A) x (B) y"; kept only when the letters run a, b,
    c, ... from a (two at least), so a sentence opening "I." or "A." is no option list.
    Failing those, a numbered or roman list closing the question (module docstring), its
    options known as a, b, c, ... in order.
    """
    style, texts = _closing_list(question or "")
    if style:
        return tuple((chr(ord("a") + i), t) for i, t in enumerate(texts))
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
def _marked_patterns(style: str, count: int) -> list[re.Pattern[str]]:
    """Patterns for a numbered or roman option's mark; group 1 is the mark as written."""
    mark = r"\d{1,2}" if style == "number" else _ROMAN_ALT
    end = r"(?![\w'’]|[.,]\d)"
    return [
        re.compile(
            rf"(?:\banswer\b(?:\s+is)?|\boption\b|\bchoice\b|\bstatement\b|\bnumber\b)\s*"
            rf"(?:is|:|=|#|no\.?)?\s*(?:option\s*)?[*_(\[]*({mark}){end}",
            re.I,
        ),
        re.compile(rf"\*\*\s*\(?({mark})\)?[.):]?\s*\*\*", re.I),
        re.compile(rf"[(\[]({mark})[)\]]", re.I),
        re.compile(rf"^\W*({mark})(?:[.):]|\s*$)(?:\s|$)", re.I),
    ]


def _mark_letter(mark: str, style: str, count: int) -> str | None:
    mark = mark.lower()
    index = int(mark) - 1 if style == "number" else _ROMAN.index(mark) if mark in _ROMAN else -1
    return chr(ord("a") + index) if 0 <= index < count else None


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
    style = option_style(question)
    if style in ("number", "roman"):
        for pattern in _marked_patterns(style, len(options)):
            hits = list(pattern.finditer(text))
            if not hits:
                continue
            letter = _mark_letter(hits[-1].group(1), style, len(options))
            if letter:
                return _choice_answer(letter, texts, style)
            if re.search(r"option|choice", hits[-1].group(0), re.I):
                return None  # "Option 7" of five options names none of them, nor any text
            # "50" or "Answer: 50" is no mark of five options: maybe an option's text
        return _choice_by_text(text, options, texts, style)
    if whole:
        m = re.match(rf"^\W*([{letters}{letters.upper()}])\W*$", text.strip())
        if m:
            return _choice_answer(m.group(1).lower(), texts, style)
    for pattern in _choice_patterns(letters):
        hits = list(pattern.finditer(text))
        if hits:
            return _choice_answer(hits[-1].group(1).lower(), texts, style)
    return _choice_by_text(text, options, texts, style)


def _choice_by_text(text: str, options, texts: dict[str, str], style: str) -> Answer | None:
    """Return the one option whose text the answer states (the longer of nested ones), or None."""
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
        return _choice_answer(matched[0], texts, style)
    return None


_OPTION_STYLE_RE = re.compile(r"(?m)^\s*[(\[]?([A-Za-z])[)\].:]\s")


def _choice_answer(letter: str, texts: dict[str, str], style: str) -> Answer:
    option = texts.get(letter, "")
    short = option if len(option) <= 40 else option[:39].rstrip() + "…"
    return Answer("choice", letter, f"{option_mark(letter, style)} {short}".strip())
