"""What the data supports about an order of models: paired neighbour comparisons, a
warning when the band gap is far below the intervals' width, and shared ranks for models
with few counted responses.

The gap rule of methodology.md rule 9 stays the default banding (it is the method being
reproduced); this module says, beside it, which of its boundaries the data supports.

Paired comparison (Miller 2024, "Adding Error Bars to Evals: A Statistical Approach to
Language Model Evaluations", arXiv 2411.00640, section on paired differences): two models
answered the same questions, so their difference is estimated from per-question
differences d_q = 100 * (p_above,q - p_below,q) over the questions where both responses
are counted (p = counted grade as a fraction of the scale range), which removes the
between-question variance both share. The interval is a percentile bootstrap over those
questions (resampling questions with replacement, the mean of d per resample). A
boundary is *supported* when the interval's lower end is above 0.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._json import percent

#: The band gap is "far below" the intervals when it is less than this share of the
#: median interval width.
GAP_WARNING_RATIO = 0.25


@dataclass(frozen=True)
class NeighbourComparison:
    """A paired comparison of two models next to each other in the display order.

    ``difference``, ``ci_low``, ``ci_high``: percentage points, mean of per-question
    differences (above - below) and its percentile bootstrap interval; None when no
    question has both responses counted (``n_questions`` 0) or, for the interval, without
    bootstrap or with too few paired questions. ``supported``: ci_low > 0, None when the interval is None.
    ``band_boundary``: the two models are in different bands.
    """

    above: Hashable
    below: Hashable
    n_questions: int
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    supported: bool | None
    band_boundary: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "above": self.above,
            "below": self.below,
            "n_questions": self.n_questions,
            "difference": percent(self.difference),
            "ci_low": percent(self.ci_low),
            "ci_high": percent(self.ci_high),
            "supported": self.supported,
            "band_boundary": self.band_boundary,
        }


def paired_neighbour_comparisons(
    points: np.ndarray,
    counted: np.ndarray,
    order: Sequence[int],
    model_ids: Sequence[Hashable],
    *,
    n_bootstrap: int,
    seed: int | None,
    confidence: float,
    min_questions: int = 2,
) -> list[NeighbourComparison]:
    """Compare each pair of neighbours in `order` on the questions both have counted.

    `points` (Q, M): counted points as a fraction of the scale range (0-1), 0 where not
    counted; `counted` (Q, M) bool; `order`: model column indices, best first (scored
    models only); `model_ids` (M,). Comparison k draws from
    ``numpy.random.default_rng([seed, k])`` (fresh entropy when `seed` is None) B =
    `n_bootstrap` resamples of its questions; the interval is the ((1-confidence)/2,
    (1+confidence)/2) percentiles of the resampled means (numpy linear interpolation).
    With fewer than `min_questions` paired questions (at least 2) there is no interval
    and `supported` is None: a bootstrap of a handful of questions says nothing.
    Method: see the module docstring (Miller 2024, arXiv 2411.00640).
    """
    out: list[NeighbourComparison] = []
    alpha = (1 - confidence) / 2
    for k, (i, j) in enumerate(zip(order[:-1], order[1:], strict=True)):
        both = counted[:, i].astype(bool) & counted[:, j].astype(bool)
        d = 100.0 * (points[both, i] - points[both, j])
        n = int(d.size)
        if n == 0:
            out.append(NeighbourComparison(model_ids[i], model_ids[j], 0, None, None, None, None))
            continue
        low = high = None
        if n_bootstrap > 0 and n >= max(2, min_questions):
            rng = np.random.default_rng(None if seed is None else [seed, k])
            means = d[rng.integers(0, n, size=(n_bootstrap, n))].mean(axis=1)
            low, high = (float(v) for v in np.percentile(means, [100 * alpha, 100 * (1 - alpha)]))
        out.append(
            NeighbourComparison(
                above=model_ids[i],
                below=model_ids[j],
                n_questions=n,
                difference=float(d.mean()),
                ci_low=low,
                ci_high=high,
                supported=None if low is None else bool(low > 0),
            )
        )
    return out


def gap_warning(band_gap: float, widths: Sequence[float], confidence: float) -> str | None:
    """Return a plain warning when `band_gap` < GAP_WARNING_RATIO x the median interval width.

    `widths`: the scored models' interval widths (ci_high - ci_low), percentage points.
    None when there is no width or the gap is not far below it.
    """
    if not len(widths):
        return None
    median = float(np.median(np.asarray(widths, dtype=float)))
    if band_gap >= GAP_WARNING_RATIO * median:
        return None
    return (
        f"The band gap ({band_gap:g} points) is far below the width of the models' "
        f"{confidence:.0%} intervals (median {median:.1f} points): neighbouring bands mostly "
        "differ by less than the data can tell apart; see which band boundaries the paired "
        "comparison supports"
    )


def shared_ranks(
    order: Sequence[Hashable],
    rank_numbers: dict[Hashable, int],
    n_counted: dict[Hashable, int],
    intervals: dict[Hashable, tuple[float, float] | None],
    min_counted: int,
) -> tuple[dict[Hashable, tuple[str, int]], list[str]]:
    """Tie a model with fewer than `min_counted` counted responses with those below it
    whose interval overlaps its own, so it is never ranked alone above them.

    `order`: scored models, best first; `rank_numbers`: their competition rank numbers
    (tied models share one); `intervals`: (low, high) in percent. A few-counted model at
    position i and the lowest model j > i whose interval overlaps its own make positions
    i..j one tie group (merged with existing ties and with other such groups), ranked
    "=p" with p the rank number at the group's top; models after it keep their competition
    rank numbers. Returns ({model: (rank, rank_number)} for every member of a tie group,
    notes naming each few-counted model that caused a tie).
    """
    n = len(order)
    end = list(range(n))
    notes: list[str] = []
    for i, m in enumerate(order):
        if n_counted.get(m, 0) >= min_counted or intervals.get(m) is None:
            continue
        lo, hi = intervals[m]  # type: ignore[misc]
        overlapping = [
            j
            for j in range(i + 1, n)
            if intervals.get(order[j]) is not None
            and intervals[order[j]][0] <= hi  # type: ignore[index]
            and intervals[order[j]][1] >= lo  # type: ignore[index]
        ]
        if overlapping:
            end[i] = max(overlapping)
            notes.append(
                f"{m}: {n_counted.get(m, 0)} counted response"
                f"{'' if n_counted.get(m, 0) == 1 else 's'}, fewer than {min_counted}: "
                f"shares its rank with {', '.join(str(order[j]) for j in overlapping)} "
                "(their intervals overlap its own)"
            )
    for i in range(n - 1):  # existing ties belong to the group too
        if rank_numbers[order[i]] == rank_numbers[order[i + 1]]:
            end[i] = max(end[i], i + 1)
    changed: dict[Hashable, tuple[str, int]] = {}
    start = 0
    while start < n:
        stop = end[start]
        k = start
        while k <= stop:
            stop = max(stop, end[k])
            k += 1
        if stop > start:
            top = rank_numbers[order[start]]
            for m in order[start : stop + 1]:
                changed[m] = (f"={top}", top)
        start = stop + 1
    return changed, notes


def top_k_flip_count(
    points: np.ndarray,
    counted: np.ndarray,
    order: Sequence[int],
    model_ids: Sequence[Hashable],
    *,
    k: int = 3,
) -> dict[str, Any]:
    """Return the smallest number of key corrections that could change the top `k` set.

    Worst case: a correction of question q may re-grade every response to q, so it can
    move a top-k model t's counted grade on q to the scale minimum and an outside model
    o's to the maximum (counted responses stay counted). In score points that closes
    the gap by g_q = 100 * ((1 - p_o,q) * c_o,q / n_o + p_t,q * c_t,q / n_t), with p the
    counted grade as a fraction of the scale range, c 1 if counted and n the counted
    responses. The top-k set changes once t falls below o: for each pair (t in the top k,
    o outside) the fewest questions whose largest gains sum to more than score_t -
    score_o (greedy over sorted gains, exact for one pair since gains add up), minimised
    over pairs; `pair` is the pair needing the fewest, the closest such pair on a tie. `points`, `counted` (Q, M); `order`: scored model columns, best first.

    Returns {"flip_count": int or None, "top": [ids], "pair": [t, o] or None, "gap": points
    or None, "method": str, "cannot_compute": reason or None}. An upper bound on how
    robust the top k is: real corrections move grades less than the worst case.
    """
    method = (
        "fewest corrected questions whose worst-case re-grading (a top model's counted "
        f"grades to the minimum, an outside model's to the maximum) closes a top-{k} gap; "
        "greedy per pair of models, minimum over pairs; counted responses stay counted"
    )
    out: dict[str, Any] = {
        "flip_count": None,
        "top": [model_ids[i] for i in order[:k]],
        "pair": None,
        "gap": None,
        "method": method,
        "cannot_compute": None,
    }
    if len(order) <= k:
        out["cannot_compute"] = f"{len(order)} scored models: no model outside the top {k}"
        return out
    c = counted.astype(bool)
    n = c.sum(axis=0).astype(float)
    scores = 100.0 * np.where(c, points, 0.0).sum(axis=0) / np.maximum(n, 1)
    best: tuple[int, int, int, float] | None = None
    for t in order[:k]:
        for o in order[k:]:
            gain = 100.0 * (
                np.where(c[:, o], 1.0 - points[:, o], 0.0) / max(n[o], 1.0)
                + np.where(c[:, t], points[:, t], 0.0) / max(n[t], 1.0)
            )
            gap = float(scores[t] - scores[o])
            reach = np.cumsum(np.sort(gain)[::-1])
            enough = np.flatnonzero(reach > gap + 1e-9)
            # Fewest corrections first; among equals the closest pair (smallest gap).
            if enough.size and (best is None or (enough[0] + 1, gap) < (best[0], best[3])):
                best = (int(enough[0]) + 1, t, o, gap)
    if best is None:
        out["cannot_compute"] = "no set of corrections could change the top models"
        return out
    out.update(
        flip_count=best[0],
        pair=[model_ids[best[1]], model_ids[best[2]]],
        gap=round(best[3], 4),
    )
    return out
