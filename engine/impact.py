"""Per-question impact on model scores, computed incrementally (issue 18 item 4).

A model's score (rule 2, `engine.leaderboard._scores`) is 100 * P / (span * C)
over the scored questions, where P sums the counted points and C counts the counted
responses. One question adds its own (points, counted) to each model's P and C, so the
leaderboard without that question, or with that question graded against another key
entry, is P and C with the question's contribution taken out (and the other one put in):
no recomputation of the whole table per question.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

import numpy as np

from .leaderboard import _scores
from .table import GradeTable, classify_responses


@dataclass(frozen=True)
class Contributions:
    """Each scored question's contribution to each model's score sums.

    ``question_ids`` (Q,) and ``model_ids`` (M,) as in the grade table; ``points`` (Q, M)
    int64: counted (grade - scale minimum), 0 for responses not counted and for questions
    not scored; ``counted`` (Q, M) int64: 1 where the response counts (rule 1), 0
    elsewhere; ``span`` = scale maximum - minimum. The column sums are exactly the
    ``points`` and ``n_counted`` of `engine.compute_leaderboard`.
    """

    question_ids: np.ndarray
    model_ids: np.ndarray
    points: np.ndarray
    counted: np.ndarray
    span: int

    def totals(self) -> tuple[np.ndarray, np.ndarray]:
        """Return (P, C) per model, shape (M,) each."""
        return self.points.sum(axis=0), self.counted.sum(axis=0)

    def row(self, question_id: Hashable, model_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return (points, counted) of one question for `model_ids` (zeros when the question
        or a model is absent from this table)."""
        points = np.zeros(len(model_ids), dtype=np.int64)
        counted = np.zeros(len(model_ids), dtype=np.int64)
        where = np.nonzero(self.question_ids == question_id)[0]
        if where.size:
            col = {m: i for i, m in enumerate(self.model_ids.tolist())}
            for k, m in enumerate(model_ids.tolist()):
                if m in col:
                    points[k] = self.points[where[0], col[m]]
                    counted[k] = self.counted[where[0], col[m]]
        return points, counted


def contributions(table: GradeTable) -> Contributions:
    """Return each scored question's (points, counted) per model for `table`.

    Uses `classify_responses`, the leaderboard's own counting (rule 1); O(Q x M x J).
    """
    status = classify_responses(table.codes, table.scale)
    scored = table.scored[:, None]
    return Contributions(
        question_ids=table.question_ids,
        model_ids=table.model_ids,
        points=np.where(scored, status.points, 0).astype(np.int64),
        counted=np.where(scored, status.counted, 0).astype(np.int64),
        span=int(table.scale[-1] - table.scale[0]),
    )


def _as_dict(model_ids: np.ndarray, values: np.ndarray) -> dict[Hashable, float | None]:
    return {
        m: (None if np.isnan(v) else float(v))
        for m, v in zip(model_ids.tolist(), values.tolist(), strict=True)
    }


def question_effects(
    current: Contributions,
    question_ids: Iterable[Hashable],
    *,
    other: Contributions | None = None,
) -> dict[Hashable, dict[Hashable, float | None]]:
    """Return {question: {model: score change in points}} due to each question alone.

    The change of a model's score in `current` (percentage points, full precision) that
    the question's `current` grades cause compared with its grades in `other` (another
    edition's table: the question's entry there) or, without `other` or when `other`
    does not score the question, compared with the question not being scored at all:
    score(current) - score(current with the question's row replaced by `other`'s).
    So for a removal proposed against `current`, the removal moves each model by
    minus this figure. None where either score is undefined (nothing counted).
    """
    total_p, total_c = current.totals()
    now = _scores(total_p, total_c, current.span)
    out: dict[Hashable, dict[Hashable, float | None]] = {}
    for q in question_ids:
        p, c = current.row(q, current.model_ids)
        if other is not None:
            op, oc = other.row(q, current.model_ids)
        else:
            op, oc = np.zeros_like(p), np.zeros_like(c)
        then = _scores(total_p - p + op, total_c - c + oc, current.span)
        out[q] = _as_dict(current.model_ids, now - then)
    return out


def scores_without(
    current: Contributions, question_ids: Iterable[Hashable]
) -> dict[Hashable, float | None]:
    """Return {model: score in percent} with the given questions no longer scored.

    Exactly `compute_leaderboard(table.without_questions(question_ids))`'s scores, from
    the sums alone. None where nothing would be counted.
    """
    total_p, total_c = current.totals()
    drop = np.isin(current.question_ids, np.asarray(list(question_ids), dtype=object))
    p = total_p - current.points[drop].sum(axis=0)
    c = total_c - current.counted[drop].sum(axis=0)
    return _as_dict(current.model_ids, _scores(p, c, current.span))
