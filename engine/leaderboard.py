"""Model scores, intervals, ranks and bands for one key edition."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._json import fraction, percent
from .bands import (
    BANDINGS,
    DEFAULT_BAND_GAP,
    Banding,
    Placement,
    assign_bands,
    assign_bands_ci_overlap,
    established_tiers,
)
from .intervals import bootstrap_score_intervals, two_sided_z, wilson_interval
from .support import NeighbourComparison, gap_warning, paired_neighbour_comparisons, shared_ranks
from .table import GradeTable, _id_key, classify_responses

#: An interval narrower than this (percentage points) is degenerate.
_DEGENERATE_WIDTH = 1e-9


@dataclass(frozen=True)
class CategoryScore:
    """One model's figures within one question category (same rules as the overall score)."""

    category: Hashable | None
    score: float | None
    n_counted: int
    n_excluded_disagreement: int
    n_unparsed: int
    n_missing_grade: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "score": percent(self.score),
            "n_counted": self.n_counted,
            "n_excluded_disagreement": self.n_excluded_disagreement,
            "n_unparsed": self.n_unparsed,
            "n_missing_grade": self.n_missing_grade,
        }


@dataclass(frozen=True)
class ModelScore:
    """One model's row of the leaderboard.

    ``score``, ``ci_low``, ``ci_high`` are percentages (0-100), full precision;
    None when the model has no counted response.  ``ci_method`` is
    ``"bootstrap"`` or ``"wilson"`` (fallback when the bootstrap interval has
    zero width), None without a score.  ``agreement_rate`` is a fraction (0-1),
    None with fewer than two judges or nothing graded by all judges.
    ``points`` is the exact sum of counted (grade - scale minimum).  ``tier`` is the
    model's place in the order the data establish (bands merged across boundaries the
    paired comparison does not support: ``bands.established_tiers``), None without a score.
    """

    model_id: Hashable
    score: float | None
    n_counted: int
    n_excluded_disagreement: int
    n_unparsed: int
    n_missing_grade: int
    points: int
    ci_low: float | None
    ci_high: float | None
    ci_method: str | None
    band: int | None
    rank: str | None
    rank_number: int | None
    agreement_rate: float | None
    categories: list[CategoryScore] = field(default_factory=list)
    few_counted: bool = False
    tier: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_id": self.model_id,
            "score": percent(self.score),
            "n_counted": self.n_counted,
            "n_excluded_disagreement": self.n_excluded_disagreement,
            "n_unparsed": self.n_unparsed,
            "n_missing_grade": self.n_missing_grade,
            "ci_low": percent(self.ci_low),
            "ci_high": percent(self.ci_high),
            "ci_method": self.ci_method,
            "band": self.band,
            "rank": self.rank,
            "rank_number": self.rank_number,
            "agreement_rate": fraction(self.agreement_rate),
            "few_counted": self.few_counted,
            "tier": self.tier,
            "categories": [c.to_dict() for c in self.categories],
        }


