"""The approvals page's impact column (issue 18 item 4): what approving each pending
proposal does to the leaderboard, from `scoring.board.impact.pending_impacts`."""

from __future__ import annotations

from typing import Any

from questions.models import KeyEdition, KeyEntry
from questions.selectors import latest_published_edition
from scoring.board.impact import pending_impacts
from scoring.runs.estimate import estimate_run, estimate_summary
from scoring.runs.services import active_graders


def open_drafts(benchmark: str = "") -> list[KeyEdition]:
    """Return the draft key editions (of the benchmark named, or of all), by benchmark name."""
    qs = KeyEdition.objects.filter(status=KeyEdition.Status.DRAFT).select_related("benchmark")
    if benchmark:
        qs = qs.filter(benchmark__name=benchmark)
    return list(qs.order_by("benchmark__name"))


def attach_proposal_impacts(proposals: list[Any]) -> None:
    """Set `p.impact` (a dict, {} when nothing applies) on each pending proposal.

    The edition an approval changes is the benchmark's draft when one is open, else its
    latest published edition: a removal's impact is that edition's leaderboard without the
    question vs with it (exact); a correction's is what a preview re-score will grade once
    it is in the draft. `p.impact_edition` names that edition. One `pending_impacts` call
    per benchmark; its per-question sums are cached by the edition's data version.
    """
    by_benchmark: dict[int, list[Any]] = {}
    for p in proposals:
        by_benchmark.setdefault(p.item.benchmark_id, []).append(p)
    for benchmark_id, group in by_benchmark.items():
        draft = KeyEdition.objects.filter(
            benchmark_id=benchmark_id, status=KeyEdition.Status.DRAFT
        ).first()
        edition = draft or latest_published_edition(benchmark_id)
        if edition is None:
            for p in group:
                p.impact, p.impact_edition = {}, None
            continue
        impacts = pending_impacts(
            edition, [(p.pk, p.item.question.question_id, p.action) for p in group]
        )
        judges: list[Any] | None = None
        calibrations: dict[int, Any] = {}  # each judge calibrated once for the whole page
        for p in group:
            p.impact, p.impact_edition = impacts.get(p.pk, {}), edition
            p.estimate_summary = ""
            if p.impact.get("kind") == "correct" and not p.impact["graders"].sentence:
                if judges is None:
                    judges, _ = active_graders(edition)
                estimate = estimate_run(
                    edition=edition,
                    judges=judges,
                    candidates=[candidate_entry(p)],
                    calibrations=calibrations,
                )
                p.estimate_summary = estimate_summary(estimate)


def candidate_entry(proposal: Any) -> KeyEntry:
    """Return the key entry approving a correction would create, unsaved: its answer and
    citation as proposal_approve writes them (for the estimate of grading it; never saved)."""
    return KeyEntry(
        question=proposal.item.question,
        answer=proposal.answer,
        citation_doc_id=proposal.citation_doc_id,
        citation_locator=proposal.citation_locator,
        citation_quote=proposal.citation_quote,
        has_citation=bool(proposal.citation_doc_id),
        removed=False,
    )
