"""Numbers in an answer: signs, separators, fractions, scientific notation, units (judges.answers)."""

from __future__ import annotations

import re
from functools import lru_cache

from ..figures import extract_figures
from .kinds import Answer, _decimals, _stem

_BIG_O_RE = re.compile(r"\bO\([^)]*\)")
_WORDS = (
    "no zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen twenty"
).split()
_WORD_VALUE = {w: float(max(i - 1, 0)) for i, w in enumerate(_WORDS)}
_FRACTION_RE = re.compile(r"(?<![\w/.])(-?)(\d+)\s*/\s*(\d+)(?![\w/]|\.\d)")
_TEX_FRACTION_RE = re.compile(
    r"(?<![\d.])(\d+\s*)?\\[dt]?frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(\d+)\s*\}"
)
_SCI_RE = re.compile(
    r"(?<![\w.])(-?\d+(?:\.\d+)?)\s*(?:[eE]([+-]?\d+)(?!\w|\.\d)|"
    r"(?:×|x|\*|·|⋅|\\times|\\cdot)\s*10\s*(?:\^\s*\{?\s*([+-]?\d+)\s*\}?|\*\*\s*([+-]?\d+)|"
    r"([⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)))"
)
_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")

# A dash or minus opening a number (not joining two: "900-1000" is a range) is a sign.
_SIGN_RE = re.compile(
    r"(?:(?<=^)|(?<=[\s(\[{=:$,;*\"'`\\]))[\u2212\u2012\u2013\u2014\ufe63\uff0d-](?=\$?\d)"
)
_SPACE_GROUPS_RE = re.compile(r"(?<![\d.,])\d{1,3}(?:[ \u00a0\u2009\u202f]\d{3})+(?![\d]|[.,]\d)")
_THIN_GROUPS_RE = re.compile(r"(?<=\d)(?:\\,|\{,\}|\\ )(?=\d{3})")
_TEX_NOISE_RE = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}|\\\$|\\[()\[\]]|\$")


@lru_cache(maxsize=4096)
def _question_numbers(question: str) -> tuple[Answer, ...]:
    """Return the numbers a question states (read once per question, then cached)."""
    return tuple(a for _, a in _numbers(normalise_numbers(question)))


@lru_cache(maxsize=4096)
def _asked_words(question: str) -> frozenset[str]:
    return frozenset(_stem(w) for w in _CONTENT_RE.findall(question.lower()) if w not in _STOP)


# -- normalising numbers --------------------------------------------------------------------


_VULGAR = {
    "½": (1, 2), "⅓": (1, 3), "⅔": (2, 3), "¼": (1, 4), "¾": (3, 4), "⅕": (1, 5),
    "⅖": (2, 5), "⅗": (3, 5), "⅘": (4, 5), "⅙": (1, 6), "⅚": (5, 6), "⅐": (1, 7),
    "⅛": (1, 8), "⅜": (3, 8), "⅝": (5, 8), "⅞": (7, 8), "⅑": (1, 9), "⅒": (1, 10),
}  # fmt: skip
_VULGAR_RE = re.compile(r"(?<![\d.])(\d*)[ \u00a0]?([" + "".join(_VULGAR) + "])")


def _vulgar(m: re.Match[str]) -> str:
    num, den = _VULGAR[m.group(2)]
    whole = int(m.group(1)) if m.group(1) else 0
    return f"{whole * den + num}/{den}"


def normalise_numbers(text: str) -> str:
    """Return ``text`` with signs as "-", thousands separators as ",", TeX wrappers dropped.

    Any dash or minus (U+2212, U+2012-2014, U+FE63, U+FF0D) that opens a number becomes
    "-"; digit groups separated by spaces, no-break or thin spaces ("12 500", "12\\u2009500")
    or TeX thin spaces ("12\\,500") become "12,500"; ``\\text{..}``, ``$`` and ``\\(``
    markers are removed; a Unicode vulgar fraction becomes a fraction ("½" -> "1/2", mixed
    "1½" -> "3/2") and the fraction slash U+2044 a "/".
    """
    if not text.isascii():
        text = _VULGAR_RE.sub(_vulgar, text).replace("\u2044", "/")
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
        if den and m.group(1) and num >= 0:  # a mixed number, 2\frac{1}{2} = 5/2
            num += int(m.group(1)) * den
        if den:
            neg = _signed(sentence, m.start()) or m.start(2) in negatives or num < 0
            sign = -1 if neg else 1
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


_ANY_NUMBER_RE = re.compile(
    r"\d|[" + "".join(_VULGAR) + r"]|\b(?:" + "|".join(_WORDS[1:]) + r")\b", re.I
)
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
