"""Pull figures, limit directions, locators, documents and yes/no polarity out of construction text.

Plain regular expressions, used by the reference judge and auditor. A *figure*
is a number with its unit, normalised to a base unit per dimension (lengths in
mm, areas in m², times in minutes, powers in W, pressures in kPa), so "1.1 m"
equals "1100 mm". Numbers that belong to a locator ("Table 4.1", "paragraph
2.5"), a document ("BS EN 1991-1-4:2005", "CDM 2015"), a year or a date are
not figures. Fire-resistance classes ("REI 60") are figures in minutes;
gradients ("1:12", "1 in 12") are figures of dimension "ratio".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

# (pattern, dimension, factor to the base unit, display unit). Order matters:
# the alternation tries them in turn, so longer units come before their prefixes.
_UNITS: list[tuple[str, str, float, str]] = [
    (r"w\s*/\s*\(?\s*m\s*(?:²|2|\^2)\s*(?:·|\.|\s|x)?\s*k\s*\)?", "u_value", 1.0, "W/(m²·K)"),
    (r"kn\s*/\s*m\s*(?:²|2|\^2)", "pressure", 1.0, "kN/m²"),
    (r"n\s*/\s*mm\s*(?:²|2|\^2)", "pressure", 1000.0, "N/mm²"),
    (r"mpa", "pressure", 1000.0, "MPa"),
    (r"kpa", "pressure", 1.0, "kPa"),
    (r"pa", "pressure", 0.001, "Pa"),
    (r"l\s*/\s*s|litres?\s+per\s+second", "flow", 1.0, "l/s"),
    (r"m\s*/\s*s|met(?:re|er)s?\s+per\s+second", "speed", 1.0, "m/s"),
    (r"ach|air\s+changes\s+per\s+hour", "air_changes", 1.0, "ach"),
    (r"kwh", "energy", 1.0, "kWh"),
    (r"m\s*(?:²|\^2|2)|sq\.?\s*m|square\s+met(?:re|er)s?", "area", 1.0, "m²"),
    (r"m\s*(?:³|\^3|3)|cubic\s+met(?:re|er)s?", "volume", 1.0, "m³"),
    (r"ml|millilit(?:re|er)s?", "liquid_volume", 0.001, "ml"),
    (r"mm|millimet(?:re|er)s?", "length", 1.0, "mm"),
    (r"cm|centimet(?:re|er)s?", "length", 10.0, "cm"),
    (r"km|kilomet(?:re|er)s?", "length", 1_000_000.0, "km"),
    (r"minutes?|mins?", "time", 1.0, "minutes"),
    (r"hours?|hrs?", "time", 60.0, "hours"),
    (r"seconds?|secs?", "time", 1 / 60, "seconds"),
    (r"m|met(?:re|er)s?", "length", 1000.0, "m"),
    (r"kw|kilowatts?", "power", 1000.0, "kW"),
    (r"w|watts?", "power", 1.0, "W"),
    (r"%|per\s*cent", "percent", 1.0, "%"),
    (r"storeys?|stories|floors?", "storeys", 1.0, "storeys"),
    (r"db(?:\s*\(a\))?", "sound", 1.0, "dB"),
    (r"lux", "illuminance", 1.0, "lux"),
    (r"°\s*c|degrees?\s+c(?:elsius)?", "temperature", 1.0, "°C"),
    (r"°|degrees?", "angle", 1.0, "°"),
    (r"kn", "force", 1.0, "kN"),
    (r"kg|kilograms?", "mass", 1.0, "kg"),
    (r"tonnes?", "mass", 1000.0, "tonnes"),
    (r"g|grams?", "mass", 0.001, "g"),
    (r"litres?|lit(?:er|re)s?", "liquid_volume", 1.0, "litres"),
    (r"years?", "years", 1.0, "years"),
    (r"months?", "months", 1.0, "months"),
    (r"weeks?", "weeks", 1.0, "weeks"),
    (r"days?", "days", 1.0, "days"),
    (r"people|persons?|occupants", "persons", 1.0, "persons"),
    (r"dwellings?|flats|homes|houses", "dwellings", 1.0, "dwellings"),
    (r"steps|risers", "steps", 1.0, "steps"),
]
_UNIT_RE = [re.compile(rf"(?:{p})(?![a-z0-9²³])", re.IGNORECASE) for p, *_ in _UNITS]

_WORD_NUMBERS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUM = (
    r"(?<![\w.,/-])(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![\w]*\.\d)"
    r"|\b(?:" + "|".join(_WORD_NUMBERS) + r")\b"
)
_NUM_RE = re.compile(_NUM, re.IGNORECASE)

_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_DATE_RE = re.compile(
    rf"\b(?:\d{{1,2}}(?:st|nd|rd|th)?\s+)?(?:{_MONTHS})\s+(?:19|20)\d\d\b", re.IGNORECASE
)
_YEAR_RE = re.compile(
    r"(?<![\d,.])(?:19|20)\d\d(?![\d,]|\s*(?:mm|m\b|m²|m2|kw|w\b|%))", re.IGNORECASE
)

_LOCATOR_KINDS = {
    "table": "Table",
    "diagram": "Diagram",
    "figure": "Diagram",
    "fig": "Diagram",
    "clause": "paragraph",
    "paragraph": "paragraph",
    "para": "paragraph",
    "paras": "paragraph",
    "section": "Section",
    "sect": "Section",
    "appendix": "Appendix",
    "annex": "Appendix",
    "regulation": "Regulation",
    "reg": "Regulation",
    "schedule": "Schedule",
    "class": "Class",
}
_LOCATOR_RE = re.compile(
    r"(?i:\b(table|diagram|figure|fig|clause|paragraph|paras?|section|sect|appendix|annex|"
    r"regulation|reg|schedule|class))\.?\s+"
    r"((?:[A-Z]{1,2}\d*|\d+)(?:\.\d+)*[a-z]?)\b(?![,.]\d)"
)
_SECTION_SIGN_RE = re.compile(r"§\s*(\d+(?:\.\d+)*)")
_OTHER_REF_RE = re.compile(
    r"(?i:\b(?:volume|vol|part|note|item|article|chapter|page|p|pp|step|requirement|stage|"
    r"level|option|method|category|type|grade|zone|purpose\s+group))\.?\s+[A-Z]?\d+(?:\.\d+)*[a-z]?\b"
)
_MULTI_DOT_RE = re.compile(r"(?<![\d.])\d+\.\d+\.\d+(?:\.\d+)*\b")
_LIST_MARKER_RE = re.compile(r"(?m)^\s*\(?\d{1,2}[.)]\s")

_DOC_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bApproved\s+Document\s+([A-S])\b", re.IGNORECASE), "Approved Document {}"),
    (re.compile(r"\bAD\s?([A-S])\b"), "Approved Document {}"),
    (re.compile(r"\bPart\s+([A-S])\b(?!\s*\d)"), "Approved Document {}"),
    (
        re.compile(
            r"\b((?:BS\s+EN\s+ISO|BS\s+EN|BS\s+ISO|BS|EN|ISO|PD|PAS)\s+\d+(?:-\d+)*)(?::\d{4})?\b"
        ),
        "{}",
    ),
    (re.compile(r"\b(NHBC)\s+Standards?\b", re.IGNORECASE), "NHBC Standards"),
    (re.compile(r"\b(GPDO)\b|General\s+Permitted\s+Development\s+Order", re.IGNORECASE), "GPDO"),
    (re.compile(r"\b(CDM)(?:\s+(?:Regulations\s+)?(?:19|20)\d\d)?\b"), "CDM"),
    (re.compile(r"\b(BREEAM)\b", re.IGNORECASE), "BREEAM"),
    (re.compile(r"\b(JCT)\b"), "JCT"),
]

_FIRE_RE = re.compile(r"\b(REI|EI|RE|R|E)\s?(15|20|30|45|60|90|120|180|240)\b")
_RATIO_RE = re.compile(r"(?<![\d:])1\s*(?::|in)\s*(\d+(?:\.\d+)?)\b(?!\s*:)")

_DIRECTION_RE = re.compile(
    r"(?P<max>(?:not|no)\s+(?:be\s+)?(?:more|greater|larger|higher|wider|longer)\s+than|"
    r"not\s+(?:to\s+)?exceed(?:ing)?|(?:must|should|shall|may|does|do|will)\s+not\s+exceed|"
    r"at\s+most|up\s+to|maximum|max\b\.?|or\s+less|or\s+fewer|or\s+below|"
    r"(?<!not\s)(?<!no\s)(?<!be\s)(?:less|fewer|lower|smaller)\s+than|"
    r"below|within|limit(?:ed)?\b|cap(?:ped)?\b|≤|<=|<)"
    r"|(?P<min>(?:not|no)\s+(?:be\s+)?(?:less|fewer|smaller|lower|narrower|shorter)\s+than|"
    r"at\s+least|minimum|min\b\.?|or\s+more|or\s+greater|or\s+above|"
    r"(?<!not\s)(?<!no\s)(?<!be\s)(?:more|greater|higher|larger)\s+than|≥|>=|>)",
    re.IGNORECASE,
)
_SENTENCE_BREAK_RE = re.compile(r"[;\n]|[.!?:,](?=\s)")


@dataclass(frozen=True)
class Figure:
    """A number with its unit: value in the dimension's base unit; dim None for a bare number.

    raw: the number as written (1100.0 for "1,100 mm"); direction "min", "max" or None;
    in_range: one end of a range ("between 900 and 1000 mm", "900–1000 mm").
    """

    value: float
    raw: float
    dim: str | None
    unit: str
    direction: str | None
    in_range: bool
    start: int
    end: int
    written: str = ""

    def label(self) -> str:
        """Return the figure as text, its number as written: "1100 mm", "1,500 m²", "REI 60"."""
        number = self.written or f"{self.raw:.10g}"
        if self.dim == "ratio":
            return f"1:{number}"
        if self.unit in ("REI",):
            return f"REI {number}"
        return f"{number} {self.unit}".strip() if self.unit != "%" else f"{number}%"

    def matches(self, other: Figure) -> bool:
        """Return True when both state the same quantity (units converted; bare numbers by raw value)."""
        if self.dim and other.dim:
            return self.dim == other.dim and _close(self.value, other.value)
        return _close(self.raw, other.raw)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def _to_number(text: str) -> float:
    word = text.lower()
    if word in _WORD_NUMBERS:
        return float(_WORD_NUMBERS[word])
    return float(text.replace(",", ""))


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    chars = list(text)
    for start, end in spans:
        for i in range(start, end):
            if chars[i] != "\n":
                chars[i] = " "
    return "".join(chars)


def reference_spans(text: str) -> list[tuple[int, int]]:
    """Return spans of text that are references, dates or years, never figures."""
    spans: list[tuple[int, int]] = []
    for pattern in (
        _LOCATOR_RE,
        _SECTION_SIGN_RE,
        _OTHER_REF_RE,
        _MULTI_DOT_RE,
        _DATE_RE,
        _LIST_MARKER_RE,
    ):
        spans += [m.span() for m in pattern.finditer(text)]
    for pattern, _ in _DOC_PATTERNS:
        spans += [m.span() for m in pattern.finditer(text)]
    spans += [m.span() for m in _YEAR_RE.finditer(text)]
    return spans


def extract_figures(text: str) -> list[Figure]:
    """Return the figures in text in reading order, with ranges and limit directions resolved."""
    if not text:
        return []
    masked = _mask(text, reference_spans(text))
    found: list[Figure] = []
    taken: list[tuple[int, int]] = []

    for m in _FIRE_RE.finditer(masked):
        value = float(m.group(2))
        found.append(
            Figure(value, value, "time", "REI", None, False, m.start(), m.end(), m.group(2))
        )
        taken.append(m.span())
    for m in _RATIO_RE.finditer(masked):
        if any(s <= m.start() < e for s, e in taken):
            continue
        value = float(m.group(1))
        found.append(Figure(value, value, "ratio", "", None, False, m.start(), m.end(), m.group(1)))
        taken.append(m.span())

    for m in _NUM_RE.finditer(masked):
        if any(s <= m.start() < e for s, e in taken):
            continue
        raw = _to_number(m.group(0))
        tail = masked[m.end() :]
        spacer = re.match(r"[ \t]?-?[ \t]*", tail)
        offset = spacer.end() if spacer else 0
        dim, unit, factor, end = None, "", 1.0, m.end()
        for (_, unit_dim, unit_factor, display), unit_re in zip(_UNITS, _UNIT_RE, strict=True):
            um = unit_re.match(tail, offset)
            if um:
                dim, unit, factor, end = unit_dim, display, unit_factor, m.end() + um.end()
                break
        if dim is None and m.group(0).isalpha():
            continue  # a number word with no unit ("one of the ...") is not a figure
        found.append(Figure(raw * factor, raw, dim, unit, None, False, m.start(), end, m.group(0)))
    found.sort(key=lambda f: f.start)
    found = _resolve_ranges(masked, found)
    return [_with_direction(masked, found, i) for i in range(len(found))]


_RANGE_JOIN_RE = re.compile(r"^\s*(?:and|to|-|–|—)\s*$", re.IGNORECASE)
_LIST_JOIN_RE = re.compile(r"^\s*(?:or|,|/)\s*$", re.IGNORECASE)


def _resolve_ranges(text: str, figures: list[Figure]) -> list[Figure]:
    """Give a bare number the unit of the figure it pairs with ("900 to 1000 mm"), mark ranges."""
    out = list(figures)
    for i in range(len(out) - 1):
        first, second = out[i], out[i + 1]
        between = text[first.end : second.start]
        is_range = bool(_RANGE_JOIN_RE.match(between))
        if not (is_range or _LIST_JOIN_RE.match(between)):
            continue
        if first.dim is None and second.dim is not None:
            factor = second.value / second.raw if second.raw else 1.0
            first = replace(first, value=first.raw * factor, dim=second.dim, unit=second.unit)
        if is_range and first.dim == second.dim:
            first, second = replace(first, in_range=True), replace(second, in_range=True)
        out[i], out[i + 1] = first, second
    return out


def _with_direction(text: str, figures: list[Figure], i: int) -> Figure:
    """Attach "min"/"max" from the nearest limit phrase in the figure's own clause."""
    fig = figures[i]
    if fig.in_range:
        return fig
    left_bound = figures[i - 1].end if i > 0 else 0
    left = text[max(left_bound, fig.start - 60) : fig.start]
    breaks = list(_SENTENCE_BREAK_RE.finditer(left))
    if breaks:
        left = left[breaks[-1].end() :]
    right_bound = figures[i + 1].start if i + 1 < len(figures) else len(text)
    right = text[fig.end : min(right_bound, fig.end + 30)]
    brk = _SENTENCE_BREAK_RE.search(right)
    if brk:
        right = right[: brk.start()]
    # The nearest limit phrase wins: "18 m maximum travel distance, 4 storeys or more".
    candidates: list[tuple[int, str]] = []
    before = list(_DIRECTION_RE.finditer(left))
    if before:
        candidates.append(
            (len(left) - before[-1].end(), "max" if before[-1].group("max") else "min")
        )
    after = _DIRECTION_RE.search(right)
    if after:
        candidates.append((after.start(), "max" if after.group("max") else "min"))
    direction = min(candidates)[1] if candidates else None
    if direction is None:
        return fig
    return replace(fig, direction=direction)


