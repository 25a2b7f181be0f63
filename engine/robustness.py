"""Compare the ranking under two key editions and the direction of grade changes."""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ._json import fraction, percent
from .leaderboard import Leaderboard, ModelScore
from .table import GradeTable, _id_key, agreed_grades

if TYPE_CHECKING:  # pandas costs ~1 s to import: only functions that build frames load it
    import pandas as pd


@dataclass(frozen=True)
class ModelMove:
    """One model under the original and the corrected key.

    ``rank_move`` = original rank number - corrected rank number, so a positive
    value means the model moved up; None if unranked under either edition.
    """

    model_id: Hashable
    score_original: float | None
    score_corrected: float | None
    rank_original: str | None
    rank_corrected: str | None
    band_original: int | None
    band_corrected: int | None
    rank_move: int | None
    band_changed: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_id": self.model_id,
            "score_original": percent(self.score_original),
            "score_corrected": percent(self.score_corrected),
            "rank_original": self.rank_original,
            "rank_corrected": self.rank_corrected,
            "band_original": self.band_original,
            "band_corrected": self.band_corrected,
            "rank_move": self.rank_move,
            "band_changed": self.band_changed,
        }


@dataclass(frozen=True)
class Robustness:
    """The robustness report of methodology.md rule 10; ``models`` in corrected display order.

    ``top3_unchanged``: the models ranked in the top 3 (rank number <= 3, ties
    included) are the same set under both editions and each has the same rank
    string ("=2" stays "=2").  ``bottom5_unchanged``: likewise for the models
    within 5 places of the bottom (counted upwards with ties).  Both are None
    when neither edition ranks any model.  ``kendall_tau``: Kendall's tau-b
    between the two editions' scores of models scored under both (scipy), None
    if undefined.  ``band_changes``: models whose band number differs.
    """

    banding_original: str
    banding_corrected: str
    models: list[ModelMove]
    top3_unchanged: bool | None
    bottom5_unchanged: bool | None
    kendall_tau: float | None
    band_changes: list[dict[str, Any]]
    n_bands_original: int
    n_bands_corrected: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "banding_original": self.banding_original,
            "banding_corrected": self.banding_corrected,
            "top3_unchanged": self.top3_unchanged,
            "bottom5_unchanged": self.bottom5_unchanged,
            "kendall_tau": fraction(self.kendall_tau),
            "n_bands_original": self.n_bands_original,
            "n_bands_corrected": self.n_bands_corrected,
            "band_changes": [dict(c) for c in self.band_changes],
            "models": [m.to_dict() for m in self.models],
            "notes": list(self.notes),
        }


def compare_leaderboards(
    original: Leaderboard, corrected: Leaderboard, *, top: int = 3, bottom: int = 5
) -> Robustness:
    """Compare each model's rank and band under the original and the corrected key.

    Methodology.md rule 10: did the top ``top`` and the bottom ``bottom`` move
    (see :class:`Robustness` for the exact definition, which counts ties),
    how far did each model move, which band changes happened, plus Kendall's
    tau-b (scipy.stats.kendalltau) between the two score vectors.  Models
    present in only one leaderboard are listed with None on the other side.
    A note warns when the two leaderboards use different bandings.
    """
    from scipy.stats import kendalltau

    a = {m.model_id: m for m in original.models}
    b = {m.model_id: m for m in corrected.models}
    order = [m.model_id for m in corrected.models] + [
        m for m in (x.model_id for x in original.models) if m not in b
    ]
    moves: list[ModelMove] = []
    changes: list[dict[str, Any]] = []
    for model_id in order:
        ra, rb = a.get(model_id), b.get(model_id)
        band_a = ra.band if ra else None
        band_b = rb.band if rb else None
        rank_move = (
            ra.rank_number - rb.rank_number
            if ra and rb and ra.rank_number is not None and rb.rank_number is not None
            else None
        )
        changed = band_a != band_b
        moves.append(
            ModelMove(
                model_id=model_id,
                score_original=ra.score if ra else None,
                score_corrected=rb.score if rb else None,
                rank_original=ra.rank if ra else None,
                rank_corrected=rb.rank if rb else None,
                band_original=band_a,
                band_corrected=band_b,
                rank_move=rank_move,
                band_changed=changed,
            )
        )
        if changed:
            changes.append(
                {"model_id": model_id, "band_original": band_a, "band_corrected": band_b}
            )

    notes: list[str] = []
    if original.banding != corrected.banding:
        notes.append(
            f"bandings differ (original {original.banding}, corrected {corrected.banding}): "
            "band changes compare unlike bands"
        )
    common = [
        m for m in order if m in a and m in b and a[m].score is not None and b[m].score is not None
    ]
    tau: float | None = None
    if len(common) >= 2:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            result = kendalltau([a[m].score for m in common], [b[m].score for m in common])
        stat = float(result.statistic)
        tau = stat if math.isfinite(stat) else None
    if tau is None:
        notes.append(
            "Kendall's tau undefined: fewer than two models scored under both, or constant scores"
        )
    return Robustness(
        banding_original=original.banding,
        banding_corrected=corrected.banding,
        models=moves,
        top3_unchanged=_end_unchanged(original.models, corrected.models, top, from_top=True),
        bottom5_unchanged=_end_unchanged(original.models, corrected.models, bottom, from_top=False),
        kendall_tau=tau,
        band_changes=changes,
        n_bands_original=original.n_bands,
        n_bands_corrected=corrected.n_bands,
        notes=notes,
    )


