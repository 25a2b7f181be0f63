"""The candidate panel beside the judge panel: what adopting it would change (issue 31).

Reads only. `candidate_judge_set` gives the candidate's judges as a JudgeSet of kind
CANDIDATE; `candidate_preview` computes, for one key edition, both boards (the cached
`scoring.selectors.board_for_edition`, one with the candidate's judge set), compares
them with `scoring.board.impact.compare_boards` (the one comparison of two boards: which models
move, which bands change), and adds for each side the agreement, the band support
(supported band boundaries of the paired neighbour comparisons), the top-3 flip count
(`scoring.board.report._flip_count`), the figures' state in words, and the cost: what the
candidate's grades cost so far (the judge-call ledger, `scoring.runs.costs.calls_cost`) and
what grading the rest would (`scoring.runs.estimate.estimate_run`). Nothing public calls it.
"""

from __future__ import annotations

from typing import Any

from questions.models import Benchmark, KeyEdition
from scoring.selectors import (
    CANDIDATE,
    BoardResult,
    JudgeRef,
    JudgeSet,
    board_for_edition,
    effective_entries,
    load_edition_grades,
    resolve_judges,
)


def candidate_judge_set(benchmark: Benchmark) -> JudgeSet | None:
    """Return the benchmark's candidate panel as a JudgeSet (kind CANDIDATE, by judge id),
    or None when no candidate is defined. One query."""
    from scoring.models import CandidateMember

    refs = tuple(
        JudgeRef(pk, jid, pv)
        for pk, jid, pv in CandidateMember.objects.filter(benchmark=benchmark)
        .order_by("judge__judge_id")
        .values_list("judge_id", "judge__judge_id", "prompt_version")
    )
    return JudgeSet(refs, CANDIDATE) if refs else None


def _side(board: BoardResult, edition: KeyEdition, judge_set: JudgeSet) -> dict[str, Any]:
    """One panel's figures for the page and the API: its leaderboard document (with the
    figures' one state), agreement pairs, band support and top-3 flip count."""
    from scoring.board.report import _flip_count
    from scoring.board.views import leaderboard_doc

    doc = leaderboard_doc(board, edition)
    flip = None
    if board.leaderboard is not None:
        data = load_edition_grades(edition, judge_set=judge_set)
        flip = _flip_count(data, board.leaderboard)
    return {
        "panel": board.panel,
        "judge_set": board.judge_set,
        "leaderboard": doc,
        "agreement_rate": doc.get("agreement_rate"),
        "agreement": board.agreement_dict()["pairs"],
        "n_bands": doc.get("n_bands", 0),
        "band_boundaries": doc.get("band_boundaries", 0),
        "band_boundaries_supported": doc.get("band_boundaries_supported", 0),
        "top3_flip_count": flip,
        "figures_state": doc["figures_state"],
        "figures_state_words": doc["figures_state_words"],
    }


def candidate_cost(edition: KeyEdition, judge_set: JudgeSet) -> dict[str, Any]:
    """Return what the candidate's grades of `edition` cost and would cost.

    `spent`: `scoring.runs.costs.calls_cost` of the ledger's calls by the candidate's judges at
    its prompt versions, against the edition's effective key entries, leaving out the
    (judge, version) pairs the judge panel shares (their grades were bought for it).
    `estimate`: `scoring.runs.estimate.estimate_run` of a re-score for the candidate's judges
    that can grade for it (`candidate_graders`), as JSON (`RunEstimate.as_json`), with
    `summary` its sentence; `skipped`: notes on members a run cannot grade for.
    """
    from django.db.models import Q

    from scoring.models import JudgeCall
    from scoring.runs.costs import calls_cost
    from scoring.runs.estimate import estimate_run, estimate_summary
    from scoring.runs.services.candidate import candidate_graders
    from scoring.selectors import panel_judges

    shared = {(j.pk, j.prompt_version) for j in panel_judges(edition.benchmark)}
    own = [j for j in judge_set.judges if (j.pk, j.prompt_version) not in shared]
    spent = None
    if own:
        which = Q(pk__in=[])
        for j in own:
            which |= Q(judge_id=j.pk, prompt_version=j.prompt_version)
        entries = effective_entries(edition).entry_pk.tolist()
        spent = calls_cost(
            JudgeCall.objects.filter(which, key_entry_id__in=entries, response__isnull=False)
        )
    graders, skipped = candidate_graders(edition.benchmark)
    estimate = estimate_run(edition=edition, judges=graders)
    return {
        "spent": spent,
        "estimate": {**estimate.as_json(), "summary": estimate_summary(estimate)},
        "skipped": skipped,
        "graders": [j.judge_id for j in graders],
    }


def candidate_preview(edition: KeyEdition, *, banding: str = "gap") -> dict[str, Any] | None:
    """Return the candidate panel of `edition`'s benchmark beside its judge panel, or None
    when no candidate is defined.

    Keys: `edition`, `published` and `candidate` (`_side`: panel, leaderboard document,
    agreement, bands and band support, top-3 flip count, figures' state),
    `comparison` (`scoring.board.impact.compare_boards` published -> candidate: `models` with
    score/rank/band under each and `change` in points, `band_changes`, `top3_unchanged`,
    `bottom5_unchanged`, `kendall_tau`, `correction_margin` (the largest move against the
    band gap), `notes`), `models_moved` (ids whose rank or band differs), `cost`
    (`candidate_cost`). Both boards are cached by their data versions.
    """
    from scoring.board.impact import compare_boards

    judge_set = candidate_judge_set(edition.benchmark)
    if judge_set is None:
        return None
    panel_set = resolve_judges(edition.benchmark)
    published = board_for_edition(edition, banding=banding, judge_set=panel_set)
    candidate = board_for_edition(edition, banding=banding, judge_set=judge_set)
    comparison = compare_boards(published, candidate)
    moved = [
        m["model_id"]
        for m in comparison["models"]
        if m["band_changed"] or (m["rank_original"] != m["rank_corrected"])
    ]
    return {
        "benchmark": edition.benchmark.name,
        "edition": edition.name,
        "published": _side(published, edition, panel_set),
        "candidate": _side(candidate, edition, judge_set),
        "comparison": comparison,
        "models_moved": moved,
        "cost": candidate_cost(edition, judge_set),
    }