@dataclass(frozen=True)
class Locator:
    """A place in a document: kind ("Table", "Diagram", "paragraph", ...) and id ("4.1")."""

    kind: str
    ident: str

    def label(self) -> str:
        """Return e.g. "Table 4.1"."""
        return f"{self.kind} {self.ident}"


def extract_locators(text: str) -> list[Locator]:
    """Return the locators named in text, in order, without repeats."""
    found: list[Locator] = []
    for m in _LOCATOR_RE.finditer(text or ""):
        kind = _LOCATOR_KINDS[m.group(1).lower().rstrip(".")]
        loc = Locator(kind, m.group(2))
        if loc not in found:
            found.append(loc)
    for m in _SECTION_SIGN_RE.finditer(text or ""):
        loc = Locator("paragraph", m.group(1))
        if loc not in found:
            found.append(loc)
    return found


def extract_documents(text: str) -> list[str]:
    """Return the documents named in text, normalised ("Approved Document B", "BS 8300"), in order."""
    hits: list[tuple[int, str]] = []
    for pattern, template in _DOC_PATTERNS:
        for m in pattern.finditer(text or ""):
            value = m.group(1) or m.group(0)
            name = template.format(re.sub(r"\s+", " ", value.upper() if len(value) == 1 else value))
            hits.append((m.start(), name))
    out: list[str] = []
    for _, name in sorted(hits):
        if name not in out:
            out.append(name)
    return out


