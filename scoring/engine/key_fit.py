"""Models against the key: questions where strong models are marked down against their record.

Pure numpy over a :class:`~scoring.engine.table.GradeTable` (no Django). Works with one
judge or more and on any ordinal grade scale.

Method: an *ability-weighted shortfall*, a residual statistic in the spirit of Rasch
item-fit analysis (Wright & Masters 1982, *Rating Scale Analysis*, ch. 5: an item whose
observed scores fall far below what the persons' measures predict misfits), simplified so
that it needs no fitted item parameters: each model's *expected* normalised grade on a
question is its own mean normalised grade on the OTHER scored questions (its record,
leave-one-out so the question under test does not vouch for itself). A sound question
that is merely hard pulls down weak and strong models alike; a miskeyed question marks
down the models that are right, which are mostly the strongest (classical test theory's
sign of a miskeyed item, a negative item-total relation: Crocker & Algina 1986,
*Introduction to Classical and Modern Test Theory*, ch. 14). Hence the strongest half is
what is weighed.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .table import GradeTable

#: A model is "marked down here" when its normalised grade is at least this far below its
#: record: half the scale, the distance between "right" and "wrong" about the midpoint.
DEFAULT_DROP = 0.5
#: Fewest models graded on a question for the statistic to be computed (with two, one
#: model's slip is half the evidence).
DEFAULT_MIN_MODELS = 3
#: Fewest marked-down strong models for the detector to fire: one model alone is a single
#: opinion, which (like one adverse auditor, methodology rule 4) is not evidence.
DEFAULT_MIN_MARKED_DOWN = 2


@dataclass(frozen=True)
class MarkedDown:
    """A model right by its record but marked down on one question (values 0-1 of the scale)."""

    model_id: Hashable
    grade: float
    expected: float
    overall_score: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model_id,
            "grade": self.grade,
            "expected": round(self.expected, 3),
            "overall_score": round(self.overall_score, 2),
        }


@dataclass(frozen=True)
class KeyFit:
    """The shortfall of one question.

    ``shortfall`` (0-1): ability-weighted mean of max(0, expected - observed) over the
    strongest half of the models graded on the question; ``marked_down``: the models of
    that half whose grade is at least ``drop`` below their record, strongest first;
    ``fires``: at least half of the strongest half, and at least ``min_marked_down``
    models, are marked down. ``n_models`` graded models, ``n_strongest`` in the half.
    """

    question_id: Hashable
    shortfall: float
    n_models: int
    n_strongest: int
    marked_down: list[MarkedDown] = field(default_factory=list)
    fires: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "shortfall": round(self.shortfall, 3),
            "n_models": self.n_models,
            "n_strongest": self.n_strongest,
            "marked_down": [m.to_dict() for m in self.marked_down],
        }


def normalised_grades(table: GradeTable) -> np.ndarray:
    """Return one normalised grade per response, shape (Q, M), values 0-1, NaN where none.

    0 is the lowest grade of the scale and 1 the highest. Where every judge graded and
    they agree this is the agreed grade (rule 1); otherwise the mean of the judges'
    parsed grades (issue 17: "agreed grades where they exist and each judge's grades
    otherwise"), so a one-judge panel uses that judge's grades.
    """
    values = table.grade_values(table.codes)  # (Q, M, J), NaN where absent or null
    lo, span = float(table.scale[0]), float(table.scale[-1] - table.scale[0])
    norm = (values - lo) / span
    counts = np.sum(~np.isnan(norm), axis=2)
    sums = np.nansum(norm, axis=2)
    out = np.full(counts.shape, np.nan)
    np.divide(sums, counts, out=out, where=counts > 0)
    return out


def models_against_key(
    table: GradeTable,
    *,
    drop: float = DEFAULT_DROP,
    min_models: int = DEFAULT_MIN_MODELS,
    min_marked_down: int = DEFAULT_MIN_MARKED_DOWN,
) -> dict[Hashable, KeyFit]:
    """Return {question_id: KeyFit} for every scored question graded for ``min_models``+ models.

    Per question q and model m: observed g[q,m] = :func:`normalised_grades`; expected
    e[q,m] = m's mean of g over the other scored questions it was graded on (leave one
    out); overall score = m's mean of g over all scored questions, in percent (0-100).
    The strongest half = the ceil(n/2) models graded on q with the highest overall score.
    shortfall(q) = sum_{m in half} e[q,m] * max(0, e[q,m] - g[q,m]) / sum_{m in half} e[q,m]
    (weights = the expected grade, so the strongest models weigh most; 0 when every
    weight is 0). A model is marked down when e - g >= ``drop``.

    Raises ValueError when ``drop`` is not in (0, 1] or a minimum is below 1.
    """
    if not 0 < drop <= 1:
        raise ValueError(f"drop must be a fraction of the scale in (0, 1], not {drop!r}")
    if min_models < 1 or min_marked_down < 1:
        raise ValueError("min_models and min_marked_down must be at least 1")
    g = normalised_grades(table)
    scored = table.scored
    gs = np.where(scored[:, None], g, np.nan)
    have = ~np.isnan(gs)
    totals = np.nansum(gs, axis=0)  # (M,)
    counts = have.sum(axis=0)  # (M,)
    overall = np.full(totals.shape, np.nan)
    np.divide(totals, counts, out=overall, where=counts > 0)

    out: dict[Hashable, KeyFit] = {}
    for qi in np.flatnonzero(scored):
        graded = np.flatnonzero(~np.isnan(g[qi]) & (counts > 1))
        if graded.size < min_models:
            continue
        own = g[qi, graded]
        expected = (totals[graded] - own) / (counts[graded] - 1)
        n_half = (graded.size + 1) // 2
        # Strongest first; ties broken by model id order (the table's sorted order).
        order = np.lexsort((graded, -overall[graded]))[:n_half]
        e, obs = expected[order], own[order]
        weight = e.sum()
        shortfall = float((e * np.maximum(0.0, e - obs)).sum() / weight) if weight > 0 else 0.0
        down = [
            MarkedDown(
                model_id=table.model_ids[graded[i]],
                grade=float(table.scale[0] + own[i] * (table.scale[-1] - table.scale[0])),
                expected=float(expected[i]),
                overall_score=float(100 * overall[graded[i]]),
            )
            for i in order
            if expected[i] - own[i] >= drop - 1e-12
        ]
        fires = len(down) >= max(min_marked_down, (n_half + 1) // 2)
        out[table.question_ids[qi]] = KeyFit(
            question_id=table.question_ids[qi],
            shortfall=shortfall,
            n_models=int(graded.size),
            n_strongest=int(n_half),
            marked_down=down,
            fires=fires,
        )
    return out
