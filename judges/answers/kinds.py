"""The Answer value of the answer reader (judges.answers) and its helpers for comparing."""

from __future__ import annotations

from dataclasses import dataclass, field

UNREAD = "unread"


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