def _end_group(rows: list[ModelScore], k: int, *, from_top: bool) -> dict[Hashable, str]:
    """Return {model_id: rank} of the models within ``k`` places of one end (ties included)."""
    ranked = [r for r in rows if r.rank_number is not None]
    if from_top:
        return {r.model_id: r.rank for r in ranked if r.rank_number <= k}  # type: ignore[misc, operator]
    # Places from the bottom: 1 + number of models ranked strictly below.
    out: dict[Hashable, str] = {}
    for r in ranked:
        below = sum(1 for x in ranked if x.rank_number > r.rank_number)  # type: ignore[operator]
        if below + 1 <= k:
            out[r.model_id] = r.rank  # type: ignore[assignment]
    return out


def _end_unchanged(
    a: list[ModelScore], b: list[ModelScore], k: int, *, from_top: bool
) -> bool | None:
    ga = _end_group(a, k, from_top=from_top)
    gb = _end_group(b, k, from_top=from_top)
    if not ga and not gb:
        return None
    return ga == gb


@dataclass(frozen=True)
class GradeChange:
    """How the agreed grades of one question's responses moved after a correction.

    ``up``/``down``/``same``: responses with an agreed grade both before and
    after, whose grade rose / fell / stayed.  ``not_comparable``: responses
    without an agreed grade on one side (disagreement, null, not yet graded), split
    into ``newly_counted`` (no agreed grade before, one now: a correction can turn a
    disagreement into agreement, which rule 11 wants seen), ``no_longer_counted``
    (the reverse) and ``neither_counted``; the three add up to ``not_comparable``.
    """

    question_id: Hashable
    up: int
    down: int
    same: int
    not_comparable: int
    newly_counted: int = 0
    no_longer_counted: int = 0

    @property
    def neither_counted(self) -> int:
        return self.not_comparable - self.newly_counted - self.no_longer_counted

    def to_dict(self) -> dict[str, Any]:
        return {
            "question_id": self.question_id,
            "up": self.up,
            "down": self.down,
            "same": self.same,
            "not_comparable": self.not_comparable,
            "newly_counted": self.newly_counted,
            "no_longer_counted": self.no_longer_counted,
            "neither_counted": self.neither_counted,
        }


GradeMap = Mapping[tuple[Hashable, Hashable], "int | float | None"]


def grade_changes(
    before: GradeMap | GradeTable | pd.DataFrame,
    after: GradeMap | GradeTable | pd.DataFrame,
    *,
    question_ids: list[Hashable] | None = None,
) -> list[GradeChange]:
    """Count, per question, the responses whose agreed grade went up, down or stayed.

    Methodology.md rule 11 (direction of error).  ``before``/``after``: the agreed
    grade per response as {(question_id, model_id): grade or None}, a
    :class:`GradeTable` (its agreed grades, see ``agreed_grades``), or a
    DataFrame with columns question_id, model_id, grade (NaN/None = no agreed
    grade).  The responses compared are those in either map (one missing from a
    map is not counted there: an edition that excludes or removes its question
    leaves it out); questions are ``question_ids`` if given (each listed, even
    with zero responses), else every question in either map, sorted by id.

    Raises ValueError for a DataFrame without the needed columns.
    """
    b = _grade_map(before)
    a = _grade_map(after)
    wanted = None if question_ids is None else set(question_ids)
    counts: dict[Hashable, list[int]] = {q: [0] * 6 for q in (question_ids or [])}
    for q, m in list(a) + [key for key in b if key not in a]:
        if wanted is not None and q not in wanted:
            continue
        row = counts.setdefault(q, [0] * 6)
        g_before, g_after = b.get((q, m)), a.get((q, m))
        if _missing(g_before) or _missing(g_after):
            row[3] += 1
            if not _missing(g_after):
                row[4] += 1  # newly counted
            elif not _missing(g_before):
                row[5] += 1  # no longer counted
        elif g_after > g_before:  # type: ignore[operator]
            row[0] += 1
        elif g_after < g_before:  # type: ignore[operator]
            row[1] += 1
        else:
            row[2] += 1
    return [GradeChange(q, *counts[q]) for q in sorted(counts, key=_id_key)]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _grade_map(
    source: GradeMap | GradeTable | pd.DataFrame,
) -> dict[tuple[Hashable, Hashable], Any]:
    import pandas as pd

    if isinstance(source, GradeTable):
        return agreed_grades(source)
    if isinstance(source, pd.DataFrame):
        need = {"question_id", "model_id", "grade"}
        if need - set(source.columns):
            raise ValueError(f"grade frame lacks column(s): {sorted(need - set(source.columns))}")
        grades = source["grade"].astype(object).where(source["grade"].notna(), None)
        return {
            (q, m): g
            for q, m, g in zip(source["question_id"], source["model_id"], grades, strict=True)
        }
    return dict(source)
