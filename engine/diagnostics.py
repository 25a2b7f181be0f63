"""Judge diagnostics: does a judge reward length, does it favour its own vendor's models.

The write-up claims its judges were told "length was not rewarded" and that "a judge
cannot favour its own family"; these measure both on the stored grades. Inputs are the
grade table of one edition (scored questions only) and, per response, its length;
nothing here reads a database.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from .intervals import two_sided_z
from .table import GradeTable

#: Fewer graded responses than this and a rank correlation is not reported.
MIN_RESPONSES = 10


def length_grade_correlation(
    lengths: np.ndarray, grades: np.ndarray, *, confidence: float = 0.95
) -> dict[str, Any]:
    """Return Spearman's rank correlation of response length with grade, with an interval.

    `lengths` and `grades` (N,) float, NaN for an ungraded or null response (dropped).
    rho is `scipy.stats.spearmanr` (ties get average ranks); the interval is Fisher's z
    transform with the Bonett & Wright (2000) standard error for Spearman's rho,
    sqrt((1 + rho^2 / 2) / (n - 3)). Returns {"n", "spearman", "ci_low", "ci_high",
    "cannot_compute"}: the three figures None and `cannot_compute` the reason when
    fewer than MIN_RESPONSES responses are graded or lengths or grades are constant.
    """
    from scipy.stats import spearmanr

    ok = ~np.isnan(grades) & ~np.isnan(lengths)
    n = int(ok.sum())
    out: dict[str, Any] = {
        "n": n,
        "spearman": None,
        "ci_low": None,
        "ci_high": None,
        "cannot_compute": None,
    }
    if n < MIN_RESPONSES:
        out["cannot_compute"] = f"{n} graded responses, fewer than {MIN_RESPONSES}"
        return out
    x, y = lengths[ok], grades[ok]
    if np.all(x == x[0]) or np.all(y == y[0]):
        which = "grades" if np.all(y == y[0]) else "response lengths"
        out["cannot_compute"] = f"every one of the {n} {which} is the same"
        return out
    rho = float(spearmanr(x, y).statistic)
    z = np.arctanh(np.clip(rho, -0.999999, 0.999999))
    se = np.sqrt((1 + rho**2 / 2) / (n - 3))
    half = two_sided_z(confidence) * se
    out.update(
        spearman=round(rho, 4),
        ci_low=round(float(np.tanh(z - half)), 4),
        ci_high=round(float(np.tanh(z + half)), 4),
    )
    return out


def own_vendor_difference(
    table: GradeTable,
    model_vendors: dict[Hashable, str],
    judge_vendors: dict[Hashable, str],
) -> list[dict[str, Any]]:
    """Return, per judge, how much more it grades its own vendor's models than the other
    judges of the table grade the same responses.

    For judge j and each response (scored questions) graded by j and by at least one
    judge of another vendor: d = j's grade - the mean of those other-vendor judges' grades
    (grade points on the benchmark scale). `own_vendor_difference` is the mean d over responses of models of
    j's vendor, `other_vendor_difference` the mean d over the other models, `excess`
    their difference (positive: j is kinder to its own family than the other judges are,
    beyond its general leniency). Each entry: {"judge", "vendor", "own_vendor_models",
    "n_own", "n_other", "own_vendor_difference", "other_vendor_difference", "excess",
    "cannot_compute"}; figures None with the reason in `cannot_compute` when the judge
    has no vendor, there is no judge of another vendor, no model shares its vendor, or no
    response of such a model is graded by it and an other-vendor judge.
    """
    grades = table.grade_values(table.scored_codes())  # (Q, M, J)
    models: Sequence[Hashable] = list(table.model_ids)
    out = []
    for j, judge in enumerate(table.judge_ids):
        vendor = (judge_vendors.get(judge) or "").strip()
        own = [i for i, m in enumerate(models) if vendor and model_vendors.get(m) == vendor]
        row: dict[str, Any] = {
            "judge": judge,
            "vendor": vendor or None,
            "own_vendor_models": [models[i] for i in own],
            "n_own": 0,
            "n_other": 0,
            "own_vendor_difference": None,
            "other_vendor_difference": None,
            "excess": None,
            "cannot_compute": None,
        }
        out.append(row)
        if not vendor:
            row["cannot_compute"] = f"judge {judge} has no vendor (judges.csv)"
            continue
        if table.n_judges < 2:
            row["cannot_compute"] = "one judge only: no other judge graded the same responses"
            continue
        outside = [
            k
            for k, other in enumerate(table.judge_ids)
            if k != j and (judge_vendors.get(other) or "").strip() not in ("", vendor)
        ]
        if not outside:
            row["cannot_compute"] = (
                f"every other judge is also from {vendor} or has no vendor: no outside judge "
                "to compare with"
            )
            continue
        if not own:
            row["cannot_compute"] = f"no model under test is from {vendor} (models.csv)"
            continue
        others = grades[:, :, outside]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: mean is NaN
            other_mean = np.nanmean(others, axis=2)
        d = grades[:, :, j] - other_mean  # (Q, M), NaN where either side is missing
        is_own = np.zeros(len(models), dtype=bool)
        is_own[own] = True
        d_own, d_other = d[:, is_own], d[:, ~is_own]
        d_own, d_other = d_own[~np.isnan(d_own)], d_other[~np.isnan(d_other)]
        row["n_own"], row["n_other"] = int(d_own.size), int(d_other.size)
        if not d_own.size:
            row["cannot_compute"] = (
                f"no response of a {vendor} model is graded by {judge} and another judge"
            )
            continue
        row["own_vendor_difference"] = round(float(d_own.mean()), 4)
        if d_other.size:
            row["other_vendor_difference"] = round(float(d_other.mean()), 4)
            row["excess"] = round(float(d_own.mean() - d_other.mean()), 4)
    return out
