"""Judges against people (issue 31 item 2): the blind sample's draw and its weighted figures.

Pure numpy / scikit-learn / scipy: arrays in, numbers out (no Django).

The sample is stratified: responses where the judges disagree (stratum ``disagree``) are
drawn with a higher inclusion probability than the rest (stratum ``rest``), so the few
disagreements get enough human grades. Every figure weights a sampled response by the
inverse of its inclusion probability, N_h / n_h (Horvitz & Thompson 1952; the ratio
estimators here are Hajek's), so it estimates the figure over all responses, not over a
sample rich in disagreements.

Agreement on the ordinal scale is Cohen's (1968) weighted kappa with QUADRATIC weights
(``sklearn.metrics.cohen_kappa_score(..., weights="quadratic", sample_weight=w)``): a
0-versus-2 disagreement costs four times a 0-versus-1, as it should on an ordered scale;
it is the statistic the judge-pair table already shows (``cohen_kappa_quadratic``), so
judge-against-people and judge-against-judge read on one ruler; and it equals the
intraclass correlation under the usual conditions (Fleiss & Cohen 1973). Linear weights
would charge a two-step disagreement only twice a one-step one.

Intervals: a stratified bootstrap over sampled responses (each stratum resampled with
replacement at its own size, ``scipy.stats.bootstrap`` with ``paired=False``, seeded
``numpy.random.default_rng(seed)``), percentile method. The point estimates call
``cohen_kappa_score`` (:func:`weighted_kappa`); the resamples are evaluated all at once
(``vectorized=True``), their kappas by :func:`weighted_kappas`, sklearn's formula over a
stack of weighted confusion matrices, which the tests hold equal to sklearn to 1e-12.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._json import fraction

DISAGREE = "disagree"
REST = "rest"
STRATA = (DISAGREE, REST)

#: Share of the sample drawn from the disagreement stratum unless the caller says otherwise.
DEFAULT_DISAGREE_SHARE = 0.5


@dataclass(frozen=True)
class SampleDraw:
    """A drawn sample: ``order`` indexes the population (positions 0..N-1) in the order a
    reviewer sees the responses (the strata shuffled together, so position says nothing of
    the stratum); ``population`` and ``drawn`` are {stratum: N_h} and {stratum: n_h}."""

    order: list[int]
    strata: list[str]
    population: dict[str, int]
    drawn: dict[str, int]


def draw_sample(
    disagree: Sequence[bool] | np.ndarray,
    size: int,
    *,
    seed: int,
    disagree_share: float = DEFAULT_DISAGREE_SHARE,
) -> SampleDraw:
    """Draw a stratified simple random sample without replacement.

    ``disagree`` (N,): True where the judges disagree on the response. The disagreement
    stratum gets ``round(size * disagree_share)`` responses (at most all of them), the
    rest the remainder; a stratum too small to fill its share hands the difference to
    the other. Within each stratum ``Generator.choice(N_h, n_h, replace=False)`` of
    ``numpy.random.default_rng(seed)`` (disagree first, then rest), then one permutation
    of the whole sample from the same generator. The same inputs always give the same
    draw. Raises ValueError for size < 1 or a share outside [0, 1].
    """
    if size < 1:
        raise ValueError(f"the sample needs at least one response, got size {size}")
    if not 0 <= disagree_share <= 1:
        raise ValueError(f"disagree_share must be between 0 and 1, got {disagree_share}")
    mask = np.asarray(disagree, dtype=bool)
    members = {DISAGREE: np.flatnonzero(mask), REST: np.flatnonzero(~mask)}
    population = {s: int(members[s].size) for s in STRATA}
    size = min(size, mask.size)
    n_d = min(population[DISAGREE], int(round(size * disagree_share)))
    n_r = min(population[REST], size - n_d)
    n_d = min(population[DISAGREE], size - n_r)
    drawn = {DISAGREE: n_d, REST: n_r}
    rng = np.random.default_rng(seed)
    picked: list[tuple[int, str]] = []
    for s in STRATA:
        chosen = rng.choice(population[s], drawn[s], replace=False) if drawn[s] else []
        picked += [(int(members[s][i]), s) for i in chosen]
    perm = rng.permutation(len(picked))
    return SampleDraw(
        order=[picked[i][0] for i in perm],
        strata=[picked[i][1] for i in perm],
        population=population,
        drawn=drawn,
    )


def inverse_probability_weights(
    strata: Sequence[str], population: dict[str, int], drawn: dict[str, int]
) -> np.ndarray:
    """Return each sampled response's weight N_h / n_h (1 / its inclusion probability).

    ``strata`` (I,): each response's stratum; ``population``/``drawn``: {stratum: count}.
    Raises KeyError for a stratum missing from either mapping, ValueError where n_h is 0
    or exceeds N_h.
    """
    out = np.empty(len(strata))
    for i, s in enumerate(strata):
        n, big_n = drawn[s], population[s]
        if n < 1 or n > big_n:
            raise ValueError(f"stratum {s}: drawn {n} of {big_n}")
        out[i] = big_n / n
    return out


@dataclass(frozen=True)
class HumanUnits:
    """The sample's grades, in arrays (I sampled responses that people graded, U grades).

    ``item`` (U,): index 0..I-1 of the response each human grade is of; ``human`` (U,): the
    grade; ``rater`` (U,): who gave it (any hashable, order within an item = grading
    order). ``weight`` (I,): inverse-probability weight; ``stratum`` (I,); ``model`` (I,):
    the model under test; ``judges`` (I, J): each judge's grade, NaN where null or absent;
    ``judge_ids`` (J,); ``scale``: the ordinal grade scale, sorted.
    """

    item: np.ndarray
    human: np.ndarray
    rater: list[Hashable]
    weight: np.ndarray
    stratum: list[str]
    model: list[Hashable]
    judges: np.ndarray
    judge_ids: list[Hashable]
    scale: list[int]


@dataclass(frozen=True)
class Figure:
    """One statistic with its bootstrap interval (None where undefined) and its n."""

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: value, low, high (fractions or points as computed), width, n."""
        width = None if self.low is None or self.high is None else self.high - self.low
        return {
            "value": fraction(self.value),
            "low": fraction(self.low),
            "high": fraction(self.high),
            "width": fraction(width),
            "n": self.n,
        }


