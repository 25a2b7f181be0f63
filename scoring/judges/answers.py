"""The one reader of final answers: pull the final answer out of a response or a key, and compare.

Plain regular expressions over the figure parser the reference judge uses
(scoring.judges.figures), the stdlib ``json``/``ast`` and ``json5`` (objects that strict
JSON rejects); no Django. Used by triage's ``responses_agree_against_key`` detector, by the
reference judge (choice, literal and explicit-number keys, its rule 0) and by any detector that needs the models' answers.

An *answer* is one of these kinds, tried in this order:

- ``choice``: a lettered option, when the question lists two or more options lettered
  from A (any style: ``(A) ...``, ``A. ...``, ``A) ...``, ``[A] ...``, ``a) ...``, inline
  ``(A) x (B) y``; any number of options, A-Z). Read from ``Answer: B``, ``the answer is
  (B)``, ``**B**``, ``[b]``, ``option c``, ``B.``/``B)`` opening a line, a bare letter as
  the whole answer, or the text of exactly one option (matched back to its letter);
- ``literal``: a Python/JSON literal other than a number (``[(4, 1)]``, ``'abc'``, ``True``,
  ``None``), when the key is one (CRUXEval-style keys); compared as parsed values;
- ``yes_no``: a leading Yes/No (figures.polarity), when the question asks yes or no;
- ``count``: a number and a noun the question itself counts ("0 brothers");
- ``number``: a figure with its unit (figures.extract_figures; units converted within one
  dimension: mm/cm/m/km, ml/litres, g/kg/tonnes, seconds/minutes/hours), a bare number, a
  fraction ``35/36`` or ``\\frac{35}{36}``, a percentage (a fraction 0-1 that also equals
  its number of per cent), scientific notation (``1.5e-3``, ``1.5 × 10^-3``). Any minus or
  dash before a digit is a sign (U+2212, en dash, em dash, hyphen); thousands separators
  may be commas, spaces, no-break or thin spaces (U+00A0, U+2009, U+202F);
- ``locator``: a named clause, table or diagram (figures.extract_locators);
- ``name``: exactly one of the capitalised names the question mentions.

Where the answer is looked for, first found wins:

1. an explicit answer: the ``answer`` / ``final_answer`` field of a JSON object (fenced
   or bare, the last object holding one), else the last ``\\boxed{...}``, else the last
   "final answer"/"the answer is"/"Answer:" phrase (to the end of its line);
2. the sentences: the last one with a conclusion word ("therefore", "so", "answer", ...)
   that yields an answer, else the last sentence that yields one (``strict``, for a key:
   only conclusion sentences and the last LAST_SENTENCES). Text after a made-up next turn
   ("### Human:") and fenced code are skipped here.

When nothing can be read the result is :data:`UNREAD`-kind (``answer.is_read`` False,
``bool(answer)`` False): an unread answer is neither the key's answer nor another one,
and :meth:`Answer.differs_from` is False for it. A reading is ``ambiguous`` when the place
it was read from states more than one candidate and nothing singles one out (a key
"at least 850 mm ... a landing of 1500 mm" is read as 850 mm: the figure whose own words
the question asks about); callers must not suggest an ambiguous reading as a correction.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import json5

from .figures import extract_figures, extract_locators, is_yes_no_question, polarity

UNREAD = "unread"

_NEXT_TURN_RE = re.compile(r"\n\s*#*\s*(?:Human|User)\s*:", re.IGNORECASE)
_CODE_RE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_LIST_MARKER_RE = re.compile(r"(?m)^[ \t]*(?:\d{1,2}[.)]|[-*\u2022])[ \t]+")
_BIG_O_RE = re.compile(r"\bO\([^)]*\)")
_CONCLUSION_RE = re.compile(
    r"\b(?:therefore|thus|hence|so|answer|in conclusion|in summary|finally|overall)\b",
    re.IGNORECASE,
)
_WORDS = (
    "no zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen twenty"
).split()
_WORD_VALUE = {w: float(max(i - 1, 0)) for i, w in enumerate(_WORDS)}
_COUNT_RE = re.compile(
    r"\b(" + "|".join(_WORDS) + r"|\d+)\s+(?:(?:more|other|additional)\s+)?([a-z]+)",
    re.IGNORECASE,
)
_FRACTION_RE = re.compile(r"(?<![\w/.])(-?)(\d+)\s*/\s*(\d+)(?![\w/]|\.\d)")
_TEX_FRACTION_RE = re.compile(r"()\\[dt]?frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(\d+)\s*\}")
_SCI_RE = re.compile(
    r"(?<![\w.])(-?\d+(?:\.\d+)?)\s*(?:[eE]([+-]?\d+)(?!\w|\.\d)|"
    r"(?:×|x|\*|\\times|\\cdot)\s*10\s*(?:\^\s*\{?\s*([+-]?\d+)\s*\}?|\*\*\s*([+-]?\d+)|"
    r"([⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)))"
)
_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_NAME_RE = re.compile(r"\b([A-Z][a-zA-Z]+)\b")
_SENTENCE_START_RE = re.compile(r"(?:^|[.!?:]\s+|\n\s*(?:[*\-]\s*)?)$")

# A dash or minus opening a number (not joining two: "900-1000" is a range) is a sign.
_SIGN_RE = re.compile(
    r"(?:(?<=^)|(?<=[\s(\[{=:$,;*\"'`\\]))[\u2212\u2012\u2013\u2014\ufe63\uff0d-](?=\$?\d)"
)
_SPACE_GROUPS_RE = re.compile(r"(?<![\d.,])\d{1,3}(?:[ \u00a0\u2009\u202f]\d{3})+(?![\d]|[.,]\d)")
_THIN_GROUPS_RE = re.compile(r"(?<=\d)(?:\\,|\{,\}|\\ )(?=\d{3})")
_TEX_NOISE_RE = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}|\\\$|\\[()\[\]]|\$")

_JSON_KEYS = ("final_answer", "answer", "final answer", "finalanswer")
_JSON_FIELD_RE = re.compile(
    r"(?:\"(?:final[_ ]?answer|answer)\"|'(?:final[_ ]?answer|answer)')\s*:\s*(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^,}\n]+)",
    re.IGNORECASE,
)
_FENCE_RE = re.compile(r"```[\w+-]*\s*\n?(.*?)(?:```|$)", re.DOTALL)
_JSON_SHAPED_RE = re.compile(r"\s*(?:```\s*json\s*)?\{\s*[\"']\w+[\"']\s*:")
_ANSWER_WORD_RE = re.compile(r"answer", re.IGNORECASE)
_BOXED_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_MARKER_RE = re.compile(
    r"(?:final\s+answer(?:\s+is)?|the\s+(?:correct\s+)?answer\s+is|answer\s*(?:is)?[*\"]*\s*[:：])"
    r"\s*[:：]?\s*(.+)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Answer:
    """A final answer: ``kind`` (module docstring, or "unread"), ``value`` to compare, ``label`` to show.

    ``value``: a float for ``number`` and ``count`` (with ``unit`` the figure's dimension
    or the counted noun), the letter (lower case) for ``choice``, a canonical ``repr`` for
    ``literal``, else a normalised string. ``decimals``: digits written after the point (a
    rounded 0.944 equals 17/18). ``percent``: written as a percentage (value is the
    fraction). ``ambiguous``: the place read states other candidates too (module
    docstring). ``source``: where it was read ("json", "boxed", "marker", "whole",
    "sentence"); ``reason`` says why an unread answer is unread.
    """

    kind: str
    value: float | str
    label: str
    unit: str = ""
    decimals: int = 6
    ambiguous: bool = False
    percent: bool = False
    source: str = ""
    reason: str = field(default="", compare=False)

    @property
    def is_read(self) -> bool:
        """Return False for an unread answer."""
        return self.kind != UNREAD

    def __bool__(self) -> bool:
        return self.is_read

    def same_as(self, other: Answer) -> bool:
        """Return True when both are read and give the same answer (numbers to the coarser precision).

        A percentage also equals its number of per cent (25% = 25, for keys written bare).
        """
        if not (self.is_read and other.is_read):
            return False
        if self.kind != other.kind or self.unit != other.unit:
            return False
        if isinstance(self.value, float) and isinstance(other.value, float):
            if _close(self.value, other.value, self.decimals, other.decimals):
                return True
            if self.percent != other.percent:
                pct, bare = (self, other) if self.percent else (other, self)
                return _close(pct.value * 100, bare.value, pct.decimals - 2, bare.decimals)
            return False
        return self.value == other.value

    def differs_from(self, other: Answer) -> bool:
        """Return True only when both are read and give different answers (unread is never a disagreement)."""
        return self.is_read and other.is_read and not self.same_as(other)


def unread(reason: str) -> Answer:
    """Return the unread answer, saying why (e.g. "no answer found", "empty")."""
    return Answer(UNREAD, "", "unread", reason=reason)


def _close(a: float, b: float, da: int, db: int) -> bool:
    tol = 0.5 * 10 ** -max(0, min(da, db))
    return abs(a - b) <= max(tol, 1e-9 * abs(a))


def _stem(word: str) -> str:
    word = word.lower()
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def _decimals(written: str) -> int:
    return len(written.split(".", 1)[1]) if "." in written else 0


_NOT_NOUNS = frozenset(
    "in on at of to for and or is are was the a an more less than times per by with".split()
)


@lru_cache(maxsize=4096)
def _counted_nouns(question: str) -> frozenset[str]:
    return frozenset(
        _stem(m.group(2))
        for m in _COUNT_RE.finditer(question)
        if m.group(1).lower() != "no" and m.group(2).lower() not in _NOT_NOUNS
    )


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


@lru_cache(maxsize=4096)
def _question_numbers(question: str) -> tuple[Answer, ...]:
    """Return the numbers a question states (read once per question, then cached)."""
    return tuple(a for _, a in _numbers(normalise_numbers(question)))


@lru_cache(maxsize=4096)
def _asked_words(question: str) -> frozenset[str]:
    return frozenset(_stem(w) for w in _CONTENT_RE.findall(question.lower()) if w not in _STOP)


# -- normalising numbers --------------------------------------------------------------------


def normalise_numbers(text: str) -> str:
    """Return ``text`` with signs as "-", thousands separators as ",", TeX wrappers dropped.

    Any dash or minus (U+2212, U+2012-2014, U+FE63, U+FF0D) that opens a number becomes
    "-"; digit groups separated by spaces, no-break or thin spaces ("12 500", "12\\u2009500")
    or TeX thin spaces ("12\\,500") become "12,500"; ``\\text{..}``, ``$`` and ``\\(``
    markers are removed.
    """
    text = _TEX_NOISE_RE.sub(lambda m: m.group(1) or "", text)
    text = _THIN_GROUPS_RE.sub(",", text)
    text = _SIGN_RE.sub("-", text)
    return _SPACE_GROUPS_RE.sub(lambda m: re.sub(r"[ \u00a0\u2009\u202f]", ",", m.group(0)), text)


_MINUS_RE = re.compile(r"(?<![\w.)\]}^])-(?=\$?\d|\\[dt]?frac)")


def _strip_signs(sentence: str) -> tuple[str, set[int]]:
    """Blank each minus sign (the figure parser reads unsigned numbers); return the text and
    the positions where a negative number starts."""
    negatives: set[int] = set()
    chars = list(sentence)
    for m in _MINUS_RE.finditer(sentence):
        chars[m.start()] = " "
        negatives.add(m.end() + (1 if sentence[m.end()] == "$" else 0))
    return "".join(chars), negatives


def _numbers(sentence: str) -> list[tuple[int, Answer]]:
    """Return (position, Answer) for each number of an already normalised sentence."""
    found: list[tuple[int, Answer]] = []
    taken: list[tuple[int, int]] = []
    sentence, negatives = _strip_signs(sentence)

    def _signed(_text: str, start: int) -> bool:
        return start in negatives or (start - 1 in negatives and _text[start - 1] == "$")

    for m in _TEX_FRACTION_RE.finditer(sentence):
        num, den = int(m.group(2)), int(m.group(3))
        if den:
            sign = -1 if (_signed(sentence, m.start()) or num < 0) else 1
            value = sign * abs(num) / den
            label = f"{'-' if sign < 0 else ''}{abs(num)}/{den}"
            found.append((m.start(), Answer("number", value, label, "", 9)))
            taken.append(m.span())
    for m in _SCI_RE.finditer(sentence):
        exp_text = (
            m.group(2) or m.group(3) or m.group(4) or (m.group(5) or "").translate(_SUPERSCRIPT)
        )
        if not exp_text:
            continue
        mantissa, exp = m.group(1), int(exp_text)
        value = float(mantissa) * 10.0**exp
        if _signed(sentence, m.start()) and not mantissa.startswith("-"):
            value = -value
        decimals = max(0, _decimals(mantissa) - exp)
        label = ("-" if value < 0 and not mantissa.startswith("-") else "") + m.group(0).strip()
        found.append((m.start(), Answer("number", value, label, "", decimals)))
        taken.append(m.span())
    masked = _mask(sentence, taken)
    for m in _FRACTION_RE.finditer(masked):
        num, den = int(m.group(2)), int(m.group(3))
        if den:
            neg = bool(m.group(1)) or _signed(masked, m.start())
            value = (-num if neg else num) / den
            found.append(
                (m.start(), Answer("number", value, f"{'-' if neg else ''}{num}/{den}", "", 9))
            )
            taken.append(m.span())
    masked = _mask(sentence, taken)
    for f in extract_figures(masked):
        written = f.written or f"{f.raw:g}"
        if written.isalpha() and f.dim is None:
            continue
        neg = _signed(masked, f.start) and not written.isalpha()
        sign = -1.0 if neg else 1.0
        prefix = "-" if neg else ""
        own_unit = masked[f.start + len(f.written or "") :].lstrip()
        if f.dim == "percent" and not own_unit.startswith(("%", "per")):
            # "0.19 or 19%": the parser lends the % to the bare 0.19, which is a fraction
            found.append(
                (f.start, Answer("number", sign * f.raw, prefix + written, "", _decimals(written)))
            )
        elif f.dim == "percent":
            found.append(
                (
                    f.start,
                    Answer(
                        "number",
                        sign * f.raw / 100,
                        prefix + f.label(),
                        "",
                        _decimals(written) + 2,
                        percent=True,
                    ),
                )
            )
        elif f.dim is None:
            found.append(
                (f.start, Answer("number", sign * f.raw, prefix + written, "", _decimals(written)))
            )
        else:
            found.append(
                (
                    f.start,
                    Answer("number", sign * f.value, prefix + f.label(), f.dim, 6 - _unit_shift(f)),
                )
            )
    return sorted(found, key=lambda pair: pair[0])


def _unit_shift(fig) -> int:
    """Digits the conversion to the base unit moves the point by (1.1 m -> 1100 mm: 3)."""
    factor = fig.value / fig.raw if fig.raw else 1.0
    shift = 0
    while factor >= 10 and shift < 9:
        factor /= 10
        shift += 1
    return shift


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    chars = list(text)
    for start, end in spans:
        for i in range(start, end):
            chars[i] = " "
    return "".join(chars)


_ANY_NUMBER_RE = re.compile(r"\d|\b(?:" + "|".join(_WORDS[1:]) + r")\b", re.I)
_PLAIN_NUMBER_RE = re.compile(
    r"^\s*([-\u2212\u2012\u2013\u2014])?\s*\$?\s*(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)\s*\.?\s*$"
)
_TOTAL_RE = re.compile(
    r"\b(?:of|out\s+of)\s+(?:the\s+)?(?:other|remaining|total\s+of\s+)?\s*$", re.I
)
_PICKED_RE = re.compile(r"(?:=|\bis|\bare|\bequals|\bgives|:|\banswer\b[^.]{0,20})\s*\**\s*$", re.I)
_CONTENT_RE = re.compile(r"[a-z]{3,}")
_STOP = frozenset(
    "the and for with what which that this must should does from into than have has are was "
    "were will would least most more less provide provided required require".split()
)


def _context_words(sentence: str, start: int, end: int) -> set[str]:
    words = _CONTENT_RE.findall(sentence[max(0, start - 40) : end + 40].lower())
    return {_stem(w) for w in words if w not in _STOP}


def _number(
    sentence: str, question: str = "", unit: str | None = None, strict: bool = False
) -> Answer | None:
    """Return the number a sentence answers with (module docstring), or None.

    A number the question itself states is passed over when the sentence has another;
    a number after "of the (other)" is a total, passed over likewise. Reading a key
    (``strict``), the number whose own words the question asks about wins; a response's
    is its last number, or the one after "=", "is", ":". Several distinct candidates with
    nothing singling one out make the reading ambiguous.
    """
    if not _ANY_NUMBER_RE.search(sentence):
        return None
    plain = _PLAIN_NUMBER_RE.match(sentence)
    if plain and unit in (None, ""):  # "18", "-3", "$1,234.50": nothing to parse
        written = plain.group(2)
        value = float(written.replace(",", "")) * (-1 if plain.group(1) else 1)
        return Answer(
            "number", value, ("-" if plain.group(1) else "") + written, "", _decimals(written)
        )
    sentence = normalise_numbers(_BIG_O_RE.sub(" ", sentence))
    found = _numbers(sentence)
    if unit is not None:  # the key's dimension ("" = a bare number): other figures answer else
        same = [f for f in found if f[1].unit == unit]
        if not same and unit == "" and found:  # a key "3" read against "3 hours": the number
            same = [
                (p, Answer("number", _raw_of(a), a.label.split(" ")[0], "", a.decimals))
                for p, a in found
            ]
        found = same
    if not found:
        return None
    if question:
        given = _question_numbers(question)
        fresh = [
            f
            for f in found
            if re.search(r"=\s*$", sentence[: f[0]]) or not any(f[1].same_as(g) for g in given)
        ]
        found = fresh or found
    totals = [f for f in found if _TOTAL_RE.search(sentence[: f[0]])]
    if totals and len(totals) < len(found):
        found = [f for f in found if f not in totals]
    distinct: list[Answer] = []
    for _, a in found:
        if not any(a.same_as(d) for d in distinct):
            distinct.append(a)
    if len(distinct) == 1:
        return found[-1][1]
    if strict and question:
        asked = _asked_words(question)
        scored = [
            (len(_context_words(sentence, p, p + len(a.label)) & asked), i)
            for i, (p, a) in enumerate(found)
        ]
        # Clearly singled out: at least twice the words of any other distinct candidate
        # (a key "18 m one way and 45 m more than one way" answers two things: ambiguous).
        best = max(s for s, _ in scored)
        winner = next(i for s, i in scored if s == best)
        rivals = [s for s, i in scored if not found[i][1].same_as(found[winner][1])]
        if best > 0 and all(2 * r <= best for r in rivals):
            return found[winner][1]
        return _ambiguous(found[-1][1])
    picked = [f for f in found if _PICKED_RE.search(sentence[: f[0]])]
    if picked:
        return picked[-1][1]
    return _ambiguous(found[-1][1])


def _raw_of(a: Answer) -> float:
    m = re.match(r"-?[\d,]*\.?\d+", a.label.replace(",", ""))
    return float(m.group(0)) if m else float(a.value)


def _ambiguous(a: Answer) -> Answer:
    return Answer(a.kind, a.value, a.label, a.unit, a.decimals, True, a.percent, a.source)


# -- choices --------------------------------------------------------------------------------

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


# -- literals -------------------------------------------------------------------------------


def _literal_value(text: str):
    """Return (True, value) when ``text`` is one Python/JSON literal, else (False, None)."""
    text = text.strip().strip("`").strip()
    if not text or len(text) > 5000:
        return False, None
    for candidate in (
        text,
        re.sub(
            r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", text))
        ),
    ):
        try:
            return True, ast.literal_eval(candidate)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            continue
    return False, None


def _is_number(value) -> bool:
    return isinstance(value, (int, float, complex)) and not isinstance(value, bool)


def _literal_answer(value) -> Answer:
    label = repr(value)
    return Answer("literal", label, label if len(label) <= 60 else label[:59] + "…")


_ASSERT_RE = re.compile(r"==\s*(.+?)\s*$", re.S)


def _literal(text: str, key_is_str: bool, whole: bool) -> Answer | None:
    """Read a literal from an explicit answer (``whole``) or from a sentence."""
    text = text.strip()
    m = _ASSERT_RE.search(text)
    candidates = [m.group(1)] if m and "assert" in text else []
    candidates += re.findall(r"`([^`]+)`", text)[::-1]
    if whole:
        candidates.insert(0, text)
    for cand in candidates:
        ok, value = _literal_value(cand.rstrip("."))
        if ok and not _is_number(value):
            return _literal_answer(value)
    if whole and key_is_str and text and "\n" not in text:
        return _literal_answer(text.strip("`").strip())
    return None


# -- explicit answers -----------------------------------------------------------------------


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

    Sources: "json" (the last JSON object's ``answer``/``final_answer``), "boxed" (the last
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
    if "boxed" in text or "fbox" in text:
        boxed = _boxed(text)
        if boxed is not None:
            yield ("boxed", boxed)
    markers = list(_MARKER_RE.finditer(text)) if _ANSWER_WORD_RE.search(text) else []
    if markers:
        value = markers[-1].group(1).strip()
        value = _boxed(value) or value
        yield ("marker", value.strip().strip('"“”{},').rstrip(".").strip().strip('"“”'))


# -- reading --------------------------------------------------------------------------------


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
    if kind == "yes_no":
        pol = polarity(sentence, infer=False)
        return Answer("yes_no", pol, pol.capitalize()) if pol else None
    if kind == "count":
        nouns = _counted_nouns(question)
        for m in _COUNT_RE.finditer(sentence):
            # A count the question states ("two years") is an echo, not an answer.
            if _stem(m.group(2)) in nouns and m.group(0).lower() not in question.lower():
                word = m.group(1).lower()
                value = _WORD_VALUE.get(word, float(word) if word.isdigit() else 0.0)
                noun = _stem(m.group(2))
                return Answer("count", value, f"{value:g} {noun}", noun, 0)
        return None
    if kind == "number":
        return _number(sentence, question, unit, strict)
    if kind == "locator":
        locs = extract_locators(sentence)
        return Answer("locator", locs[0].label().lower(), locs[0].label()) if locs else None
    if kind == "name":
        names = {n for n, pattern in _name_patterns(question) if pattern.search(sentence)}
        return Answer("name", next(iter(names)), next(iter(names))) if len(names) == 1 else None
    raise ValueError(f"unknown answer kind {kind!r}")


KINDS = ("choice", "literal", "yes_no", "count", "number", "locator", "name")


def answer_kinds(question: str) -> list[str]:
    """Return the answer kinds to try for a question, in order (module docstring)."""
    kinds = []
    if question_options(question or ""):
        kinds.append("choice")
    if is_yes_no_question(question or ""):
        kinds.append("yes_no")
    return kinds + ["count", "number", "locator", "name"]


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
    if kind is None:
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
