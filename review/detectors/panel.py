"""Detector `panel_against_key`: the panel of models, weighed by fitted reliability, against the key.

Issue 27 item 2. The statistic is engine.panel_fit.fit_panel (a one-coin
Dawid-Skene model with a Rasch difficulty per question, the key as one more annotator;
method and sources in its docstring). This module only builds its inputs:

- answers: each response's final answer and the key's, read by
  judges.answers.read_key_and_responses (the key strictly, each response for the key's kind
  and unit) and grouped by ``Answer.same_as``; an answer that is unread or ambiguous is no
  label (it is never a disagreement);
- grades: the leaderboard's grade table (scoring.selectors.load_edition_grades, this
  run's exclusions unscored), normalised 0-1 of the scale (engine.panel_fit.
  normalised_grades: any scale, one judge or two), used for a response whose answer
  was not read.

It fires where the panel makes the key more likely wrong than right: posterior
``p_wrong`` > 1/2, the Bayes decision with equal costs, i.e. a Bayes factor above the
prior odds ``pi / (1 - pi)`` that the fit itself estimates from the share of keys it
takes as sound. It also fires where the models' evidence alone (the key's own say, its
fitted reliability ``pi``, left out) makes another answer that models gave likelier
than the key's: the maximum-likelihood answer is not the key's (``log10_lr_best`` > 0).
That second line catches a key that is the panel's natural distractor, where the even
spread of the key's errors over the K answers seen (the one-coin key) divides the
alternative's weight by K; such an item keeps the panel's (negative) Bayes factor as its
weight, so it is queued low (review.priority). No grade or share cut-off: a weak panel
and a strong one are weighed by their own fitted reliabilities.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from engine import GradeTable
from engine.panel_fit import PanelData, PanelFit, fit_panel, normalised_grades
from judges.answers import read_key_and_responses
from questions.models import Response

#: Fires above this posterior probability that the key is wrong (module docstring).
FIRE_P_WRONG = 0.5


def panel_fired(kind: str, detail: Mapping) -> bool:
    """Return whether a piece of evidence raises its item: False only for the panel's figure
    where it did not fire (module docstring: p_wrong at or under its threshold, and no
    other answer models gave more likely than the key's on the models' evidence alone).

    Triage files the panel's figure on every item other evidence raised (and on every open
    item), so review.priority can order those items by it (issue 27 item 3); such a piece
    orders the item but does not raise it, so triage's counts, the closed-item check and
    the detector scorecard leave it out.
    """
    if kind != "panel_against_key":
        return True
    detail = detail or {}
    if float(detail.get("p_wrong") or 0) > float(detail.get("threshold", FIRE_P_WRONG)):
        return True
    return float(detail.get("log10_lr_best") or 0) > 0 and bool(detail.get("models"))


def _is_read(answer: Any) -> bool:
    # an unread Answer is falsy; an ambiguous reading names other candidates too and is
    # no label either.
    return bool(answer) and not getattr(answer, "ambiguous", False)


def _read(question: str, key_text: str, responses: Mapping[str, str]):
    """Return (key Answer or None, [representative Answer per label], {model: label})."""
    key, readings = read_key_and_responses(
        key_text, dict(sorted(responses.items())), question=question
    )
    if not _is_read(key):
        return None, [], {}
    groups = [key]
    labels: dict[str, int] = {}
    for model, ans in readings.items():
        if not _is_read(ans):
            continue
        for i, rep in enumerate(groups):
            if rep.same_as(ans):
                labels[model] = i
                break
        else:
            labels[model] = len(groups)
            groups.append(ans)
    return key, groups, labels


def panel_inputs(
    entries: Mapping[int, Any],
    texts: Mapping[int, str],
    responses: Mapping[int, Mapping[str, str]],
    table: GradeTable | None,
    qid_of: Mapping[int, Any],
) -> tuple[PanelData, dict[int, dict]]:
    """Return (PanelData, {question pk: reading}) for ``entries`` {question pk: KeyEntry}.

    ``texts``: {pk: question text}; ``responses``: {pk: {model_id: response text}};
    ``table``: the grade table or None; ``qid_of``: {pk: question_id}. A question is in
    the data when it has responses or grades. The reading per pk: {"key", "groups",
    "labels"} (see :func:`_read`).
    """
    models = set()
    for by_model in responses.values():
        models.update(by_model)
    grades = qrow = None
    if table is not None:
        models.update(table.model_ids)
        grades = normalised_grades(table)
        grades = np.where(table.scored[:, None], grades, np.nan)
        qrow = {qid: i for i, qid in enumerate(table.question_ids)}
    model_ids = sorted(models)
    col = {m: j for j, m in enumerate(model_ids)}
    pks = sorted(
        pk for pk in entries if responses.get(pk) or (qrow is not None and qid_of.get(pk) in qrow)
    )
    n_q, n_m = len(pks), len(model_ids)
    labels = np.full((n_q, n_m), -1, dtype=np.int64)
    key_label = np.full(n_q, -1, dtype=np.int64)
    n_labels = np.ones(n_q, dtype=np.int64)
    g = np.full((n_q, n_m), np.nan) if table is not None else None
    readings: dict[int, dict] = {}
    if g is not None:
        tcols = np.array([col[m] for m in table.model_ids], dtype=np.int64)
    for i, pk in enumerate(pks):
        key, groups, by_model = _read(texts.get(pk, ""), entries[pk].answer, responses.get(pk, {}))
        readings[pk] = {"key": key, "groups": groups, "labels": by_model}
        if key is not None:
            key_label[i] = 0
            n_labels[i] = len(groups)
            for m, lab in by_model.items():
                labels[i, col[m]] = lab
        if g is not None and qid_of.get(pk) in qrow:
            g[i, tcols] = grades[qrow[qid_of[pk]]]
    data = PanelData(
        question_ids=pks,
        model_ids=model_ids,
        labels=labels,
        key_label=key_label,
        n_labels=n_labels,
        grades=g,
    )
    return data, readings


def _finite_or_none(values: np.ndarray | None, i: int) -> float | None:
    if values is None or not np.isfinite(values[i]):
        return None
    return round(float(values[i]), 3)


def panel_detail(fit: PanelFit, i: int, reading: dict, data: PanelData) -> dict:
    """Return the evidence detail of question row ``i`` of ``fit``.

    Keys: "p_wrong" (0-1), "log10_bf" (bans), "log10_lr_best" (bans: the likeliest other
    answer against the key's on the models' evidence alone, None when there is none),
    "prior_p_wrong" (1 - the fitted key
    reliability), "basis" ("answers", "grades" or "answers and grades": what the fit
    read on this question), "n_models" (with an answer or a grade), "n_read" (answers
    read), "n_key" (models giving the key's answer), "key_answer" / "suggested_answer"
    (labels as read; the suggestion only when the most probable true answer is one that
    models gave), "models" (those giving it: {"model", "answer", "ability"}, ablest
    first), "n_graded", "mean_grade" (0-1, over every graded response), "threshold";
    "n_read" and "n_key" count only the answers the fit read (a reading the grade
    contradicts is left out, engine.panel_fit).
    """
    key, groups, by_model = reading["key"], reading["groups"], reading["labels"]
    if fit.labels_used is not None:  # only the answers the fit counted (not contradicted)
        col = {m: j for j, m in enumerate(data.model_ids)}
        by_model = {m: lab for m, lab in by_model.items() if fit.labels_used[i, col[m]] >= 0}
    ability = dict(zip(data.model_ids, fit.abilities.tolist(), strict=True))
    graded = np.zeros(0)
    if data.grades is not None:
        row = data.grades[i]
        graded = row[~np.isnan(row)]
    n_answers = len(by_model)
    n_graded_only = (
        int(np.sum(~np.isnan(data.grades[i]) & (data.labels[i] < 0))) if graded.size else 0
    )
    basis = (
        "answers and grades"
        if n_answers and graded.size
        else ("answers" if n_answers else "grades")
    )
    detail: dict[str, Any] = {
        "p_wrong": round(float(fit.p_wrong[i]), 4),
        "log10_bf": round(float(fit.log10_bf[i]), 3),
        "log10_lr_best": _finite_or_none(fit.log10_lr_best, i),
        "prior_p_wrong": round(1 - fit.key_reliability, 4),
        "threshold": FIRE_P_WRONG,
        "basis": basis,
        "n_models": n_answers + n_graded_only,
        "n_read": n_answers,
        "n_graded": int(graded.size),
    }
    if graded.size:
        detail["mean_grade"] = round(float(graded.mean()), 3)
    if key is not None:
        detail["key_answer"] = key.label
        detail["n_key"] = sum(1 for lab in by_model.values() if lab == 0)
        best = int(fit.best_label[i])
        if best > 0:
            givers = sorted(
                (m for m, lab in by_model.items() if lab == best),
                key=lambda m: (-ability[m], m),
            )
            detail["suggested_answer"] = groups[best].label
            detail["models"] = [
                {"model": m, "answer": groups[best].label, "ability": round(ability[m], 2)}
                for m in givers
            ]
    return detail


def panel_findings(
    entries: Mapping[int, Any],
    table: GradeTable | None,
    qid_of: Mapping[int, Any],
) -> tuple[list[tuple[int, dict]], dict[int, dict]]:
    """Return ([(pk, detail)] where the detector fires, {pk: detail} for every question fitted).

    ``entries``: {question pk: its effective KeyEntry}; ``table``: the edition's grade
    table with this run's exclusions unscored, or None; ``qid_of``: {pk: question_id}.
    The second mapping lets triage weigh the panel's figure on items raised by other
    evidence (review.priority). One query for the responses.
    """
    responses: dict[int, dict[str, str]] = {}
    texts: dict[int, str] = {}
    for qpk, model_id, text, qtext in (
        Response.objects.filter(question_id__in=list(entries))
        .order_by()
        .values_list("question_id", "model__model_id", "text", "question__text")
    ):
        responses.setdefault(qpk, {})[model_id] = text
        texts[qpk] = qtext
    missing = [pk for pk in entries if pk not in texts]
    if missing:
        from questions.models import Question

        texts.update(Question.objects.filter(pk__in=missing).values_list("pk", "text"))
    data, readings = panel_inputs(entries, texts, responses, table, qid_of)
    if not data.question_ids:
        return [], {}
    fit = fit_panel(data)
    every = {pk: panel_detail(fit, i, readings[pk], data) for i, pk in enumerate(data.question_ids)}
    fired = [(pk, d) for pk, d in sorted(every.items()) if panel_fired("panel_against_key", d)]
    return fired, every