@dataclass(frozen=True)
class Leaderboard:
    """Scores, intervals, ranks and bands of every model; ``models`` in display order.

    Display order: score descending, then model id; models without a counted
    response come last, with no score, band or rank.  ``banding`` says how
    ``band`` was cut: ``"gap"`` (rule 9, ``band_gap`` percentage points) or
    ``"ci_overlap"`` (interval overlap with the band leader).  ``agreement_rate``
    is agreed / graded by every judge over all scored responses (rule 1), a
    fraction; None with one judge.  ``responses_*`` count responses to scored
    questions that have at least one grade row.
    """

    band_gap: float
    banding: str
    agreement_rate: float | None
    n_bands: int
    models: list[ModelScore]
    judges: list[Hashable]
    scale: list[int]
    n_bootstrap: int
    seed: int | None
    confidence: float
    questions_scored: int
    responses_total: int
    responses_counted: int
    responses_excluded_disagreement: int
    responses_unparsed: int
    responses_missing_grade: int
    notes: list[str] = field(default_factory=list)
    min_counted: int = 0
    neighbours: list[NeighbourComparison] = field(default_factory=list)
    gap_warning: str | None = None
    #: notes of the last placement (few-counted ties), replaced on re-banding
    placement_notes: list[str] = field(default_factory=list)
    #: tiers of bands.established_tiers: bands merged where the data do not support a cut
    n_tiers: int = 0

    def model(self, model_id: Hashable) -> ModelScore:
        """Return the row of ``model_id``; KeyError if absent."""
        for row in self.models:
            if row.model_id == model_id:
                return row
        raise KeyError(model_id)

    def with_banding(self, banding: Banding, *, band_gap: float | None = None) -> Leaderboard:
        """Return a copy re-banded with ``banding`` (intervals and scores are reused)."""
        gap = self.band_gap if band_gap is None else band_gap
        placements = _band(self.models, banding, gap)
        return _apply_placements(
            dataclasses.replace(self, band_gap=gap, banding=banding), self.models, placements
        )

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-safe values with the keys of cli.md ``leaderboard --format json``."""
        return {
            "band_gap": self.band_gap,
            "banding": self.banding,
            "agreement_rate": fraction(self.agreement_rate),
            "n_bands": self.n_bands,
            "judges": list(self.judges),
            "scale": list(self.scale),
            "n_bootstrap": self.n_bootstrap,
            "seed": self.seed,
            "confidence": self.confidence,
            "questions_scored": self.questions_scored,
            "responses_total": self.responses_total,
            "responses_counted": self.responses_counted,
            "responses_excluded_disagreement": self.responses_excluded_disagreement,
            "responses_unparsed": self.responses_unparsed,
            "responses_missing_grade": self.responses_missing_grade,
            "min_counted": self.min_counted,
            "neighbours": [c.to_dict() for c in self.neighbours],
            "band_boundaries": sum(1 for c in self.neighbours if c.band_boundary),
            "band_boundaries_supported": sum(
                1 for c in self.neighbours if c.band_boundary and c.supported
            ),
            "n_tiers": self.n_tiers,
            "gap_warning": self.gap_warning,
            "notes": list(self.notes)
            + list(self.placement_notes)
            + ([self.gap_warning] if self.gap_warning else []),
            "models": [m.to_dict() for m in self.models],
        }


def _scores(points: np.ndarray, counted: np.ndarray, span: int) -> np.ndarray:
    """Rule 2 per model: 100 * points / (span * counted), NaN where nothing is counted."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counted > 0, 100.0 * points / (span * np.maximum(counted, 1)), np.nan)


def model_scores(table: GradeTable) -> dict[Hashable, float]:
    """Return {model_id: score in percent 0-100} over the table's scored questions.

    The same figure as ``compute_leaderboard(...).models[i].score`` (rules 1 and 2, same
    formula and counting: a response counts only when every judge gives the same grade;
    with one judge every graded response counts; score = 100 * sum(grade - min) /
    ((max - min) * n_counted)), without intervals, ranks or bands. Models with no counted
    response are absent. No randomness; O(Q x M x J).
    """
    status = classify_responses(table.scored_codes(), table.scale)
    span = int(table.scale[-1] - table.scale[0])
    counted = status.counted.sum(axis=0)
    score = _scores(status.points.sum(axis=0), counted, span)
    return {
        model_id: float(score[i]) for i, model_id in enumerate(table.model_ids) if counted[i] > 0
    }