def document_family(name: str) -> str:
    """Return the family a document belongs to, e.g. "Approved Document" or "BS"."""
    if name.startswith("Approved Document"):
        return "Approved Document"
    return name.split(" ")[0]


_YES_RE = re.compile(r"^\W*yes\b", re.IGNORECASE)
_NO_RE = re.compile(r"^\W*no\b(?!\s+(?:more|less|fewer|greater)\b)", re.IGNORECASE)
_NEG_RE = re.compile(
    r"\b(?:is\s+not|are\s+not|isn't|aren't|not|never)\s+(?:required|permitted|allowed|needed|necessary|"
    r"mandatory|acceptable)\b|\bneed\s+not\b|\bdoes\s+not\s+(?:need|require|apply)\b|"
    r"\bdo\s+not\s+(?:need|require|apply)\b|\bno\s+requirement\b|\bprohibited\b|\bnot\s+a\s+requirement\b",
    re.IGNORECASE,
)
_POS_RE = re.compile(
    r"\b(?:is|are)\s+(?:required|permitted|allowed|needed|necessary|mandatory|acceptable)\b|"
    r"\b(?:must|shall)\s+(?:be|have|provide|comply)\b|\bdoes\s+(?:need|require|apply)\b",
    re.IGNORECASE,
)
_YES_NO_QUESTION_RE = re.compile(
    r"^\W*(?:is|are|does|do|can|must|should|will|would|could|has|have|may|shall|was|were|need)\b",
    re.IGNORECASE,
)


