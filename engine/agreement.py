"""Inter-rater statistics per judge pair: raw agreement, Cohen's kappa, Krippendorff's alpha."""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ._json import fraction
from .table import GradeTable

#: Above this many float64 cells of krippendorff's (units, V, V) temporaries the
#: ordinal alpha is computed from the coincidence matrix directly (same formula,
#: O(V^2) memory); see :func:`_alpha_ordinal_from_confusion`.
_KRIPPENDORFF_MAX_CELLS = 20_000_000

#: A chance-corrected statistic within this distance of 0 is "near zero" ...
NEAR_ZERO = 0.2
#: ... and is explained by nearly constant grades when one grade makes up at least this
#: share of both judges' grades together (the kappa paradox, Feinstein & Cicchetti 1990).
NEARLY_CONSTANT_SHARE = 0.9


@dataclass(frozen=True)
class PairAgreement:
    """Agreement of two judges over the responses both graded.

    ``n``: responses with a non-null grade from both; ``n_missing``: responses
    with a grade row from either judge dropped because one (or both) grades is
    null or absent.  ``exact_agreement`` is a fraction (0-1).  ``confusion``
    is K x K over the full scale: rows are the first judge's grade, columns the
    second's.  A statistic undefined for the data is None, with the reason in
    ``notes``.
    """

    judges: tuple[Hashable, Hashable]
    n: int
    n_missing: int
    exact_agreement: float | None
    cohen_kappa: float | None
    cohen_kappa_quadratic: float | None
    krippendorff_alpha_ordinal: float | None
    confusion: list[list[int]]
    notes: list[str] = field(default_factory=list)
    per_model: list[tuple[Hashable, PairAgreement]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-safe values; `per_model` only when computed (pooled pairs)."""
        out = self._stats_dict()
        if self.per_model:
            out["per_model"] = [
                {
                    "model_id": model_id,
                    **{k: v for k, v in p._stats_dict().items() if k != "judges"},
                }
                for model_id, p in self.per_model
            ]
        return out

    def _stats_dict(self) -> dict[str, Any]:
        return {
            "judges": list(self.judges),
            "n": self.n,
            "n_missing": self.n_missing,
            "exact_agreement": fraction(self.exact_agreement),
            "cohen_kappa": fraction(self.cohen_kappa),
            "cohen_kappa_quadratic": fraction(self.cohen_kappa_quadratic),
            "krippendorff_alpha_ordinal": fraction(self.krippendorff_alpha_ordinal),
            "confusion": [list(r) for r in self.confusion],
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class AgreementReport:
    """Inter-rater statistics for every pair of judges (empty with one judge; see ``notes``)."""

    judges: list[Hashable]
    scale: list[int]
    pairs: list[PairAgreement]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-safe values with the keys of cli.md ``agreement --format json``."""
        return {
            "judges": list(self.judges),
            "scale": list(self.scale),
            "pairs": [p.to_dict() for p in self.pairs],
            "notes": list(self.notes),
        }


def compute_agreement(table: GradeTable, *, scored_only: bool = True) -> AgreementReport:
    """Compute inter-rater statistics for every pair of judges.

    Units are responses (question, model) to scored questions (all questions if
    ``scored_only`` is False).  Per pair: raw agreement; Cohen (1960) kappa,
    unweighted, and Cohen (1968) weighted kappa with quadratic weights, both via
    ``sklearn.metrics.cohen_kappa_score`` with ``labels`` = the full scale (so
    weights follow scale positions even for unobserved grades); Krippendorff's
    alpha, ordinal metric, via ``krippendorff.alpha`` with ``value_domain`` =
    the scale (Krippendorff 2004; for very large tables the same formula is
    evaluated on the coincidence matrix to bound memory); confusion matrix via
    ``sklearn.metrics.confusion_matrix`` with ``labels`` = the scale.

    Each pair also carries ``per_model``: the same statistics over each model's
    responses alone (units: that model's responses to the same questions).

    Never returns NaN and never raises on degenerate data: undefined statistics
    (no common responses, all grades in one category) are None with a note. A
    statistic near zero (|value| < NEAR_ZERO) while one grade makes up at least
    NEARLY_CONSTANT_SHARE of the grades gets a note that chance agreement is high
    (the kappa paradox), so a reader does not take it for disagreement or a bug.
    With one judge there are no pairs and a note says agreement needs two.
    """
    codes = table.scored_codes() if scored_only else table.codes
    scale = table.scale
    notes: list[str] = []
    pairs: list[PairAgreement] = []
    if table.n_judges < 2:
        notes.append(
            f"one judge only ({', '.join(str(j) for j in table.judge_ids)}): "
            "agreement needs two judges"
        )
    for a, b in itertools.combinations(range(table.n_judges), 2):
        judges = (table.judge_ids[a], table.judge_ids[b])
        pooled = _pair(judges, codes[:, :, a].ravel(), codes[:, :, b].ravel(), scale)
        per_model = [
            (model_id, _pair(judges, codes[:, m, a], codes[:, m, b], scale))
            for m, model_id in enumerate(table.model_ids)
        ]
        pairs.append(replace(pooled, per_model=per_model))
    return AgreementReport(
        judges=list(table.judge_ids),
        scale=[int(v) for v in scale],
        pairs=pairs,
        notes=notes,
    )


def pair_statistics(
    grades_a: np.ndarray | list[float | None],
    grades_b: np.ndarray | list[float | None],
    scale: list[int] | np.ndarray,
    judges: tuple[Hashable, Hashable] = ("a", "b"),
) -> PairAgreement:
    """Compute the statistics of :func:`compute_agreement` for two parallel grade vectors.

    ``grades_a``/``grades_b`` (N,): grade values, NaN/None for a null grade.
    Raises ValueError for a grade off the scale or vectors of unequal length.
    """
    from .table import NULL, normalise_scale

    scale_arr = normalise_scale(scale)
    va = np.asarray(grades_a, dtype=float)
    vb = np.asarray(grades_b, dtype=float)
    if va.shape != vb.shape:
        raise ValueError(f"grade vectors differ in length: {va.shape} vs {vb.shape}")

    def to_codes(v: np.ndarray) -> np.ndarray:
        idx = np.clip(
            np.searchsorted(scale_arr, np.nan_to_num(v, nan=scale_arr[0])), 0, len(scale_arr) - 1
        )
        bad = ~np.isnan(v) & (scale_arr[idx] != v)
        if bad.any():
            raise ValueError(f"grade {v[bad][0]!r} is not on the scale {scale_arr.tolist()}")
        return np.where(np.isnan(v), NULL, idx)

    return _pair(judges, to_codes(va), to_codes(vb), scale_arr)


def _pair(
    judges: tuple[Hashable, Hashable], ca: np.ndarray, cb: np.ndarray, scale: np.ndarray
) -> PairAgreement:
    from sklearn.metrics import cohen_kappa_score, confusion_matrix

    considered = (ca != -1) | (cb != -1)
    both = (ca >= 0) & (cb >= 0)
    n = int(both.sum())
    n_missing = int(considered.sum()) - n
    k = len(scale)
    notes: list[str] = []
    if n_missing:
        notes.append(
            f"{n_missing} response{'' if n_missing == 1 else 's'} dropped: a grade from one or both"
            " judges is null or missing"
        )
    if n == 0:
        notes.append("no response graded by both judges: every statistic is undefined")
        return PairAgreement(
            judges, 0, n_missing, None, None, None, None, [[0] * k for _ in range(k)], notes
        )

    ga = scale[ca[both]]
    gb = scale[cb[both]]
    exact = float(np.mean(ga == gb))
    labels = scale.tolist()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        confusion = confusion_matrix(ga, gb, labels=labels)
        kappa = _finite(cohen_kappa_score(ga, gb, labels=labels))
        kappa_q = _finite(cohen_kappa_score(ga, gb, labels=labels, weights="quadratic"))
        alpha = _finite(_alpha_ordinal(ga, gb, scale, confusion))

    observed = np.union1d(np.unique(ga), np.unique(gb))
    single = observed.size == 1
    reason = (
        f"every grade is {int(observed[0])} (a single category): chance agreement is 1, so "
        if single
        else "undefined for these grades: "
    )
    if kappa is None:
        notes.append(reason + "Cohen's kappa is undefined")
    if kappa_q is None:
        notes.append(reason + "quadratic weighted kappa is undefined")
    if alpha is None:
        notes.append(
            (reason if single else "undefined for these grades (no variation to compare): ")
            + "Krippendorff's alpha is undefined"
        )
    constant = _nearly_constant_note(np.concatenate([ga, gb]), exact, kappa, kappa_q, alpha)
    if constant:
        notes.append(constant)
    return PairAgreement(
        judges=(judges[0], judges[1]),
        n=n,
        n_missing=n_missing,
        exact_agreement=exact,
        cohen_kappa=kappa,
        cohen_kappa_quadratic=kappa_q,
        krippendorff_alpha_ordinal=alpha,
        confusion=confusion.astype(int).tolist(),
        notes=notes,
    )


def _nearly_constant_note(
    grades: np.ndarray,
    exact: float,
    kappa: float | None,
    kappa_q: float | None,
    alpha: float | None,
) -> str | None:
    """Return the note for chance-corrected statistics near zero on nearly constant grades.

    `grades`: both judges' grades together. None unless some statistic is within NEAR_ZERO
    of 0 and the most common grade is at least NEARLY_CONSTANT_SHARE of `grades` (a single
    category gets its own "undefined" note instead).
    """
    values, counts = np.unique(grades, return_counts=True)
    if values.size < 2:
        return None
    share = counts.max() / counts.sum()
    stats = {"Cohen's kappa": kappa, "quadratic kappa": kappa_q, "Krippendorff's alpha": alpha}
    near = {k: v for k, v in stats.items() if v is not None and abs(v) < NEAR_ZERO}
    if share < NEARLY_CONSTANT_SHARE or not near:
        return None
    named = ", ".join(f"{k} {v:.2f}" for k, v in near.items())
    return (
        f"{named} near zero with raw agreement {exact:.1%}: {share:.0%} of the grades are "
        f"{values[counts.argmax()]:g}, so agreement expected by chance is already high and "
        "chance-corrected statistics say little here (the kappa paradox, Feinstein & "
        "Cicchetti 1990); it does not mean the judges disagree"
    )


def _finite(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _alpha_ordinal(
    ga: np.ndarray, gb: np.ndarray, scale: np.ndarray, confusion: np.ndarray
) -> float | None:
    """Krippendorff's ordinal alpha of two raters over the same units (no missing values)."""
    if len(ga) * len(scale) ** 2 * 3 <= _KRIPPENDORFF_MAX_CELLS:
        import krippendorff

        try:
            return float(
                krippendorff.alpha(
                    reliability_data=np.vstack([ga, gb]).astype(float),
                    level_of_measurement="ordinal",
                    value_domain=scale,
                )
            )
        except (ValueError, ZeroDivisionError):
            return None
    return _alpha_ordinal_from_confusion(confusion)


def _alpha_ordinal_from_confusion(confusion: np.ndarray) -> float | None:
    """Evaluate Krippendorff's ordinal alpha from a two-rater confusion matrix.

    With two raters and no missing values every unit is pairable and the
    coincidence matrix is o = C + C^T; n_v its margins, n = sum(n_v).  Ordinal
    metric: delta(c, k) = (sum_{g=c}^{k} n_g - (n_c + n_k)/2)^2.
    alpha = 1 - (n - 1) * sum(o * delta) / sum(outer(n_v, n_v) * delta)
    (Krippendorff 2011, "Computing Krippendorff's alpha-reliability").  Tested
    equal to ``krippendorff.alpha`` in tests/test_engine_agreement.py.
    """
    c = confusion.astype(np.float64)
    o = c + c.T
    n_v = o.sum(axis=1)
    n = n_v.sum()
    if n <= 1:
        return None
    cum = np.concatenate([[0.0], np.cumsum(n_v)])
    i = np.arange(len(n_v))
    lo, hi = np.minimum.outer(i, i), np.maximum.outer(i, i)
    delta = (cum[hi + 1] - cum[lo] - (n_v[lo] + n_v[hi]) / 2) ** 2
    expected = (np.outer(n_v, n_v) * delta).sum()
    if expected == 0:
        return None
    return float(1 - (n - 1) * (o * delta).sum() / expected)
