"""Uncertainty of model scores: a seeded question bootstrap and the Wilson interval."""

from __future__ import annotations

import math
import warnings
from statistics import NormalDist

import numpy as np

#: Resample weights are built in chunks of at most this many cells, which bounds
#: memory (8 bytes each) whatever the number of questions and resamples.
_CHUNK_CELLS = 8_000_000


def two_sided_z(confidence: float) -> float:
    """The standard normal quantile for a two-sided interval: z with P(|Z| <= z) = confidence.

    `confidence` is a fraction in (0, 1), e.g. 0.95 -> 1.959964. From the standard library's
    statistics.NormalDist (the same figure as scipy.stats.norm.ppf to 1e-9), so computing a
    board does not import scipy.stats. Raises ValueError outside (0, 1).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(k: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """Return the Wilson score interval for a proportion k/n, as fractions (0-1).

    ``k`` successes (may be fractional, e.g. a sum of partial credit) out of
    ``n`` > 0 trials; ``z`` the normal quantile (1.96 for 95%).  Wilson (1927)
    score interval: centre (p + z^2/2n) / (1 + z^2/n), half-width
    z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/4n^2).  Its width is > 0 for every
    p in [0, 1], which is why the engine falls back to it when a bootstrap
    interval degenerates (e.g. 10 out of 10 right).

    Raises ValueError if n <= 0, k < 0, k > n or z <= 0.
    """
    if n <= 0:
        raise ValueError(f"Wilson interval needs n > 0, got {n!r}")
    if k < 0 or k > n:
        raise ValueError(f"Wilson interval needs 0 <= k <= n, got k={k!r}, n={n!r}")
    if z <= 0:
        raise ValueError(f"z must be > 0, got {z!r}")
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_score_intervals(
    points: np.ndarray,
    counted: np.ndarray,
    *,
    n_bootstrap: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> tuple[np.ndarray, np.ndarray]:
    """Return percentile bootstrap intervals of each model's score over questions.

    ``points`` (Q, M): per question and model, the counted points as a fraction of
    the scale range (0-1 per counted response, 0 if not counted); ``counted``
    (Q, M): 1 where the response is counted.  Each resample draws Q question
    indices with replacement (seeded ``numpy.random.default_rng(seed)``); the
    resample's multiplicity vector w (Q,) gives every model's score at once as
    100 * (w @ points) / (w @ counted).  The interval is the
    ((1-confidence)/2, (1+confidence)/2) percentiles (numpy linear
    interpolation) over resamples where the model has counted responses.

    Returns (low, high), each (M,) in percent; NaN for a model never counted.
    Raises ValueError for n_bootstrap < 1 or confidence outside (0, 1).
    """
    if n_bootstrap < 1:
        raise ValueError(f"n_bootstrap must be >= 1, got {n_bootstrap!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    q, m = points.shape
    if q == 0:
        nan = np.full(m, np.nan)
        return nan, nan.copy()
    # One matrix product gives both numerator and denominator per resample.
    stacked = np.concatenate([points, counted], axis=1).astype(np.float64)
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_bootstrap, _CHUNK_CELLS // q))
    sums = np.empty((n_bootstrap, 2 * m))
    done = 0
    while done < n_bootstrap:
        b = min(chunk, n_bootstrap - done)
        idx = rng.integers(0, q, size=(b, q))
        idx += (np.arange(b) * q)[:, None]
        weights = np.bincount(idx.ravel(), minlength=b * q).reshape(b, q).astype(np.float64)
        sums[done : done + b] = weights @ stacked
        done += b
    num, den = sums[:, :m], sums[:, m:]
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = np.where(den > 0, 100.0 * num / den, np.nan)
    alpha = (1 - confidence) / 2
    low = np.full(m, np.nan)
    high = np.full(m, np.nan)
    has = ~np.isnan(scores).all(axis=0)
    if has.any():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            qs = np.nanpercentile(scores[:, has], [100 * alpha, 100 * (1 - alpha)], axis=0)
        low[has], high[has] = qs[0], qs[1]
    return low, high