def compute_leaderboard(
    table: GradeTable,
    *,
    band_gap: float = DEFAULT_BAND_GAP,
    banding: Banding = "gap",
    n_bootstrap: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
    min_counted: int = 0,
) -> Leaderboard:
    """Score every model on the scored questions, with intervals, ranks and bands.

    Beside the bands (engine.support): ``neighbours``, a paired bootstrap of
    per-question differences between each two models next in the order (Miller 2024,
    arXiv 2411.00640), marking whether each band boundary is supported; ``gap_warning``
    when the band gap is far below the intervals' width; a model with fewer than
    ``min_counted`` counted responses is ``few_counted`` and shares its rank with the
    models below it whose interval overlaps its own (0: no model is few-counted), and a
    neighbour comparison over fewer than ``min_counted`` paired questions is not tested.

    Rules (methodology.md): a response counts only when every judge gives the
    same grade (rule 1; disagreements are excluded, null grades are counted as
    ``n_unparsed``, never as 0).  Score = 100 * sum(grade - min) /
    ((max - min) * n_counted) — rule 2's sum / (2 x counted) generalised to any
    ordinal scale, so the lowest grade is 0% and the highest 100% (identical to
    rule 2 on [0, 1, 2]; on 1..10 a 1 is 0% and a 10 is 100%).  Only questions
    with status "scored" count (rules 4-5).  With one judge every graded
    response counts and the agreement rate is None.

    Intervals: seeded percentile bootstrap over questions (``n_bootstrap``
    resamples, ``confidence`` level, ``seed`` for numpy's default_rng — None
    draws fresh entropy, so only an int seed is reproducible); a model whose bootstrap interval has zero
    width, or every model when ``n_bootstrap`` is 0, gets the Wilson (1927)
    score interval on its proportion of points instead (``ci_method``).
    Bands: rule 9 gap rule (``banding="gap"``) or interval overlap
    (``"ci_overlap"``), see :mod:`engine.bands`.

    Raises ValueError for an unknown banding, a negative band gap, a negative
    n_bootstrap or a confidence outside (0, 1).
    """
    _check_options(banding, n_bootstrap, confidence, band_gap)

    codes = table.scored_codes()
    status = classify_responses(codes, table.scale)
    span = int(table.scale[-1] - table.scale[0])

    counted = status.counted.sum(axis=0)
    disagreement = status.disagreement.sum(axis=0)
    unparsed = status.unparsed.sum(axis=0)
    missing = status.missing_grade.sum(axis=0)
    points = status.points.sum(axis=0)
    score = _scores(points, counted, span)

    low, high, methods, wilson_models = _intervals(
        table, status, points, counted, span, n_bootstrap, seed, confidence
    )

    categories = _category_scores(table, status, span)

    rows = _model_rows(
        table,
        (counted, disagreement, unparsed, missing, points, score),
        (low, high, methods),
        categories,
    )

    agreement, notes = _agreement_and_notes(
        table, counted, disagreement, n_bootstrap, wilson_models
    )

    board = Leaderboard(
        band_gap=float(band_gap),
        banding=banding,
        agreement_rate=agreement,
        n_bands=0,
        models=rows,
        judges=list(table.judge_ids),
        scale=[int(v) for v in table.scale],
        n_bootstrap=int(n_bootstrap),
        seed=seed,
        confidence=float(confidence),
        questions_scored=int(codes.shape[0]),
        responses_total=int(status.present.sum()),
        responses_counted=int(counted.sum()),
        responses_excluded_disagreement=int(disagreement.sum()),
        responses_unparsed=int(unparsed.sum()),
        responses_missing_grade=int(missing.sum()),
        notes=notes,
        min_counted=int(min_counted),
    )
    board = _apply_placements(board, rows, _band(rows, banding, band_gap))
    return _with_neighbours(board, table, status, span, n_bootstrap, seed, confidence, min_counted)


def _model_rows(table, counts, intervals, categories):
    """Return one ModelScore per model of `table`, without band or rank.

    `counts`: per-model arrays (counted, disagreement, unparsed, missing, points, score);
    `intervals`: (low, high, methods) per model; `categories`: per-model category scores.
    """
    counted, disagreement, unparsed, missing, points, score = counts
    low, high, methods = intervals
    rows: list[ModelScore] = []
    for i, model_id in enumerate(table.model_ids):
        graded_all = int(counted[i] + disagreement[i])
        rows.append(
            ModelScore(
                model_id=model_id,
                score=None if counted[i] == 0 else float(score[i]),
                n_counted=int(counted[i]),
                n_excluded_disagreement=int(disagreement[i]),
                n_unparsed=int(unparsed[i]),
                n_missing_grade=int(missing[i]),
                points=int(points[i]),
                ci_low=None if np.isnan(low[i]) else float(low[i]),
                ci_high=None if np.isnan(high[i]) else float(high[i]),
                ci_method=methods[i],
                band=None,
                rank=None,
                rank_number=None,
                agreement_rate=(
                    counted[i] / graded_all if table.n_judges >= 2 and graded_all > 0 else None
                ),
                categories=categories[i],
            )
        )
    return rows


