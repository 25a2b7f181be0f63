"""The panel against the key: how likely each question's key is wrong, from the models alone.

Pure numpy (no Django). The models are annotators of unknown reliability and the key is one
more annotator: a one-coin Dawid-Skene latent-class model (Dawid & Skene 1979, "Maximum
likelihood estimation of observer error-rates using the EM algorithm", *Applied
Statistics* 28:20-28) fitted by EM, in which each model's chance of being right on a
question is Rasch-shaped, ``p[q, m] = sigmoid(ability[m] - difficulty[q])`` (the GLAD
model of Whitehill et al. 2009, "Whose vote should count more", NIPS 22, with the
difficulty additive as in Rasch 1960), so a hard question is not mistaken for a wrong key.

What each question q offers (at most one observation per response, never both):

- **answers**: the final answers the reader could read (labels 0..K_q-1 grouped by
  sameness, the key's label among them). The latent truth ``z[q]`` is one of those
  labels or "none of them" (column ``K_max``). A model gives the truth with chance
  ``p[q, m]``; otherwise one of the K_q answers seen, evenly (the one-coin assumption:
  ``(1 - p) / K_q`` each).
- **grades** (only for responses whose answer was not read, or every response when the
  key itself was not read, or where the answer read and the grade contradict each
  other: the key's answer read but the lowest grade of the scale given, or another
  answer read but the highest grade given; the judge read the whole response, the
  reader only its end): the normalised grade ``g`` in [0, 1], read as a fractional
  Bernoulli "agrees with the key". If the key is right, ``P(agree) = p``; if it is wrong,
  a model agrees only when it is wrong too and its wrong answer is the key's:
  ``P(agree) = (1 - p) * c``, with the coincidence rate ``c`` fitted.
- **the key** says its own label with reliability ``pi`` (fitted: the panel's estimate of
  the share of sound keys), otherwise one of the other K_q answers evenly; with the key
  unread the classes are just "key right" (column 0) / "key wrong" (column ``K_max``).

The class prior is uniform, so the prior odds that a key is wrong are ``(1 - pi) / pi``
for every question, and the **Bayes factor** of the panel's evidence is the posterior
odds over those prior odds; ``log10_bf`` is it in log10 units (bans: 1 = ten to one).

EM: E-step the class posteriors; M-step ``pi`` and ``c`` in closed form (Beta(1, 1)
smoothed) and one diagonal Newton step for abilities and difficulties on the expected
"model is right" targets with Gaussian priors (abilities N(0, 2²), difficulties
N(0, s²) with s² re-estimated from the difficulties, at least 0.25). Stops when no
posterior moves by more than ``tol`` or after ``max_iter`` rounds. Cost per round is
O(Q * M); a 1,001 x 18 panel converges in well under a second.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from .table import GradeTable

#: EM stops when no class posterior changes by more than this between rounds.
DEFAULT_TOL = 1e-5
#: Rounds at most (a cap; convergence is reached long before on every corpus measured).
DEFAULT_MAX_ITER = 300
_ABILITY_VAR = 4.0
_MIN_DIFFICULTY_VAR = 0.25
_EPS = 1e-6
_LN10 = np.log(10.0)


@dataclass(frozen=True)
class PanelData:
    """The inputs of :func:`fit_panel` for Q questions and M models.

    - ``question_ids`` (Q,), ``model_ids`` (M,): labels for the result.
    - ``labels`` (Q, M) int: the response's answer as a label 0..K_q-1, -1 = none read.
    - ``key_label`` (Q,) int: the key's label, -1 = the key's answer was not read (then
      that question's ``labels`` are ignored and only grades count).
    - ``n_labels`` (Q,) int: K_q, the distinct answers read on q (the key's included).
    - ``grades`` (Q, M) float in [0, 1] or NaN (no grade), or None (no grades at all).
    """

    question_ids: Sequence[Hashable]
    model_ids: Sequence[Hashable]
    labels: np.ndarray
    key_label: np.ndarray
    n_labels: np.ndarray
    grades: np.ndarray | None = None

    def __post_init__(self) -> None:
        q, m = len(self.question_ids), len(self.model_ids)
        if self.labels.shape != (q, m):
            raise ValueError(f"labels has shape {self.labels.shape}, expected {(q, m)}")
        if self.key_label.shape != (q,) or self.n_labels.shape != (q,):
            raise ValueError("key_label and n_labels need one entry per question")
        if self.grades is not None and self.grades.shape != (q, m):
            raise ValueError(f"grades has shape {self.grades.shape}, expected {(q, m)}")
        read = self.key_label >= 0
        if np.any(self.labels >= np.maximum(self.n_labels, 1)[:, None]):
            raise ValueError("a label is not below n_labels of its question")
        if np.any(self.key_label[read] >= self.n_labels[read]):
            raise ValueError("a key label is not below n_labels of its question")
        if self.grades is not None:
            g = self.grades[~np.isnan(self.grades)]
            if g.size and (g.min() < 0 or g.max() > 1):
                raise ValueError("grades must be normalised to [0, 1]")


@dataclass(frozen=True)
class PanelFit:
    """The fitted panel. Arrays follow ``PanelData``'s order.

    - ``p_wrong`` (Q,): posterior probability that the key's answer is not the true one.
    - ``log10_bf`` (Q,): log10 Bayes factor of the models' evidence for "key wrong"
      against "key right" (0 = no evidence either way; NaN never).
    - ``best_label`` (Q,) int: the most probable true label other than the key's
      (-1 = "none of the answers read" or the key unread).
    - ``key_reliability``: fitted ``pi``, the share of keys the panel takes as right.
    - ``abilities`` (M,): fitted model abilities (logits); ``difficulties`` (Q,).
    - ``coincidence``: fitted chance that a wrong model's answer is a wrong key's.
    - ``labels_used`` (Q, M) int: the labels the fit read (-1 where a label was dropped
      because the grade contradicts it, or the key was unread).
    - ``log10_lr_best`` (Q,): log10 likelihood ratio of the models' evidence (the key's own
      say left out) for the likeliest other answer read against the key's answer; > 0 when
      the panel's maximum-likelihood answer is not the key's; NaN where no other answer
      was read or the key was unread.
    - ``iterations``, ``converged``.
    """

    question_ids: Sequence[Hashable]
    model_ids: Sequence[Hashable]
    p_wrong: np.ndarray
    log10_bf: np.ndarray
    best_label: np.ndarray
    key_reliability: float
    abilities: np.ndarray
    difficulties: np.ndarray
    coincidence: float
    iterations: int
    converged: bool
    labels_used: np.ndarray | None = None
    log10_lr_best: np.ndarray | None = None

    @property
    def prior_log10_odds(self) -> float:
        """Return log10 of the prior odds that a key is wrong, (1 - pi) / pi."""
        pi = self.key_reliability
        return float(np.log10((1 - pi) / pi))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


@dataclass(frozen=True)
class _Observed:
    """What the EM reads, derived once from PanelData (arrays as in fit_panel's body)."""

    key_read: np.ndarray  # (Q,) bool
    k: np.ndarray  # (Q,) the key's label (0 where unread)
    n_lab: np.ndarray  # (Q,) K_q, at least 1
    labels: np.ndarray  # (Q, M) labels counted (-1: none, unread key, or contradicted)
    ans: np.ndarray  # (Q, M) bool: an answer label is counted
    gmask: np.ndarray  # (Q, M) bool: a grade is counted (no answer counted)
    g: np.ndarray  # (Q, M) the grade where counted, else 0
    k_max: int
    valid: np.ndarray  # (Q, K_max + 1) bool: classes that exist on q
    log_w: np.ndarray  # (Q,) -log K_q
    ai: np.ndarray  # rows, columns and labels of the counted answers
    aj: np.ndarray
    al: np.ndarray

    @property
    def rows(self) -> np.ndarray:
        return np.arange(len(self.k))


def _observed(data: PanelData) -> _Observed:
    """Return the observations the fit counts: one per response (module docstring)."""
    n_q, n_m = data.labels.shape
    key_read = data.key_label >= 0
    k = np.where(key_read, data.key_label, 0)
    n_lab = np.where(key_read, np.maximum(data.n_labels, 1), 1)
    labels = np.where(key_read[:, None], data.labels, -1)
    grades = data.grades if data.grades is not None else np.full((n_q, n_m), np.nan)
    # The key's answer read but the lowest grade given (or another answer and the highest) is a
    # misreading by one side; the judge read the whole response, so its grade counts.
    graded = ~np.isnan(grades)
    with np.errstate(invalid="ignore"):
        conflict = (
            graded
            & (labels >= 0)
            & (((labels == k[:, None]) & (grades == 0)) | ((labels != k[:, None]) & (grades == 1)))
        )
    labels = np.where(conflict, -1, labels)
    ans = labels >= 0
    gmask = graded & ~ans  # one observation per response: the answer if read
    k_max = int(n_lab.max()) if n_q else 1
    cols = np.arange(k_max + 1)
    ai, aj = np.nonzero(ans)
    return _Observed(
        key_read=key_read,
        k=k,
        n_lab=n_lab,
        labels=labels,
        ans=ans,
        gmask=gmask,
        g=np.where(gmask, grades, 0.0),
        k_max=k_max,
        valid=(cols[None, :] < n_lab[:, None]) | (cols[None, :] == k_max),
        log_w=-np.log(n_lab.astype(float)),
        ai=ai,
        aj=aj,
        al=labels[ai, aj],
    )


def _initial_abilities(obs: _Observed) -> np.ndarray:
    """Return each model's starting ability: the logit of its agreement with the keys."""
    agree = np.where(obs.ans, obs.labels == obs.k[:, None], np.where(obs.gmask, obs.g, np.nan))
    with np.errstate(invalid="ignore"):
        rate = np.nanmean(np.where(np.isnan(agree).all(axis=0), 0.5, agree), axis=0)
    rate = np.clip(np.nan_to_num(rate, nan=0.5), 0.05, 0.95)
    return np.log(rate / (1 - rate))


def _e_step(obs: _Observed, p: np.ndarray, pi: float, coin: float) -> tuple[np.ndarray, np.ndarray]:
    """Return (panel log-likelihood per class (Q, K_max + 1), -inf where no class; posterior)."""
    rows, k = obs.rows, obs.k
    log_p, log_q = np.log(p), np.log1p(-p)
    wrong = log_q + obs.log_w[:, None]
    ll = np.where(obs.ans, wrong, 0.0).sum(axis=1)[:, None] * np.ones((1, obs.k_max + 1))
    np.add.at(ll, (obs.ai, obs.al), log_p[obs.ai, obs.aj] - wrong[obs.ai, obs.aj])
    a_wrong = np.clip((1 - p) * coin, _EPS, 1 - _EPS)
    g, gmask = obs.g, obs.gmask
    ll_g_right = np.where(gmask, g * log_p + (1 - g) * log_q, 0.0).sum(axis=1)
    ll_g_wrong = np.where(gmask, g * np.log(a_wrong) + (1 - g) * np.log1p(-a_wrong), 0.0).sum(
        axis=1
    )
    ll += ll_g_wrong[:, None]
    ll[rows, k] += ll_g_right - ll_g_wrong
    panel_ll = np.where(obs.valid, ll, -np.inf)
    # the key as one more annotator
    key_term = np.full(panel_ll.shape, np.log(1 - pi)) + obs.log_w[:, None]
    key_term[rows, k] = np.log(pi)
    full = panel_ll + key_term
    full -= full.max(axis=1, keepdims=True)
    post = np.exp(full)
    post /= post.sum(axis=1, keepdims=True)
    return panel_ll, post


def _m_step(
    obs: _Observed,
    post: np.ndarray,
    p: np.ndarray,
    coin: float,
    ability: np.ndarray,
    difficulty: np.ndarray,
    d_var: float,
) -> tuple[float, float, np.ndarray, np.ndarray, float]:
    """Return the next (pi, coin, ability, difficulty, d_var) (module docstring's M-step)."""
    g, gmask = obs.g, obs.gmask
    right = post[obs.rows, obs.k]
    pi = float((right.sum() + 1) / (len(right) + 2))
    denom = p + (1 - p) * (1 - coin)
    coin_n = ((1 - right)[:, None] * g * gmask).sum()
    miss_n = ((1 - right)[:, None] * (1 - g) * gmask * (1 - p) * (1 - coin) / denom).sum()
    coin = float(np.clip((coin_n + 1) / (coin_n + miss_n + 2), 1e-3, 0.999))
    target = np.zeros(p.shape)
    target[obs.ai, obs.aj] = post[obs.ai, obs.al]
    g_target = right[:, None] * g + (1 - right)[:, None] * (1 - g) * p / denom
    target = np.where(gmask, g_target, target)
    seen = obs.ans | gmask
    resid = np.where(seen, target - p, 0.0)
    curv = np.where(seen, p * (1 - p), 0.0)
    ability = ability + (resid.sum(axis=0) - ability / _ABILITY_VAR) / (
        curv.sum(axis=0) + 1 / _ABILITY_VAR
    )
    difficulty = difficulty - (resid.sum(axis=1) + difficulty / d_var) / (
        curv.sum(axis=1) + 1 / d_var
    )
    d_var = max(_MIN_DIFFICULTY_VAR, float(np.mean(difficulty**2)))
    return pi, coin, ability, difficulty, d_var


def fit_panel(
    data: PanelData, *, tol: float = DEFAULT_TOL, max_iter: int = DEFAULT_MAX_ITER
) -> PanelFit:
    """Fit the model of the module docstring to ``data`` by EM and return a :class:`PanelFit`.

    A question with no usable observation keeps p_wrong = 1 - pi and log10_bf = 0. Raises
    ValueError for ``tol`` <= 0 or ``max_iter`` < 1 (and PanelData's own shape errors).
    """
    if tol <= 0 or max_iter < 1:
        raise ValueError("tol must be positive and max_iter at least 1")
    obs = _observed(data)
    n_q = len(obs.k)
    ability = _initial_abilities(obs)
    difficulty = np.zeros(n_q)
    pi, coin, d_var = 0.9, 0.1, 1.0
    post = panel_ll = None
    converged = False
    it = 0
    while it < max_iter:
        it += 1
        p = np.clip(_sigmoid(ability[None, :] - difficulty[:, None]), _EPS, 1 - _EPS)
        panel_ll, new_post = _e_step(obs, p, pi, coin)
        delta = np.inf if post is None else float(np.abs(new_post - post).max())
        post = new_post
        if delta < tol:
            converged = True
            break
        pi, coin, ability, difficulty, d_var = _m_step(
            obs, post, p, coin, ability, difficulty, d_var
        )
    if n_q == 0:
        empty = np.zeros(0)
        return PanelFit(
            data.question_ids, data.model_ids, empty, empty, empty.astype(int), pi,
            ability, difficulty, coin, it, True,
        )  # fmt: skip
    rows, k = obs.rows, obs.k
    others = np.where(obs.valid, panel_ll, -np.inf)
    others[rows, k] = -np.inf
    top = others.max(axis=1)
    lse = top + np.log(np.exp(others - top[:, None]).sum(axis=1))
    log_bf = (lse + obs.log_w - panel_ll[rows, k]) / _LN10
    alt = np.where(obs.valid, post, -1.0)
    alt[rows, k] = -1.0
    best = alt.argmax(axis=1)
    best = np.where((best == obs.k_max) | ~obs.key_read, -1, best)
    answers = others.copy()
    answers[:, obs.k_max] = -np.inf  # another answer read, not "none of them"
    lr_best = (answers.max(axis=1) - panel_ll[rows, k]) / _LN10
    lr_best = np.where(np.isfinite(lr_best) & obs.key_read, lr_best, np.nan)
    return PanelFit(
        question_ids=data.question_ids,
        model_ids=data.model_ids,
        p_wrong=1.0 - post[rows, k],
        log10_bf=log_bf,
        best_label=best,
        key_reliability=pi,
        abilities=ability,
        difficulties=difficulty,
        coincidence=coin,
        iterations=it,
        converged=converged,
        labels_used=obs.labels,
        log10_lr_best=lr_best,
    )


def normalised_grades(table: GradeTable) -> np.ndarray:
    """Return one normalised grade per response, shape (Q, M), values 0-1, NaN where none.

    0 is the lowest grade of the scale and 1 the highest. Where every judge graded and
    they agree this is the agreed grade (rule 1); otherwise the mean of the judges'
    parsed grades, so a one-judge panel uses that judge's grades and two judges who
    differ give the midpoint (a fractional "agrees with the key").
    """
    values = table.grade_values(table.codes)  # (Q, M, J), NaN where absent or null
    lo, span = float(table.scale[0]), float(table.scale[-1] - table.scale[0])
    norm = (values - lo) / span
    counts = np.sum(~np.isnan(norm), axis=2)
    sums = np.nansum(norm, axis=2)
    out = np.full(counts.shape, np.nan)
    np.divide(sums, counts, out=out, where=counts > 0)
    return out