def is_yes_no_question(question: str) -> bool:
    """Return True when the question opens like a yes/no question ("Is...", "Does...", "Can...")."""
    return bool(_YES_NO_QUESTION_RE.match(question or ""))


def polarity(text: str, *, infer: bool) -> str | None:
    """Return "yes"/"no" from a leading Yes/No; with infer, also from "(not) required"-style phrases.

    Returns None when absent or when positive and negative phrases both occur.
    """
    text = text or ""
    if _YES_RE.match(text):
        return "yes"
    if _NO_RE.match(text):
        return "no"
    if not infer:
        return None
    neg, pos = bool(_NEG_RE.search(text)), bool(_POS_RE.search(text))
    if neg and not pos:
        return "no"
    if pos and not neg:
        return "yes"
    return None


_STOPWORDS = frozenset(
    """the a an and or of to in on for by with from at as is are be been being was were it its this
    that these those which what when where who whom whose how why than then there their they them
    not no yes should must shall may can could would will does do did has have had any all each
    other such into onto under over per also only more less most least very about above below
    between within without through where whether answer question key required requirement""".split()
)
_TOKEN_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-,/.]*[A-Za-z0-9]|[A-Za-z0-9]")


def key_terms(text: str) -> list[str]:
    """Return the significant terms of a text, lowercased, in order, without repeats.

    Significant: a word of 4+ letters not in a small stop list, or any token with a
    digit or written in capitals ("MA", "REI", "B-s3,d2").
    """
    out: list[str] = []
    for tok in _TOKEN_RE.findall(text or ""):
        tok = tok.strip(".,")
        low = tok.lower()
        significant = (
            (len(low) >= 4 and low not in _STOPWORDS)
            or any(c.isdigit() for c in tok)
            or (len(tok) >= 2 and tok.isupper())
        )
        if significant:
            term = (
                low[:-1] if low.endswith("s") and len(low) > 4 and not low.endswith("ss") else low
            )
            if term not in out:
                out.append(term)
    return out


