"""Which judges can grade, and which pairs of an edition lack a current grade or verdict (rule 8).

A pair is needed when no Grade (or AuditVerdict) exists for it against the edition's
*current effective* key entry and the judge's *current* prompt_version; every other pair
is reused and never re-bought. Reads only; below the run lifecycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db.models import QuerySet

from questions.models import KeyEdition, Response
from questions.selectors import edition_ancestry_ids, scored_entries
from scoring.models import AuditVerdict, Grade, Judge, PanelMember, ScoringRun
from scoring.runs.retries import answered_attempts, asks_left
from scoring.runs.services.tunables import unparsed_retries
from scoring.runs.services.work import Pair


def graders_for(
    judges: Iterable[Judge], *, role: str = Judge.Role.JUDGE
) -> tuple[list[Judge], list[str]]:
    """Split judges into those that can grade (active, with a backend, right role) and notes.

    Returns (judges that can work, human-readable notes about each one skipped).
    A judge with an empty backend carries imported grades only (bundle-format.md).
    """
    usable: list[Judge] = []
    notes: list[str] = []
    for judge in judges:
        if judge.role != role:
            kind = judge.get_role_display().lower()
            article = "an" if kind[:1] in "aeiou" else "a"
            notes.append(f"{judge.judge_id}: skipped, it is {article} {kind}")
        elif not judge.backend:
            notes.append(f"{judge.judge_id}: skipped, no backend (imported grades only)")
        elif not judge.active:
            notes.append(f"{judge.judge_id}: skipped, inactive")
        else:
            usable.append(judge)
    return usable, notes


def benchmark_graders(edition: KeyEdition, *, role: str = Judge.Role.JUDGE) -> QuerySet[Judge]:
    """Return every judge (or auditor) of the edition's benchmark, able to grade or not, by
    judge id: what graders_for splits (an estimate passes them all, so its notes say why
    each one left out was skipped)."""
    return Judge.objects.filter(benchmark_id=edition.benchmark_id, role=role).order_by("judge_id")


def active_graders(
    edition: KeyEdition, *, role: str = Judge.Role.JUDGE
) -> tuple[list[Judge], list[str]]:
    """Return the benchmark's judges (or auditors) that can grade, and notes on the others."""
    return graders_for(benchmark_graders(edition, role=role), role=role)


def panel_graders(edition: KeyEdition) -> tuple[list[Judge], list[str]]:
    """Return the judges of the edition's benchmark's judge panel (methodology rule 12) that
    can grade, and notes on the others (graders_for); a benchmark with no panel: every
    active judge (active_graders), as its figures then use. What a re-score after
    publishing grades with (issue 26: never every active judge of a panel's benchmark). A
    panel judge grades at its current prompt version (rescore_needed_pairs)."""
    seats = PanelMember.objects.filter(benchmark_id=edition.benchmark_id).select_related("judge")
    judges = sorted((seat.judge for seat in seats), key=lambda j: j.judge_id)
    if not judges:
        return active_graders(edition)
    return graders_for(judges)


def rescore_needed_pairs(*, edition: KeyEdition, judges: Sequence[Judge]) -> list[Pair]:
    """Return (response id, judge id, key entry id) for every pair lacking a current grade.

    A pair is a response to a scored question whose effective entry in `edition` is not a
    removal, and a judge from `judges` that can grade. It is needed when no Grade exists
    for (response, judge, that key entry, the judge's current prompt_version), or when that
    Grade is null (an unparsed reply) and was answered at most SNAGLIST_UNPARSED_RETRIES
    times (scoring.runs.retries.asks_left; issue 17). Five queries whatever the size: edition
    tree, entries, scored questions, responses, grades, plus the ledger's answered calls of
    the null grades when there are any.

    Sorted question-major (issue 20): by key entry (one per question), then judge, then
    response, so the calls of one judge for one question's responses are adjacent in the
    run's items (pending_pairs keeps this order) and in its chunks; their prompts share
    one prefix (judges.prompts.JudgePrompt), which the vendor's prompt cache then
    holds warm from the first call to the last. A chunk of 500 pairs still gives every
    judge work (a question has ~18 responses per judge).
    """
    judges, _ = graders_for(judges)
    if not judges:
        return []
    entry_of = scored_entries(edition)
    responses = list(
        Response.objects.filter(question_id__in=list(entry_of)).values_list("pk", "question_id")
        if len(entry_of) < 5000
        else Response.objects.filter(question__benchmark_id=edition.benchmark_id).values_list(
            "pk", "question_id"
        )
    )
    version = {j.pk: j.prompt_version for j in judges}
    stored = [
        (r, j, e, v, g)
        for r, j, e, v, g in Grade.objects.filter(
            judge_id__in=list(version), key_entry__edition_id__in=edition_ancestry_ids(edition)
        ).values_list("response_id", "judge_id", "key_entry_id", "prompt_version", "grade")
        if version.get(j) == v
    ]
    # An unparsed (null) grade is asked again while asks are left (issue 17).
    nulls = [row[:4] for row in stored if row[4] is None]
    answered = answered_attempts(nulls) if nulls else {}
    retries = unparsed_retries()
    have = {
        (r, j, e)
        for r, j, e, v, g in stored
        if not asks_left(g is None, answered.get((r, j, e, v), 0), retries)
    }
    by_entry: dict[int, list[int]] = {}
    for response_id, question_id in responses:
        entry_id = entry_of.get(question_id)
        if entry_id is not None:
            by_entry.setdefault(entry_id, []).append(response_id)
    return [
        (response_id, judge_id, entry_id)
        for entry_id in sorted(by_entry)
        for judge_id in sorted(version)
        for response_id in sorted(by_entry[entry_id])
        if (response_id, judge_id, entry_id) not in have
    ]


def audit_needed_pairs(*, edition: KeyEdition, auditors: Sequence[Judge]) -> list[Pair]:
    """Return (None, auditor id, key entry id) for each entry lacking a current verdict.

    Entries: the effective, non-removed entries of scored questions in `edition`.
    """
    auditors, _ = graders_for(auditors, role=Judge.Role.AUDITOR)
    if not auditors:
        return []
    entry_ids = sorted(scored_entries(edition).values())
    version = {a.pk: a.prompt_version for a in auditors}
    have = {
        (a, e)
        for a, e, v in AuditVerdict.objects.filter(
            auditor_id__in=list(version), key_entry__edition_id__in=edition_ancestry_ids(edition)
        ).values_list("auditor_id", "key_entry_id", "prompt_version")
        if version.get(a) == v
    }
    return [
        (None, auditor_id, entry_id)
        for entry_id in entry_ids
        for auditor_id in sorted(version)
        if (auditor_id, entry_id) not in have
    ]


def total_pairs(edition: KeyEdition, judges: Sequence[Judge], kind: str) -> int:
    """Return how many pairs a run of `kind` over `edition` with `judges` covers: scored
    entries (audit) or their responses (grade), times the judges."""
    entries = scored_entries(edition)
    if kind == ScoringRun.Kind.AUDIT:
        return len(entries) * len(judges)
    n_responses = Response.objects.filter(question_id__in=list(entries)).count()
    return n_responses * len(judges)
