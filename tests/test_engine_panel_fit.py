"""engine.panel_fit: the panel of models against the key (issue 27 item 2)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.panel_fit import PanelData, fit_panel

N_Q, N_M = 12, 6


def agreeing(n_q=N_Q, n_m=N_M):
    """Every model gives the key's answer (label 0) on every question."""
    return (
        np.zeros((n_q, n_m), dtype=np.int64),
        np.zeros(n_q, dtype=np.int64),
        np.ones(n_q, dtype=np.int64),
    )


def data(labels, key, n_labels, grades=None):
    return PanelData(list(range(len(key))), [f"m{j}" for j in range(labels.shape[1])],
                     labels, key, n_labels, grades)  # fmt: skip


def test_answers_alone_every_model_against_the_key():
    labels, key, n = agreeing()
    labels[3] = 1  # on question 3 all six models answer another thing
    n[3] = 2
    fit = fit_panel(data(labels, key, n))
    assert fit.converged
    assert fit.p_wrong[3] > 0.99 and fit.best_label[3] == 1
    assert fit.log10_bf[3] > 2
    assert np.all(np.delete(fit.p_wrong, 3) < 0.05)
    assert np.all(np.delete(fit.log10_bf, 3) < 0)


def test_the_ablest_models_outweigh_a_common_wrong_answer():
    """The key equals the answer of the three weakest models; the three ablest agree on
    another. Abilities come from the other questions, where only the ablest are right."""
    labels, key, n = agreeing()
    labels[:, 3:] = 1  # models m3-m5 give a wrong answer everywhere ...
    n[:] = 2
    labels[0, :3], labels[0, 3:] = 1, 0  # ... and on question 0 the key agrees with them
    fit = fit_panel(data(labels, key, n))
    assert fit.abilities[:3].min() > fit.abilities[3:].max()
    assert fit.p_wrong[0] > 0.5 and fit.best_label[0] == 1
    assert fit.p_wrong[1:].max() < 0.5


def test_a_hard_question_with_scattered_answers_is_not_a_wrong_key():
    labels, key, n = agreeing()
    labels[5] = [0, 0, 1, 2, 3, 4]  # the two ablest give the key's answer, the rest scatter
    n[5] = 5
    fit = fit_panel(data(labels, key, n))
    assert fit.p_wrong[5] < 0.5


def test_grades_alone_on_a_0_1_scale_and_no_evidence_is_neutral():
    labels = np.full((N_Q, N_M), -1, dtype=np.int64)
    key = np.full(N_Q, -1, dtype=np.int64)  # key unread: grades only
    n = np.ones(N_Q, dtype=np.int64)
    grades = np.ones((N_Q, N_M))
    grades[2] = 0.0  # everyone graded wrong against the key on question 2
    grades[7] = np.nan  # question 7: nothing at all
    fit = fit_panel(data(labels, key, n, grades))
    assert fit.p_wrong[2] > 0.9 and fit.log10_bf[2] > 1
    assert fit.best_label[2] == -1  # no answer to suggest from grades alone
    # no observation: the Bayes factor is exactly 1 and the posterior the prior
    assert fit.log10_bf[7] == pytest.approx(0.0, abs=1e-12)
    assert fit.p_wrong[7] == pytest.approx(1 - fit.key_reliability)
    # prior odds of a wrong key: 1 - pi over pi, pi fitted from the share of sound keys
    assert fit.key_reliability > 0.75


def test_fractional_grades_of_two_judges_who_differ():
    labels = np.full((N_Q, N_M), -1, dtype=np.int64)
    key = np.full(N_Q, -1, dtype=np.int64)
    grades = np.ones((N_Q, N_M))
    grades[4] = 0.5  # two judges split on every response of question 4
    grades[6] = 0.0
    fit = fit_panel(data(labels, key, np.ones(N_Q, dtype=np.int64), grades))
    assert fit.p_wrong[6] > fit.p_wrong[4] > fit.p_wrong[0]


def test_bad_input_is_refused():
    labels, key, n = agreeing()
    with pytest.raises(ValueError, match="labels has shape"):
        data(labels[:, :2], key, n).__class__(list(range(N_Q)), ["a"], labels, key, n)
    labels[0, 0] = 3
    with pytest.raises(ValueError, match="not below n_labels"):
        data(labels, key, n)
    with pytest.raises(ValueError, match="normalised"):
        data(np.zeros((N_Q, N_M), dtype=np.int64), key, n, np.full((N_Q, N_M), 2.0))
    with pytest.raises(ValueError, match="tol"):
        fit_panel(data(np.zeros((N_Q, N_M), dtype=np.int64), key, n), tol=0)


def test_the_likeliest_other_answer_is_scored_against_the_key_without_the_keys_own_say():
    """log10_lr_best, worked by hand after one round (max_iter=1: the E-step at the
    starting values). Question 0: all 7 models give the key's answer. Question 1: m0 gives
    the key's answer (label 0), m1-m6 another (label 1), K = 2. Starting abilities are the
    logits of each model's agreement with the keys clipped to [0.05, 0.95]: m0 2/2 -> 0.95,
    the others 1/2 -> 0.5; difficulties 0, pi 0.9.
    ln L(key) = ln 0.95 + 6 ln(0.5 / 2); ln L(other) = ln(0.05 / 2) + 6 ln 0.5, so the
    ratio is ln(0.025 / 0.95) + 6 ln 2 = 0.5208 nats = 0.2262 bans: the models alone favour
    the other answer. With the key's say (pi = 0.9 against 0.1 / 2 per other class) the
    posterior still sides with the key: p_wrong = (r1 + r_none) / (1 + r1 + r_none) with
    r1 = e^0.5208 x 0.05 / 0.9 and r_none = (0.025 / 0.95) x 0.05 / 0.9 ("none of them":
    every model wrong)."""
    import math

    labels = np.zeros((2, 7), dtype=np.int64)
    labels[1, 1:] = 1
    fit = fit_panel(data(labels, np.zeros(2, dtype=np.int64), np.array([1, 2])), max_iter=1)
    lr = math.log(0.025 / 0.95) + 6 * math.log(2)
    assert fit.log10_lr_best[1] == pytest.approx(lr / math.log(10), abs=1e-6)
    assert np.isnan(fit.log10_lr_best[0])  # no other answer read
    r1 = math.exp(lr) * 0.05 / 0.9
    r_none = (0.025 / 0.95) * 0.05 / 0.9
    assert fit.p_wrong[1] == pytest.approx((r1 + r_none) / (1 + r1 + r_none), abs=1e-6)
    assert fit.p_wrong[1] < 0.5 < 10 ** fit.log10_lr_best[1]
