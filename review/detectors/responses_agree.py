"""Detector `responses_agree_against_key`: the models' final answers agree on another answer.

Issue 17 item 2; needs no grades. Each response's final answer and the key's are read
with the one answer reader, judges.answers.final_answer (JSON answer fields,
\\boxed{}, "Answer:" phrases, lettered choices in any style, literals, signed numbers,
units; over the reference judge's figure parser); the key is read strictly (a conclusion
sentence or its last sentences; of several figures the one the question asks about) and
each response is read for the same kind of answer as the key. An unread or ambiguous
reading counts for neither side; a key whose own reading is unread or ambiguous raises
nothing (issue 27 items 1 and 4).

It fires, with the agreed answer as a suggested correction, when the most common answer
differs from the key's and either

- a clear majority of all the models that answered give it (more than half of them,
  counting models whose answer could not be read), or
- with model scores known (the leaderboard's), at least half of the strongest half
  (ceil(n/2) models by score) give it, at least MIN_AGREEING models, and no other
  answer is given by as many of that half.

Thresholds from first principles, not tuned on any benchmark: "more than half" is the
plain majority; "half of the strongest half, unopposed" is the smallest share of the best
models that is not outweighed within that half; MIN_AGREEING = 2 because one model alone
is a single opinion (methodology rule 4's standard).
"""

from __future__ import annotations

from collections.abc import Mapping

from judges.answers import Answer, read_key_and_responses
from questions.models import Response

MIN_AGREEING = 2


def _largest_group(answers: list[tuple[str, Answer]]) -> tuple[Answer | None, list[str], int]:
    """Return (answer, models giving it, size of the next largest group) of answered models."""
    groups: list[tuple[Answer, list[str]]] = []
    for model, ans in answers:
        for rep, members in groups:
            if rep.same_as(ans):
                members.append(model)
                break
        else:
            groups.append((ans, [model]))
    if not groups:
        return None, [], 0
    groups.sort(key=lambda g: (-len(g[1]), g[1][0]))
    runner_up = len(groups[1][1]) if len(groups) > 1 else 0
    return groups[0][0], sorted(groups[0][1]), runner_up


def responses_agree_detail(
    *,
    question: str,
    key_answer: str,
    responses: Mapping[str, str],
    scores: Mapping[str, float] | None = None,
) -> dict | None:
    """Return the evidence detail for one question, or None when the detector does not fire.

    `responses`: {model_id: response text}; `scores`: {model_id: overall score %} or None.
    Detail keys: "key_answer", "suggested_answer" (labels as read, sign and unit kept),
    "answer_kind", "models" (those giving the suggested answer, with "answer" and, where
    known, "overall_score"), "n_models", "n_read" (answers read unambiguously), "n_key"
    (models giving the key's answer), "n_unread" (no answer could be read), "n_ambiguous"
    (read, but with other candidates beside it), "basis" ("majority" or
    "strongest_half"), and for the latter "n_strongest". Silent when the key's own answer
    is unread or ambiguous (the evidence could not say what the key says); unread and
    ambiguous responses count for neither side.
    """
    key, readings = read_key_and_responses(
        key_answer, dict(sorted(responses.items())), question=question
    )
    if not key.is_read or key.ambiguous or not responses:
        return None
    read = {m: a for m, a in readings.items() if a.is_read and not a.ambiguous}
    basis, n_strongest = None, None
    answer, models, _ = _largest_group(list(read.items()))
    if answer is not None and answer.differs_from(key) and len(models) >= MIN_AGREEING:
        if 2 * len(models) > len(responses):
            basis = "majority"
    if basis is None and scores:
        ranked = sorted(responses, key=lambda m: (-scores.get(m, 0.0), m))
        n_strongest = (len(ranked) + 1) // 2
        top = [(m, read[m]) for m in ranked[:n_strongest] if m in read]
        answer, models, runner_up = _largest_group(top)
        if (
            answer is not None
            and answer.differs_from(key)
            and len(models) >= max(MIN_AGREEING, (n_strongest + 1) // 2)
            and len(models) > runner_up
        ):
            basis = "strongest_half"
    if basis is None:
        return None
    detail = {
        "key_answer": key.label,
        "suggested_answer": answer.label,
        "answer_kind": answer.kind,
        "models": [
            {"model": m, "answer": read[m].label}
            | ({"overall_score": round(scores[m], 2)} if scores and m in scores else {})
            for m in models
        ],
        "n_models": len(responses),
        "n_read": len(read),
        "n_key": sum(1 for a in read.values() if a.same_as(key)),
        "n_unread": sum(1 for a in readings.values() if not a.is_read),
        "n_ambiguous": sum(1 for a in readings.values() if a.is_read and a.ambiguous),
        "basis": basis,
    }
    if basis == "strongest_half":
        detail["n_strongest"] = n_strongest
    return detail


def describe(detail: Mapping) -> str:
    """Return a responses-agree detail in words: the key's answer as read, the models' with counts.

    E.g. "4 of 7 models answer 3, not the key's 0 (1 gives the key's answer, 2 unread)";
    with basis "strongest_half": "2 of the 4 strongest models answer ...". Never raises
    for a dict (missing counts are left out).
    """
    who = (
        f"of the {detail.get('n_strongest')} strongest models"
        if detail.get("basis") == "strongest_half"
        else f"of {detail.get('n_models', '?')} models"
    )
    text = (
        f"{len(detail.get('models', []))} {who} answer {detail.get('suggested_answer')}, "
        f"not the key's {detail.get('key_answer')}"
    )
    counts = []
    if "n_key" in detail:
        n = detail["n_key"]
        counts.append(f"{n} {'gives' if n == 1 else 'give'} the key's answer")
    if detail.get("n_unread"):
        counts.append(f"{detail['n_unread']} unread")
    if detail.get("n_ambiguous"):
        counts.append(f"{detail['n_ambiguous']} ambiguous")
    return text + (f" ({', '.join(counts)})" if counts else "")


def responses_agree_findings(
    entries: Mapping[int, object], scores: Mapping[str, float] | None = None
) -> list[tuple[int, dict]]:
    """Return [(question pk, detail)] where the responses agree against the key (one query).

    `entries`: {question pk: its effective KeyEntry} (answer text read from `.answer`);
    `scores`: the leaderboard's {model_id: score %}, or None/empty when there are no grades.
    """
    by_question: dict[int, dict[str, str]] = {}
    question_text: dict[int, str] = {}
    for qpk, model_id, text, qtext in (
        Response.objects.filter(question_id__in=list(entries))
        .order_by()
        .values_list("question_id", "model__model_id", "text", "question__text")
    ):
        by_question.setdefault(qpk, {})[model_id] = text
        question_text[qpk] = qtext
    found = []
    for qpk, responses in sorted(by_question.items()):
        detail = responses_agree_detail(
            question=question_text[qpk],
            key_answer=entries[qpk].answer,
            responses=responses,
            scores=scores,
        )
        if detail is not None:
            found.append((qpk, detail))
    return found
