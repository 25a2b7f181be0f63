"""Re-asking unparsed judge replies (issue 17): how often a pair was asked, whether to ask
again, and which replies stay unparsed past SNAGLIST_UNPARSED_RETRIES (triage evidence).

Reads only; re-scoring (scoring.runs.services.pairs) and review's detector use them.
"""

from __future__ import annotations

from collections.abc import Iterable

from questions.models import KeyEdition
from scoring.models import Grade, Judge, JudgeCall
from scoring.selectors import effective_entries, scoring_judges


def answered_attempts(pairs: Iterable[tuple[int, int, int, str]]) -> dict[tuple, int]:
    """Return {(response id, judge id, key entry id, prompt version): calls sent} (1 query).

    A call sent is a ledger row (scoring.models.JudgeCall) with outcome `ok` (the judge
    replied, parsed or not) or `lost` (sent and paid; a later run that takes the pair again
    marks the earlier runs' `ok` rows lost, ledger.mark_lost_many). Pairs with none are
    absent. Used to cap how often an unparsed reply is asked again
    (SNAGLIST_UNPARSED_RETRIES, issue 17).
    """
    wanted = set(pairs)
    if not wanted:
        return {}
    counts: dict[tuple, int] = {}
    for pair in (
        JudgeCall.objects.filter(
            outcome__in=[JudgeCall.Outcome.OK, JudgeCall.Outcome.LOST],
            response_id__in={p[0] for p in wanted},
            judge_id__in={p[1] for p in wanted},
        )
        .order_by()
        .values_list("response_id", "judge_id", "key_entry_id", "prompt_version")
    ):
        if pair in wanted:
            counts[pair] = counts.get(pair, 0) + 1
    return counts


def asks_left(grade_is_null: bool, answered: int, retries: int) -> bool:
    """Return True when a pair's stored grade should be asked for again (issue 17).

    Only a null (unparsed) grade is asked again, while its calls sent (answered_attempts)
    do not exceed `retries` (the first ask plus `retries` more). An imported null grade has
    no call: it is asked (when its judge can grade).
    """
    return grade_is_null and answered <= retries


def unparsed_past_retries(edition: KeyEdition, retries: int) -> dict[int, list[dict]]:
    """Return {question pk: [{"model", "judge", "asked"}]} of replies that stay unparsed.

    A pair of the edition's current judge panel (scoring_judges, current prompt versions)
    whose grade against the question's effective entry is null and will not be asked
    again: its calls sent (answered_attempts) exceed `retries`, or its judge cannot grade (no backend or
    inactive: imported grades only). Three queries plus the entries' selector.
    """
    entries = effective_entries(edition)
    judges = {j.pk: j for j in Judge.objects.filter(benchmark_id=edition.benchmark_id)}
    panel = {ref.pk: ref.prompt_version for ref in scoring_judges(edition.benchmark)}
    entry_q = dict(zip(entries.entry_pk.tolist(), entries.question_pk.tolist(), strict=True))
    rows = list(
        Grade.objects.filter(
            key_entry_id__in=list(entry_q), judge_id__in=list(panel), grade__isnull=True
        )
        .order_by()
        .values_list(
            "response_id", "judge_id", "key_entry_id", "prompt_version", "response__model__model_id"
        )
    )
    rows = [r for r in rows if panel.get(r[1]) == r[3]]
    answered = answered_attempts(r[:4] for r in rows)
    out: dict[int, list[dict]] = {}
    for r in rows:
        judge = judges[r[1]]
        can_ask = bool(judge.backend) and judge.active
        asked = answered.get(r[:4], 0)
        if can_ask and asks_left(True, asked, retries):
            continue
        out.setdefault(entry_q[r[2]], []).append(
            {"model": r[4], "judge": judge.judge_id, "asked": asked}
        )
    return {q: sorted(v, key=lambda d: (d["model"], d["judge"])) for q, v in out.items()}