@dataclass(frozen=True)
class HumanAgreement:
    """Every figure of judges against people; see :func:`human_agreement`."""

    scale: list[int]
    kappa_weights: str
    n_grades: int
    n_responses: int
    n_bootstrap: int
    seed: int
    confidence: float
    judges: list[dict[str, Any]]
    people: dict[str, Any]
    models: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return JSON-safe values (the `human_agreement` key of report and agreement)."""
        return {
            "scale": list(self.scale),
            "kappa_weights": self.kappa_weights,
            "n_grades": self.n_grades,
            "n_responses": self.n_responses,
            "n_bootstrap": self.n_bootstrap,
            "seed": self.seed,
            "confidence": self.confidence,
            "judges": self.judges,
            "people": self.people,
            "models": self.models,
            "notes": list(self.notes),
        }


def weighted_kappa(
    a: np.ndarray, b: np.ndarray, w: np.ndarray, scale: Sequence[int], weights: str = "quadratic"
) -> float | None:
    """Cohen's weighted kappa of two grade vectors with sample weights ``w`` (None where
    undefined: no positive weight, or chance agreement 1), by ``cohen_kappa_score``."""
    from sklearn.metrics import cohen_kappa_score

    keep = w > 0
    if not keep.any():
        return None
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        value = cohen_kappa_score(
            a[keep], b[keep], labels=list(scale), weights=weights, sample_weight=w[keep]
        )
    value = float(value)
    return value if math.isfinite(value) else None


def weighted_kappas(
    a: np.ndarray, b: np.ndarray, w: np.ndarray, n_classes: int, weights: str = "quadratic"
) -> np.ndarray:
    """Cohen's weighted kappa of one pair of grade vectors under many weight vectors at once.

    ``a``, ``b`` (U,): category indices 0..n_classes-1 (positions on the sorted scale, as
    ``cohen_kappa_score(labels=scale)`` numbers them); ``w`` (B, U): B rows of non-negative
    sample weights (a bootstrap resample's multiplicities times the inverse-probability
    weights). Returns (B,) floats, NaN where :func:`weighted_kappa` gives None (no positive
    weight, or chance disagreement 0: every grade in one category). The arithmetic is
    sklearn's ``cohen_kappa_score`` (1.9) step by step, on a (B, K, K) stack of weighted
    confusion matrices (rows ``a``, columns ``b``) built by one ``numpy.bincount``; the disagreement
    weights are (i - j)^2 of the indices ("quadratic") or |i - j| ("linear").
    """
    a = np.asarray(a, dtype=np.intp)
    b = np.asarray(b, dtype=np.intp)
    w = np.asarray(w, dtype=float)
    n_rows, k = w.shape[0], int(n_classes)
    cell = a * k + b
    flat = (np.arange(n_rows)[:, None] * (k * k) + cell[None, :]).ravel()
    confusion = np.bincount(flat, weights=w.ravel(), minlength=n_rows * k * k).reshape(n_rows, k, k)
    sum0 = confusion.sum(axis=1)  # sklearn's sum(confusion, axis=0), per row of w
    sum1 = confusion.sum(axis=2)
    total = sum0.sum(axis=1)
    steps = np.arange(k, dtype=float)
    w_mat = steps[None, :] - steps[:, None]
    w_mat = np.abs(w_mat) if weights == "linear" else w_mat**2
    with np.errstate(all="ignore"):
        expected = sum0[:, :, None] * sum1[:, None, :] / total[:, None, None]
        numerator = (w_mat * confusion).sum(axis=(1, 2))
        denominator = (w_mat * expected).sum(axis=(1, 2))
        value = 1 - numerator / denominator
    value[(total == 0) | (denominator == 0) | ~np.isfinite(value)] = np.nan
    return value


def _weighted_mean(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted means over the last axis of w (B, U) (x (U,) or (B, U)): (B,), NaN where
    a row's weights sum to 0."""
    total = w.sum(axis=-1)
    with np.errstate(all="ignore"):
        out = (x * w).sum(axis=-1) / total
    return np.where(total > 0, out, np.nan)


