"""Pull the final answer out of a response or a key answer, and compare two answers.

Plain regular expressions over the figure parser the reference judge uses
(scoring.judges.figures); no Django. Used by triage's `responses_agree_against_key`
detector (issue 17 item 2), which needs no grades.

An *answer* is one of these kinds, tried in this order on a sentence:

- ``choice``: a lettered option "c)" / "(c)" / "option c", when the question lists
  lettered options;
- ``yes_no``: a leading Yes/No (figures.polarity), when the question asks yes or no;
- ``count``: a number and a noun the question itself counts ("three sisters" in the
  question makes "0 brothers" / "no brothers" / "one brother" counts of "brother");
- ``number``: the last number of the sentence: a figure with its unit (figures.extract_figures,
  units converted), a bare number, a fraction "35/36", or a percentage (as a fraction 0-1);
- ``locator``: a named clause, table or diagram (figures.extract_locators);
- ``name``: exactly one of the capitalised names the question mentions.

The sentence read is the last one with a conclusion word ("therefore", "so", "answer",
...) that yields an answer, else the last sentence that yields one. Text after a
hallucinated next turn ("### Human:") and fenced code are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .figures import extract_figures, extract_locators, is_yes_no_question, polarity

_NEXT_TURN_RE = re.compile(r"\n\s*#*\s*(?:Human|User)\s*:", re.IGNORECASE)
_CODE_RE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_LIST_MARKER_RE = re.compile(r"(?m)^[ \t]*(?:\d{1,2}[.)]|[-*\u2022])[ \t]+")
_BIG_O_RE = re.compile(r"\bO\([^)]*\)")
_CONCLUSION_RE = re.compile(
    r"\b(?:therefore|thus|hence|so|answer|in conclusion|in summary|finally|overall)\b",
    re.IGNORECASE,
)
_OPTION_IN_QUESTION_RE = re.compile(r"(?m)^\s*\(?([a-e])\)\s")
_CHOICE_RE = re.compile(r"(?:\boption\s+\(?([a-e])\b|(?<![\w(])\(?([a-e])\)(?!\w))", re.IGNORECASE)
_WORDS = (
    "no zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen twenty"
).split()
_WORD_VALUE = {w: float(max(i - 1, 0)) for i, w in enumerate(_WORDS)}
_COUNT_RE = re.compile(
    r"\b(" + "|".join(_WORDS) + r"|\d+)\s+(?:(?:more|other|additional)\s+)?([a-z]+)",
    re.IGNORECASE,
)
_FRACTION_RE = re.compile(r"(?<![\w/.])(\d+)\s*/\s*(\d+)(?![\w/]|\.\d)")
_NAME_RE = re.compile(r"\b([A-Z][a-zA-Z]+)\b")
_SENTENCE_START_RE = re.compile(r"(?:^|[.!?:]\s+|\n\s*(?:[*\-]\s*)?)$")


@dataclass(frozen=True)
class Answer:
    """A final answer: ``kind`` (see the module docstring), ``value`` to compare, ``label`` to show.

    ``value``: a float for ``number`` and ``count`` (with ``unit`` the figure's dimension
    or the counted noun), else a normalised string. ``decimals``: digits written after
    the point (a rounded 0.944 equals 17/18).
    """

    kind: str
    value: float | str
    label: str
    unit: str = ""
    decimals: int = 6

    def same_as(self, other: Answer) -> bool:
        """Return True when both give the same answer (numbers equal to the coarser precision)."""
        if self.kind != other.kind or self.unit != other.unit:
            return False
        if isinstance(self.value, float) and isinstance(other.value, float):
            tol = 0.5 * 10 ** -min(self.decimals, other.decimals)
            return abs(self.value - other.value) <= max(tol, 1e-9 * abs(self.value))
        return self.value == other.value


def _stem(word: str) -> str:
    word = word.lower()
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def _decimals(written: str) -> int:
    return len(written.split(".", 1)[1]) if "." in written else 0


_NOT_NOUNS = frozenset(
    "in on at of to for and or is are was the a an more less than times per by with".split()
)


def _counted_nouns(question: str) -> set[str]:
    return {
        _stem(m.group(2))
        for m in _COUNT_RE.finditer(question)
        if m.group(1).lower() != "no" and m.group(2).lower() not in _NOT_NOUNS
    }


def _question_names(question: str) -> set[str]:
    """Return the capitalised words of the question that do not merely open a sentence."""
    return {
        m.group(1)
        for m in _NAME_RE.finditer(question)
        if not _SENTENCE_START_RE.search(question[: m.start()])
    }


def _number(sentence: str, question: str = "", unit: str | None = None) -> Answer | None:
    """Return the last number of the sentence (figure, bare number, fraction or percentage).

    A number the question itself states (an echo of a given, "|x + 5| < 10") is passed
    over when the sentence has another.
    """
    found = _numbers(_BIG_O_RE.sub(" ", sentence))
    if unit is not None:  # the key's dimension ("" = a bare number): other figures answer else
        found = [f for f in found if f[1].unit == unit]
    if question and found:
        given = _numbers(question)
        fresh = [f for f in found if not any(f[1].same_as(g) for _, g in given)]
        found = fresh or found
    return max(found, key=lambda pair: pair[0])[1] if found else None


def _numbers(sentence: str) -> list[tuple[int, Answer]]:
    found: list[tuple[int, Answer]] = []
    for m in _FRACTION_RE.finditer(sentence):
        num, den = int(m.group(1)), int(m.group(2))
        if den:
            found.append((m.start(), Answer("number", num / den, f"{num}/{den}", "", 9)))
    masked = _FRACTION_RE.sub(lambda m: " " * len(m.group(0)), sentence)
    for f in extract_figures(masked):
        written = f.written or f"{f.raw:g}"
        if f.dim == "percent":
            found.append(
                (f.start, Answer("number", f.raw / 100, f.label(), "", _decimals(written) + 2))
            )
        elif f.dim is None and not written.isalpha():
            found.append((f.start, Answer("number", f.raw, written, "", _decimals(written))))
        elif f.dim is not None:
            found.append((f.start, Answer("number", f.value, f.label(), f.dim, 6)))
    return found


def _in_sentence(sentence: str, kind: str, question: str, unit: str | None = None) -> Answer | None:
    if kind == "choice":
        m = _CHOICE_RE.search(sentence)
        if m:
            letter = (m.group(1) or m.group(2)).lower()
            return Answer("choice", letter, f"{letter})")
        return None
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
        return _number(sentence, question, unit)
    if kind == "locator":
        locs = extract_locators(sentence)
        return Answer("locator", locs[0].label().lower(), locs[0].label()) if locs else None
    if kind == "name":
        names = {n for n in _question_names(question) if re.search(rf"\b{n}\b", sentence)}
        return Answer("name", next(iter(names)), next(iter(names))) if len(names) == 1 else None
    raise ValueError(f"unknown answer kind {kind!r}")


def answer_kinds(question: str) -> list[str]:
    """Return the answer kinds to try for a question, in order (module docstring)."""
    kinds = []
    if len(set(_OPTION_IN_QUESTION_RE.findall(question or ""))) >= 2:
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


def final_answer(
    text: str,
    *,
    question: str,
    kind: str | None = None,
    unit: str | None = None,
    strict: bool = False,
) -> Answer | None:
    """Return the final answer of ``text`` to ``question``, or None when none is found.

    ``kind`` restricts the search to one kind (pass the key's kind when reading a
    response, so both are read the same way); None tries :func:`answer_kinds` in order
    per sentence; ``unit`` (with kind "number") accepts only numbers of that dimension
    ("" = bare numbers), so "3 months" is no answer to a key in m². ``strict`` (for a key): only conclusion sentences and the last
    LAST_SENTENCES sentences are read. Raises ValueError for an unknown kind.
    """
    kinds = [kind] if kind else answer_kinds(question)
    sentences = _sentences(text)
    ordered = [s for s in reversed(sentences) if _CONCLUSION_RE.search(s)]
    tail = sentences[-LAST_SENTENCES:] if strict else sentences
    ordered += [s for s in reversed(tail) if s not in ordered]
    for sentence in ordered:
        for k in kinds:
            found = _in_sentence(sentence, k, question, unit)
            if found is not None:
                return found
    return None