_REVOKED_RE = re.compile(
    r"\b(?:removed|revoked|repealed|abolished|withdrawn|scrapped|deleted|rescinded|superseded|"
    r"replaced|dropped|lifted|no\s+longer\s+(?:applies|apply|applicable|in\s+force|required|exists?|"
    r"has|have|a\s+requirement|in\s+place))\b",
    re.IGNORECASE,
)
_WHEN_RE = re.compile(
    rf"\b(?:(?:\d{{1,2}}(?:st|nd|rd|th)?\s+)?(?:{_MONTHS})\s+)?(?:19|20)\d\d\b", re.IGNORECASE
)
_SENTENCE_RE = re.compile(r"[^.!?\n]+(?:\.(?=\d)[^.!?\n]*)*[.!?]?")


@dataclass(frozen=True)
class RevocationClaim:
    """A sentence saying a requirement was removed/revoked/repealed, with when it happened."""

    sentence: str
    when: str
    start: int
    end: int


def revocation_claims(text: str) -> list[RevocationClaim]:
    """Return sentences that say something was removed, revoked or repealed in a named year."""
    claims: list[RevocationClaim] = []
    for m in _SENTENCE_RE.finditer(text or ""):
        sentence = m.group(0)
        if _REVOKED_RE.search(sentence):
            when = _WHEN_RE.search(sentence)
            if when:
                claims.append(RevocationClaim(sentence.strip(), when.group(0), m.start(), m.end()))
    return claims


_REFUSAL_RE = re.compile(
    r"\b(?:I\s+(?:cannot|can't|can\s+not|am\s+unable|'m\s+unable|am\s+not\s+able|'m\s+not\s+able|"
    r"do\s+not\s+have\s+access|don't\s+have\s+access|do\s+not\s+know|don't\s+know|won't)|"
    r"unable\s+to\s+(?:provide|answer|confirm)|cannot\s+(?:provide|answer)|as\s+an\s+AI\b|"
    r"I\s+(?:must|have\s+to)\s+decline|not\s+able\s+to\s+(?:provide|answer))",
    re.IGNORECASE,
)


def is_refusal(text: str) -> bool:
    """Return True when the text declines to answer ("I can't provide...", "As an AI...")."""
    return bool(_REFUSAL_RE.search(text or ""))