def _sklearn_kappas(
    a: np.ndarray, b: np.ndarray, w: np.ndarray, scale: Sequence[int]
) -> np.ndarray:
    """:func:`weighted_kappa` of each row of ``w`` (B, U), NaN for None: the point estimate."""
    values = [weighted_kappa(a, b, row, scale) for row in w]
    return np.array([np.nan if v is None else v for v in values], dtype=float)


class _Stats:
    """Every statistic for item multiplicities: 1 for the sample itself, bootstrap counts
    for a resample. Layout in ``names``; :meth:`point` and :meth:`resampled`."""

    def __init__(self, u: HumanUnits) -> None:
        self.u = u
        n_items = len(u.weight)
        per_item = np.bincount(u.item, minlength=n_items)
        # A response graded by r people: each of its grades carries 1/r of its weight.
        self.unit_w = u.weight[u.item] / per_item[u.item]
        span = float(u.scale[-1] - u.scale[0]) or 1.0
        self.unit_points = 100.0 * (u.human - u.scale[0]) / span
        jg = u.judges
        self.agreed = np.all(jg == jg[:, :1], axis=1) & ~np.isnan(jg).any(axis=1)
        self.agreed_points = np.where(self.agreed, 100.0 * (jg[:, 0] - u.scale[0]) / span, 0.0)
        self.pair_a, self.pair_b, self.pair_item = _first_pairs(u)
        self.models = sorted(set(u.model), key=str)
        model_of = np.array([self.models.index(m) for m in u.model], dtype=int)
        self.item_model = model_of
        self.names = [f"judge:{j}:{s}" for j in u.judge_ids for s in ("kappa", "exact")]
        self.names += ["people:kappa", "people:exact"]
        self.names += [f"model:{m}:{s}" for m in self.models for s in ("people", "diff")]

    def point(self) -> np.ndarray:
        """(S,) every statistic on the sample itself, its kappas by ``cohen_kappa_score``;
        NaN where undefined."""
        return self.evaluate(np.ones((1, len(self.u.weight))), kappas=self._sklearn)[:, 0]

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        """(S, B) every statistic for B resamples, ``counts`` (B, I) each response's
        multiplicity in each; kappas by :func:`weighted_kappas`."""
        return self.evaluate(counts, kappas=self._numpy)

    def _sklearn(self, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
        return _sklearn_kappas(a, b, w, self.u.scale)

    def _numpy(self, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
        scale = np.asarray(self.u.scale, dtype=float)
        return weighted_kappas(np.searchsorted(scale, a), np.searchsorted(scale, b), w, scale.size)

    def evaluate(self, counts: np.ndarray, *, kappas: Any) -> np.ndarray:
        """(S, B) every statistic for multiplicities ``counts`` (B, I); ``kappas(a, b, w)``
        gives the (B,) kappas of grade vectors a, b (U,) under weights w (B, U)."""
        u, out = self.u, []
        c = np.asarray(counts, dtype=float)
        w = self.unit_w * c[:, u.item]
        for j in range(len(u.judge_ids)):
            jg = u.judges[u.item, j]
            ok = ~np.isnan(jg)
            wj = np.where(ok, w, 0.0)
            out.append(kappas(np.where(ok, jg, u.scale[0]), u.human, wj))
            out.append(_weighted_mean((jg == u.human).astype(float), wj))
        wp = u.weight[self.pair_item] * c[:, self.pair_item]
        out.append(kappas(self.pair_a, self.pair_b, wp))
        out.append(_weighted_mean((self.pair_a == self.pair_b).astype(float), wp))
        item_w = u.weight * c
        for m in range(len(self.models)):
            people = _weighted_mean(self.unit_points, np.where(self.item_model[u.item] == m, w, 0))
            counted = np.where((self.item_model == m) & self.agreed, item_w, 0.0)
            agreed = _weighted_mean(self.agreed_points, counted)
            out.append(people)
            out.append(agreed - people)
        return np.array(out, dtype=float).reshape(len(self.names), c.shape[0])

    def agreed_only(self, m: int) -> tuple[float | None, int]:
        """The agreement-only score of model ``m`` on the sample and its n of responses."""
        counted = (self.item_model == m) & self.agreed
        value = _weighted_mean(self.agreed_points, np.where(counted, self.u.weight, 0)[None])[0]
        return (None if np.isnan(value) else float(value)), int(counted.sum())


def _first_pairs(u: HumanUnits) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first two human grades of every response graded by two or more people (by
    their order in ``u``): grades a (P,), b (P,) and the response index (P,)."""
    first: dict[int, float] = {}
    a, b, items = [], [], []
    for k, i in enumerate(u.item.tolist()):
        if i not in first:
            first[i] = u.human[k]
        elif i not in items:
            a.append(first[i])
            b.append(u.human[k])
            items.append(i)
    return np.array(a, dtype=float), np.array(b, dtype=float), np.array(items, dtype=int)


def human_agreement(
    u: HumanUnits, *, n_bootstrap: int = 1000, seed: int = 0, confidence: float = 0.95
) -> HumanAgreement:
    """Compute each judge's agreement with people, people with people, and each model's
    score by people beside its agreement-only score, all inverse-probability weighted.

    Per judge: exact agreement (weighted share of human grades the judge matched),
    quadratic weighted kappa, confusion (rows: the judge's grade, columns: people's) as
    raw counts and as weighted estimates over all responses. People: the first two human
    grades of each response graded twice. Per model (scores in percent 0-100): the score
    by people over its sampled responses, the agreement-only score (rule 2: responses
    where every judge gave the same grade) on the same sample, and the difference
    (agreement-only minus people). Each figure has a stratified bootstrap interval
    (module docstring) at ``confidence``; resamples where a figure is undefined (e.g. all
    grades in one category) are left out of its interval, and a note counts them.
    """
    from sklearn.metrics import confusion_matrix

    stats = _Stats(u)
    point = stats.point()
    low, high, undefined = _bootstrap(stats, u, n_bootstrap, seed, confidence)
    notes = []
    figure = {}
    for k, name in enumerate(stats.names):
        ok = not math.isnan(point[k])
        figure[name] = (
            None if not ok else float(point[k]),
            None if not ok or math.isnan(low[k]) else float(low[k]),
            None if not ok or math.isnan(high[k]) else float(high[k]),
        )
        if ok and undefined[k]:
            notes.append(
                f"{_words(name)}: undefined in {undefined[k]} of {n_bootstrap} resamples "
                + (
                    "(all grades in one category there)"
                    if name.endswith("kappa")
                    else "(none of the responses it needs drawn there)"
                )
                + ", left out of its interval"
            )
    judges = []
    for j, judge_id in enumerate(u.judge_ids):
        jg = u.judges[u.item, j]
        ok = ~np.isnan(jg)
        labels = list(u.scale)
        raw = confusion_matrix(jg[ok], u.human[ok], labels=labels)
        est = confusion_matrix(jg[ok], u.human[ok], labels=labels, sample_weight=stats.unit_w[ok])
        judges.append(
            {
                "judge": judge_id,
                "kappa": Figure(*figure[f"judge:{judge_id}:kappa"], n=int(ok.sum())).to_dict(),
                "exact_agreement": Figure(
                    *figure[f"judge:{judge_id}:exact"], n=int(ok.sum())
                ).to_dict(),
                "confusion": raw.astype(int).tolist(),
                "confusion_weighted": np.round(est, 4).tolist(),
            }
        )
    n_pairs = len(stats.pair_item)
    people = {
        "n_responses": n_pairs,
        "kappa": Figure(*figure["people:kappa"], n=n_pairs).to_dict(),
        "exact_agreement": Figure(*figure["people:exact"], n=n_pairs).to_dict(),
    }
    if n_pairs == 0:
        notes.append("no response graded by two people: people against people is undefined")
    return HumanAgreement(
        scale=list(u.scale),
        kappa_weights="quadratic",
        n_grades=len(u.human),
        n_responses=len(u.weight),
        n_bootstrap=n_bootstrap,
        seed=seed,
        confidence=confidence,
        judges=judges,
        people=people,
        models=_model_rows(stats, u, figure),
        notes=notes,
    )


def _words(name: str) -> str:
    """A statistic's name ("judge:j1:kappa") in words ("j1's kappa against people")."""
    kind, *rest = name.split(":")
    what = {"kappa": "kappa", "exact": "exact agreement", "people": "score by people"}
    if kind == "judge":
        return f"{rest[0]}'s {what[rest[1]]} against people"
    if kind == "people":
        return f"people's {what[rest[0]]} with each other"
    if rest[1] == "diff":
        return f"{rest[0]}'s agreement-only score minus its score by people"
    return f"{rest[0]}'s score by people"


def _model_rows(stats: _Stats, u: HumanUnits, figure: dict[str, tuple]) -> list[dict]:
    rows = []
    for m, model_id in enumerate(stats.models):
        n = int((stats.item_model == m).sum())
        agreed, n_agreed = stats.agreed_only(m)
        people = Figure(*figure[f"model:{model_id}:people"], n=n).to_dict()
        diff = Figure(*figure[f"model:{model_id}:diff"], n=n_agreed).to_dict()
        rows.append(
            {
                "model_id": model_id,
                "score_people": people,
                "score_agreement_only": None if agreed is None else round(agreed, 4),
                "n_agreement_only": n_agreed,
                "difference": diff,
            }
        )
    return rows


def _bootstrap(
    stats: _Stats, u: HumanUnits, n_bootstrap: int, seed: int, confidence: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stratified percentile bootstrap of every statistic: (low, high, undefined counts).

    A stratum of one graded response is in every resample once (resampling one response
    with replacement can only draw it), so only the larger strata go to scipy, which
    refuses a sample of one; with none larger there is no interval (NaN).
    """
    from scipy.stats import bootstrap

    n_items = len(u.weight)
    strata = [np.flatnonzero(np.array(u.stratum) == s) for s in STRATA]
    resampled = tuple(s for s in strata if s.size > 1)
    fixed = np.bincount(
        np.concatenate([s for s in strata if s.size == 1] or [np.array([], dtype=int)]),
        minlength=n_items,
    )
    nan = np.full(len(stats.names), np.nan)
    if n_items < 2 or n_bootstrap < 1 or not resampled:
        return nan, nan.copy(), np.zeros(len(stats.names), dtype=int)

    def statistic(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        # samples[h] (B, n_h): the response indices drawn from stratum h, one row a resample.
        drawn = np.concatenate([np.atleast_2d(s) for s in samples], axis=-1)
        rows = drawn.shape[0]
        flat = (np.arange(rows)[:, None] * n_items + drawn).ravel()
        counts = np.bincount(flat, minlength=rows * n_items).reshape(rows, n_items)
        return stats.resampled(counts + fixed)

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        res = bootstrap(
            resampled,
            statistic,
            paired=False,
            vectorized=True,
            n_resamples=n_bootstrap,
            confidence_level=confidence,
            method="percentile",
            random_state=np.random.default_rng(seed),
        )
        dist = np.asarray(res.bootstrap_distribution).reshape(len(stats.names), -1)
        low = np.asarray(res.confidence_interval.low, dtype=float).reshape(-1)
        high = np.asarray(res.confidence_interval.high, dtype=float).reshape(-1)
        undefined = np.isnan(dist).sum(axis=1)
        # scipy's percentile interval is NaN once any resample is undefined: the same
        # percentiles over the defined resamples instead (np.nanpercentile, linear).
        redo = np.isnan(low) & (undefined < dist.shape[1])
        if redo.any():
            alpha = (1 - confidence) / 2
            q = np.nanpercentile(dist[redo], [100 * alpha, 100 * (1 - alpha)], axis=1)
            low[redo], high[redo] = q[0], q[1]
    return low, high, undefined
