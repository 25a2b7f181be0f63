"""The two references scoring's reads hand around: a judge at its prompt version
(:class:`JudgeRef`) and an edition's effective key entries (:class:`EntryMap`).

Plain values (numpy arrays, no Django): scoring.selectors builds them, scoring.completeness
and scoring.board.report read them. Their own module so that completeness needs nothing of the
selectors that call it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class JudgeRef:
    """A judge (``pk``, ``judge_id``) at the prompt version whose grades count."""

    pk: int
    judge_id: str
    prompt_version: str


@dataclass(frozen=True)
class EntryMap:
    """The effective key entry of every question of an edition (arrays indexed by position).

    ``question_pk``, ``entry_pk``, ``entry_edition_pk``: int64 (N,); ``removed``: bool (N,);
    ``excluded``: bool (N,), the entry is excluded by the key audit (AuditExclusion, rule 4);
    ``scored``: bool (N,), the question is scored (`questions.selectors.scored_entries`).
    ``root_pk`` is the edition at the top of the chain (normally `original`).
    """

    edition_pk: int
    chain: list[int]
    question_pk: np.ndarray
    entry_pk: np.ndarray
    entry_edition_pk: np.ndarray
    removed: np.ndarray
    excluded: np.ndarray
    scored: np.ndarray

    @property
    def root_pk(self) -> int:
        return self.chain[-1]

    def as_dict(self) -> dict[int, int]:
        """Return {question pk: effective entry pk}."""
        return dict(zip(self.question_pk.tolist(), self.entry_pk.tolist(), strict=True))