def _with_neighbours(board, table, status, span, n_bootstrap, seed, confidence, min_counted):
    """Add the paired comparisons of neighbouring models and mark the band boundaries."""
    index = {m: i for i, m in enumerate(table.model_ids)}
    order = [index[r.model_id] for r in board.models if r.score is not None]
    neighbours = paired_neighbour_comparisons(
        status.points / span,
        status.counted,
        order,
        list(table.model_ids),
        n_bootstrap=n_bootstrap,
        seed=seed,
        confidence=confidence,
        min_questions=min_counted,
    )
    return _mark_boundaries(dataclasses.replace(board, neighbours=neighbours))


def _check_options(banding: str, n_bootstrap: int, confidence: float, band_gap: float) -> None:
    """Raise ValueError for an option compute_leaderboard cannot use (see its docstring)."""
    if banding not in BANDINGS:
        raise ValueError(f"banding must be one of {BANDINGS}, got {banding!r}")
    if n_bootstrap < 0:
        raise ValueError(f"n_bootstrap must be >= 0, got {n_bootstrap!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if not (band_gap >= 0) or band_gap == float("inf"):
        raise ValueError(f"band gap must be a finite number >= 0, got {band_gap!r}")


def _intervals(
    table: GradeTable,
    status: Any,
    points: np.ndarray,
    counted: np.ndarray,
    span: int,
    n_bootstrap: int,
    seed: int | None,
    confidence: float,
) -> tuple[np.ndarray, np.ndarray, list[str | None], list[Hashable]]:
    """Return (low, high, method per model, models given Wilson) for compute_leaderboard."""
    z = two_sided_z(confidence)
    low = np.full(len(table.model_ids), np.nan)
    high = low.copy()
    if n_bootstrap > 0:
        low, high = bootstrap_score_intervals(
            status.points / span,
            status.counted,
            n_bootstrap=n_bootstrap,
            seed=seed,
            confidence=confidence,
        )
    methods: list[str | None] = []
    wilson_models: list[Hashable] = []
    for i, model_id in enumerate(table.model_ids):
        if counted[i] == 0:
            methods.append(None)
            low[i] = high[i] = np.nan
            continue
        if np.isnan(low[i]) or high[i] - low[i] <= _DEGENERATE_WIDTH:
            lo, hi = wilson_interval(points[i] / span, float(counted[i]), z)
            low[i], high[i] = 100.0 * lo, 100.0 * hi
            methods.append("wilson")
            wilson_models.append(model_id)
        else:
            methods.append("bootstrap")
    return low, high, methods, wilson_models


def _agreement_and_notes(
    table: GradeTable,
    counted: np.ndarray,
    disagreement: np.ndarray,
    n_bootstrap: int,
    wilson_models: list[Hashable],
) -> tuple[float | None, list[str]]:
    """Return (agreement rate or None, notes) for compute_leaderboard."""
    notes: list[str] = []
    total_counted = int(counted.sum())
    total_graded = total_counted + int(disagreement.sum())
    if table.n_judges < 2:
        notes.append("one judge only: every graded response counts; agreement needs two judges")
        agreement = None
    elif total_graded == 0:
        notes.append("no response was graded by every judge: agreement rate undefined")
        agreement = None
    else:
        agreement = total_counted / total_graded
    unscored = [m for m, n in zip(table.model_ids, counted, strict=True) if n == 0]
    if unscored:
        notes.append(
            "no counted response, so no score, band or rank: "
            + ", ".join(str(m) for m in sorted(unscored, key=_id_key))
        )
    if wilson_models:
        why = "no bootstrap requested" if n_bootstrap == 0 else "bootstrap interval of zero width"
        notes.append(
            f"Wilson score interval used ({why}): "
            + ", ".join(str(m) for m in sorted(wilson_models, key=_id_key))
        )
    return agreement, notes


# ---------------------------------------------------------------------- helpers
def _band(rows: list[ModelScore], banding: str, gap: float) -> list[Placement]:
    scores = {r.model_id: r.score for r in rows}
    if banding == "gap":
        return assign_bands(scores, gap)
    if banding == "ci_overlap":
        intervals = {
            r.model_id: (r.ci_low, r.ci_high)
            if r.ci_low is not None and r.ci_high is not None
            else None
            for r in rows
        }
        return assign_bands_ci_overlap(scores, intervals)  # type: ignore[arg-type]
    raise ValueError(f"banding must be one of {BANDINGS}, got {banding!r}")


def _apply_placements(
    board: Leaderboard, rows: list[ModelScore], placements: list[Placement]
) -> Leaderboard:
    by_id = {r.model_id: r for r in rows}
    ordered = [
        dataclasses.replace(by_id[p.model_id], band=p.band, rank=p.rank, rank_number=p.rank_number)
        for p in placements
    ]
    n_bands = len({p.band for p in placements if p.band is not None})
    ordered = [dataclasses.replace(r, few_counted=r.n_counted < board.min_counted) for r in ordered]
    scored = [r for r in ordered if r.score is not None]
    changed, placement_notes = shared_ranks(
        [r.model_id for r in scored],
        {r.model_id: r.rank_number for r in scored},  # type: ignore[misc]
        {r.model_id: r.n_counted for r in scored},
        {
            r.model_id: (r.ci_low, r.ci_high)
            if r.ci_low is not None and r.ci_high is not None
            else None
            for r in scored
        },
        board.min_counted,
    )
    ordered = [
        dataclasses.replace(r, rank=changed[r.model_id][0], rank_number=changed[r.model_id][1])
        if r.model_id in changed
        else r
        for r in ordered
    ]
    board = dataclasses.replace(
        board, models=ordered, n_bands=n_bands, placement_notes=placement_notes
    )
    return _mark_boundaries(board)


def _mark_boundaries(board: Leaderboard) -> Leaderboard:
    """Mark which neighbour comparisons are band boundaries; set the tiers and gap warning."""
    band = {r.model_id: r.band for r in board.models}
    neighbours = [
        dataclasses.replace(c, band_boundary=band.get(c.above) != band.get(c.below))
        for c in board.neighbours
    ]
    scored = [r for r in board.models if r.score is not None]
    tiers = established_tiers(
        [r.model_id for r in scored],
        band,
        {r.model_id: r.rank_number for r in scored},
        {(c.above, c.below): c.supported for c in neighbours},
        {r.model_id for r in scored if r.few_counted},
    )
    models = [dataclasses.replace(r, tier=tiers.get(r.model_id)) for r in board.models]
    widths = [
        r.ci_high - r.ci_low
        for r in board.models
        if r.ci_low is not None and r.ci_high is not None and r.score is not None
    ]
    warning = (
        gap_warning(board.band_gap, widths, board.confidence) if board.banding == "gap" else None
    )
    return dataclasses.replace(
        board,
        models=models,
        neighbours=neighbours,
        gap_warning=warning,
        n_tiers=len(set(tiers.values())),
    )


def _category_scores(table: GradeTable, status: Any, span: int) -> list[list[CategoryScore]]:
    cats = table.categories[table.scored]
    labels = sorted({c for c in cats if c is not None}, key=_id_key)
    if any(c is None for c in cats):
        labels.append(None)
    if not labels or (labels == [None]):
        return [[] for _ in table.model_ids]
    index = {c: i for i, c in enumerate(labels)}
    onehot = np.zeros((len(labels), len(cats)))
    onehot[[index[c] for c in cats], np.arange(len(cats))] = 1.0
    stacked = np.concatenate(
        [status.counted, status.disagreement, status.unparsed, status.missing_grade, status.points],
        axis=1,
    ).astype(np.float64)
    sums = np.rint(onehot @ stacked).astype(np.int64)  # (C, 5M)
    m = len(table.model_ids)
    out: list[list[CategoryScore]] = []
    for i in range(m):
        row = []
        for c, label in enumerate(labels):
            n, d, u, g, p = (int(sums[c, k * m + i]) for k in range(5))
            row.append(
                CategoryScore(
                    category=label,
                    score=100.0 * p / (span * n) if n else None,
                    n_counted=n,
                    n_excluded_disagreement=d,
                    n_unparsed=u,
                    n_missing_grade=g,
                )
            )
        out.append(row)
    return out
