"""Which responses of a key edition lack a grade from a judge whose grades count (rule 12).

A figure that lacks grades says so, never silently counting fewer responses. The engine
sees only responses with at least one grade row; a response that no judge of the set has
graded against the edition's effective entry (say, after a correction, a judge with
imported grades only and no backend) would otherwise vanish from the score unseen. This
module counts them from the responses themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from questions.models import Response
from scoring.models import Judge
from scoring.refs import EntryMap, JudgeRef


@dataclass(frozen=True)
class JudgeGap:
    """Responses (and their distinct questions) one judge has no grade row for."""

    judge_id: str
    responses: int
    questions: int
    has_backend: bool


@dataclass
class Completeness:
    """Missing grades of the responses of an edition's scored questions.

    ``responses_total``: responses of scored questions; ``responses_missing_grade``: those
    lacking a grade row (a null, unparsed grade is a grade) from at least one judge of the
    set; ``by_model`` / ``by_question``: that count per model_id / question_id (only
    non-zero entries); ``by_judge``: per judge with a gap.
    """

    edition: str
    responses_total: int
    responses_missing_grade: int
    by_model: dict[str, int] = field(default_factory=dict)
    by_question: dict[str, int] = field(default_factory=dict)
    by_judge: list[JudgeGap] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.responses_missing_grade == 0

    def sentences(self) -> list[str]:
        """Return one plain sentence per judge with a gap, saying what to do about it."""
        out = []
        for gap in self.by_judge:
            what = (
                f"{gap.responses} response{'' if gap.responses == 1 else 's'} of "
                f"{gap.questions} question{'' if gap.questions == 1 else 's'} "
                f"{'has' if gap.responses == 1 else 'have'} no grade "
                f"from {gap.judge_id} against {self.edition}"
            )
            if gap.has_backend:
                fix = f"re-score them (manage.py rescore --edition {self.edition})"
            else:
                fix = "it has no backend; re-score with another panel or import grades"
            out.append(f"{what}: {fix}; these responses are not in the scores")
        return out

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON keys: complete, responses_missing_grade, missing_grade_by_question."""
        return {
            "complete": self.complete,
            "responses_missing_grade": self.responses_missing_grade,
            "missing_grade_by_question": [
                {"question_id": q, "n_missing_grade": n}
                for q, n in sorted(self.by_question.items())
            ],
        }


def missing_grades(
    *, edition_name: str, entries: EntryMap, judges: list[JudgeRef], rows: np.ndarray
) -> Completeness:
    """Count the responses of scored questions lacking a grade row from any of `judges`.

    `entries` is the edition's EntryMap, `rows` the (n, 4) int64 grade rows (entry pk, model
    pk, judge pk, grade) of `scoring.selectors.grade_rows` for the same judges, so a grade
    counts exactly when the leaderboard would use it. One query for the responses, one more
    for the judges' backends when something is missing.
    """
    scored_q = entries.question_pk[entries.scored]
    resp = list(
        Response.objects.filter(question_id__in=scored_q.tolist())
        .order_by()
        .values_list("question_id", "model_id", "question__question_id", "model__model_id")
    )
    if not resp or not judges:
        n = len(resp) if judges else 0
        return Completeness(edition_name, n, 0)
    q_pk = np.fromiter((r[0] for r in resp), dtype=np.int64, count=len(resp))
    m_pk = np.fromiter((r[1] for r in resp), dtype=np.int64, count=len(resp))
    width = int(max(m_pk.max(), rows[:, 1].max() if len(rows) else 0)) + 1
    resp_key = q_pk * width + m_pk
    entry_to_q = dict(zip(entries.entry_pk.tolist(), entries.question_pk.tolist(), strict=True))
    row_q = np.fromiter((entry_to_q[e] for e in rows[:, 0].tolist()), dtype=np.int64)
    row_key = row_q * width + rows[:, 1] if len(rows) else np.empty(0, dtype=np.int64)
    any_missing = np.zeros(len(resp), dtype=bool)
    gaps: list[tuple[str, int, int, int]] = []
    for judge in judges:
        lacking = ~np.isin(resp_key, row_key[rows[:, 2] == judge.pk] if len(rows) else row_key)
        if lacking.any():
            gaps.append(
                (judge.judge_id, judge.pk, int(lacking.sum()), len(np.unique(q_pk[lacking])))
            )
        any_missing |= lacking
    if not gaps:
        return Completeness(edition_name, len(resp), 0)
    backends = dict(Judge.objects.filter(pk__in=[g[1] for g in gaps]).values_list("pk", "backend"))
    by_model: dict[str, int] = {}
    by_question: dict[str, int] = {}
    for i in np.flatnonzero(any_missing).tolist():
        by_model[resp[i][3]] = by_model.get(resp[i][3], 0) + 1
        by_question[resp[i][2]] = by_question.get(resp[i][2], 0) + 1
    return Completeness(
        edition=edition_name,
        responses_total=len(resp),
        responses_missing_grade=int(any_missing.sum()),
        by_model=by_model,
        by_question=by_question,
        by_judge=[JudgeGap(j, n, k, bool(backends.get(pk))) for j, pk, n, k in gaps],
    )


FIGURES_STATES = ("complete", "re-scoring", "incomplete")


def describe_figures(doc: dict[str, Any]) -> dict[str, str]:
    """Return the one state of a leaderboard document's figures, and it in words.

    `doc` carries `complete`, `responses_missing_grade`, `stale`, `stale_reason` and
    `stale_run_status` (`scoring.board.views.leaderboard_doc`, where `stale` is never true
    beside `complete`: issue 31). Returns {"figures_state": one of FIGURES_STATES,
    "figures_state_words": a sentence}: "complete" (every response of a scored question
    has a grade from each judge of the set), "re-scoring" (a pending or running run owes
    grades these figures count: the stale reason) or "incomplete" (grades are missing and
    no run is under way for them; the stale reason says which run stopped, when one did).
    """
    missing = int(doc.get("responses_missing_grade") or 0)
    lack = f"{missing} response{'' if missing == 1 else 's'} of scored questions lack a grade"
    reason = doc.get("stale_reason") or ""
    if doc.get("stale") and doc.get("stale_run_status") in ("pending", "running"):
        state, words = "re-scoring", f"Being re-scored: {reason}".strip()
    elif doc.get("complete") is False or doc.get("stale"):
        state = "incomplete"
        words = f"Incomplete: {lack} and are not in the scores." + (f" {reason}" if reason else "")
    else:
        state = "complete"
        words = "Complete: every response of a scored question has a grade from each judge."
    return {"figures_state": state, "figures_state_words": words}
