"""Impact previews of key changes before they are published (issue 18 item 4).

`draft_impact` compares a draft key edition with the latest published one: each model's
score, band and rank under both (the methodology report's comparison: the cached boards
of `scoring.selectors.board_for_edition`, `engine.compare_leaderboards` and the
report's correction margin, so there is one copy of the scoring formula), and per change in the draft the move of each model due to that question alone
(`engine.impact.question_effects`). A removal is exact at once; a correction needs
grades against the draft's new entry (a preview re-score of the draft edition, whose
grades are keyed to that entry and so are reused when the draft is published, rule 8).
Until every correction is graded the figures are marked partial and never as final.

`pending_impacts` gives the approvals page each pending proposal's impact: a removal
exactly (the current edition without that question), a correction what previewing it
will grade. Both read per-question contributions cached by the edition's data version,
so a page view recomputes nothing while no grade, entry or exclusion changed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.db.models import Count

from engine import compare_leaderboards
from engine.impact import Contributions, contributions, question_effects, scores_without
from questions.models import KeyEdition, KeyEntry, Question, Response
from questions.selectors import latest_published_edition
from scoring.models import Grade, ScoringRun
from scoring.runs.selectors import latest_run
from scoring.runs.services.pairs import active_graders
from scoring.selectors import (
    CACHE_TIMEOUT,
    BoardResult,
    JudgeSet,
    _judge_filter,
    board_for_edition,
    data_version,
    load_edition_grades,
    resolve_judges,
)


@dataclass(frozen=True)
class Graders:
    """Who can grade a preview: `judge_ids` (active, with a backend) and `notes` in words on
    every judge left out; `sentence` says plainly when nobody can grade."""

    judge_ids: list[str]
    notes: list[str]

    @property
    def sentence(self) -> str | None:
        """The sentence for the page when no judge can grade (naming why), else None."""
        if self.judge_ids:
            return None
        why = "; ".join(self.notes) or "the benchmark has no judge"
        return f"No judge can grade these responses ({why}), so corrections cannot be previewed."


def preview_graders(edition: KeyEdition) -> Graders:
    """Return the judges a preview re-score of `edition` would use (those of the re-score
    after publishing, `scoring.runs.services.pairs.active_graders`) and notes on the others."""
    usable, notes = active_graders(edition)
    return Graders(sorted(j.judge_id for j in usable), notes)


def comparison_edition(edition: KeyEdition) -> KeyEdition | None:
    """Return the edition a preview compares `edition` with: for a draft the latest
    published edition of its benchmark (what readers see now), else its parent."""
    if edition.is_published():
        return edition.parent
    return latest_published_edition(edition.benchmark) or edition.parent


def edition_contributions(
    edition: KeyEdition, judge_set: JudgeSet | None = None
) -> Contributions | None:
    """Return the per-question contributions of `edition` (judge panel by default), cached
    under the edition's data version (`scoring.selectors.data_version`); None when no
    grade row is usable."""
    judge_set = judge_set or resolve_judges(edition.benchmark)
    version = data_version(edition, list(judge_set.judges))
    key = (
        "scoring:contrib:"
        + hashlib.sha1(
            repr((edition.pk, judge_set.kind, judge_set.ids, version)).encode()
        ).hexdigest()
    )
    hit = cache.get(key)
    if hit is not None:
        return hit or None
    data = load_edition_grades(edition, judge_set=judge_set)
    result = contributions(data.table) if data.table is not None else None
    cache.set(key, result or False, CACHE_TIMEOUT)
    return result


def _rounded(values: dict[Any, float | None]) -> dict[str, float | None]:
    return {str(m): (None if v is None else round(v, 4)) for m, v in values.items()}


def _graded_pairs(entry_pks: list[int], judge_set: JudgeSet) -> dict[int, int]:
    """Return {key entry pk: grade rows of the set's judges (at their versions) against it}."""
    if not entry_pks or not judge_set.judges:
        return {}
    rows = (
        Grade.objects.filter(key_entry_id__in=entry_pks)
        .filter(_judge_filter(list(judge_set.judges)))
        .order_by()
        .values("key_entry_id")
        .annotate(n=Count("id"))
    )
    return {r["key_entry_id"]: r["n"] for r in rows}


def responses_per_question(question_pks: list[int]) -> dict[int, int]:
    """Return {question pk: number of responses to it}; one query."""
    rows = (
        Response.objects.filter(question_id__in=question_pks)
        .order_by()
        .values("question_id")
        .annotate(n=Count("id"))
    )
    return {r["question_id"]: r["n"] for r in rows}


def _change_rows(
    draft: KeyEdition, judge_set: JudgeSet, draft_c: Contributions | None, base_c
) -> list[dict[str, Any]]:
    """One row per entry of the draft: kind, grading state and each model's move due to
    that question alone (None until a correction is fully graded)."""
    entries = list(
        KeyEntry.objects.filter(edition=draft)
        .select_related("question")
        .order_by("question__question_id")
    )
    n_judges = len(judge_set.judges)
    responses = responses_per_question([e.question_id for e in entries])
    graded = _graded_pairs([e.pk for e in entries if not e.removed], judge_set)
    rows = []
    for entry in entries:
        qid = entry.question.question_id
        n = responses.get(entry.question_id, 0)
        row: dict[str, Any] = {
            "question_id": qid,
            "question_pk": entry.question_id,
            "entry_pk": entry.pk,
            "kind": "removal" if entry.removed else "correction",
            "reason": entry.reason,
            "n_responses": n,
            "n_judges": n_judges,
            "pairs": n * n_judges,
            "pairs_graded": 0 if entry.removed else min(graded.get(entry.pk, 0), n * n_judges),
        }
        row["graded"] = entry.removed or row["pairs_graded"] >= row["pairs"]
        row["effects"] = None
        if row["graded"] and draft_c is not None:
            row["effects"] = _rounded(question_effects(draft_c, [qid], other=base_c)[qid])
        rows.append(row)
    return rows


def _comparison(draft: KeyEdition, base: KeyEdition | None) -> dict[str, Any]:
    """The methodology report's comparison of `base` -> `draft` (rule 10): both boards
    from `scoring.selectors.board_for_edition` (cached), then `compare_boards`."""
    board = board_for_edition(draft)
    return compare_boards(board_for_edition(base) if base is not None else None, board)


def compare_boards(base_board: BoardResult | None, board: BoardResult) -> dict[str, Any]:
    """Compare two boards as the methodology report does (rule 10): `compare_leaderboards`
    and the report's correction margin (the largest score move against the band gap).

    The one comparison of two boards for previews: two editions under one panel (the
    draft's impact) or one edition under two panels (the candidate panel, issue 31).
    Returns {"models": the report's `model_moves` ("original" = `base_board`, "corrected" =
    `board`) each with `change` in points, "band_changes", "top3_unchanged",
    "bottom5_unchanged", "kendall_tau", "correction_margin", "complete" (of `board`),
    "notes"}; empty figures when either side has no leaderboard.
    """
    from scoring.board.report import _correction_margin

    complete = bool(board.completeness.complete) if board.completeness else False
    out: dict[str, Any] = {
        "models": [],
        "band_changes": [],
        "top3_unchanged": None,
        "bottom5_unchanged": None,
        "kendall_tau": None,
        "correction_margin": None,
        "complete": complete,
        "notes": list(board.notes) + (list(board.leaderboard.notes) if board.leaderboard else []),
    }
    if base_board is None or base_board.leaderboard is None or board.leaderboard is None:
        return out
    robust = compare_leaderboards(base_board.leaderboard, board.leaderboard).to_dict()
    doc = {"model_moves": robust["models"], "complete": complete}
    _correction_margin(doc, board.band_gap)
    for m in robust["models"]:
        a, b = m["score_original"], m["score_corrected"]
        out["models"].append({**m, "change": None if a is None or b is None else round(b - a, 2)})
    out.update(
        band_changes=robust["band_changes"],
        top3_unchanged=robust["top3_unchanged"],
        bottom5_unchanged=robust["bottom5_unchanged"],
        kendall_tau=robust["kendall_tau"],
        correction_margin=doc["correction_margin"],
    )
    out["notes"] += [n for n in robust["notes"] if n not in out["notes"]]
    return out


def draft_impact(draft: KeyEdition) -> dict[str, Any]:
    """Return the impact of `draft` against `comparison_edition(draft)` as a JSON-safe dict.

    Keys: `edition`, `base` (names; base None when nothing is published: then `models` is
    empty), `models` (the report's `model_moves`: score/rank/band under base
    ("original") and draft ("corrected") in percent, plus `change` in points),
    `band_changes`, `top3_unchanged`, `bottom5_unchanged`, `kendall_tau`,
    `correction_margin`, `changes` (`_change_rows`), `not_graded` (corrections lacking
    grades), `partial` (True while a correction lacks grades or the draft's figures lack
    any grade: the figures are then not the draft's final ones), `notes`, `graders`
    (`Graders`), `preview_run` (the draft's newest grade run or None). Judges: the panel.
    The figures are cached under both editions' data versions, so a page view after the
    first recomputes nothing while no grade, entry or exclusion changed.
    """
    base = comparison_edition(draft)
    judge_set = resolve_judges(draft.benchmark)
    judges = list(judge_set.judges)
    versions = (
        draft.pk,
        base.pk if base else None,
        judge_set.kind,
        judge_set.ids,
        data_version(draft, judges),
        data_version(base, judges) if base else None,
    )
    key = "scoring:impact:" + hashlib.sha1(repr(versions).encode()).hexdigest()
    figures = cache.get(key)
    if figures is None:
        figures = _comparison(draft, base)
        draft_c = edition_contributions(draft, judge_set)
        base_c = edition_contributions(base, judge_set) if base is not None else None
        figures["changes"] = _change_rows(draft, judge_set, draft_c, base_c)
        cache.set(key, figures, CACHE_TIMEOUT)
    not_graded = [c for c in figures["changes"] if not c["graded"]]
    return {
        **{k: v for k, v in figures.items() if k != "complete"},
        "edition": draft.name,
        "edition_status": draft.status,
        "base": base.name if base else None,
        "not_graded": not_graded,
        "partial": bool(not_graded) or not figures["complete"],
        "graders": preview_graders(draft),
        "preview_run": latest_run(draft, kind=ScoringRun.Kind.GRADE),
    }


def pending_impacts(
    edition: KeyEdition, proposals: list[tuple[Any, str, str]]
) -> dict[Any, dict[str, Any]]:
    """Return {key: impact} for pending proposals given as (key, question_id, kind).

    `edition` is the one approval would change (the draft if open, else the latest
    published). kind "remove": `changes` {model: points} of the leaderboard without that
    question vs with it, exact, with `before`/`after` scores in percent, and `ungraded`
    (question ids of the draft's corrections not graded yet, left out of both). kind "correct":
    `pairs` = responses x judges a preview re-score will grade once it is approved
    (`n_responses`, `n_judges`), and `graders`. Other kinds: {}.
    """
    judge_set = resolve_judges(edition.benchmark)
    current = edition_contributions(edition, judge_set)
    graders = preview_graders(edition)
    pk_of = dict(
        Question.objects.filter(
            benchmark=edition.benchmark, question_id__in=[q for _, q, _ in proposals]
        ).values_list("question_id", "pk")
    )
    responses = responses_per_question(list(pk_of.values()))
    # A draft's own corrections still lacking grades are left out of its current figures.
    ungraded = (
        [r["question_id"] for r in _change_rows(edition, judge_set, None, None) if not r["graded"]]
        if not edition.is_published()
        else []
    )
    before = scores_without(current, []) if current is not None else {}
    out: dict[Any, dict[str, Any]] = {}
    for key, qid, kind in proposals:
        if kind == "remove":
            after = scores_without(current, [qid]) if current is not None else {}
            out[key] = {
                "kind": kind,
                "ungraded": ungraded,
                "before": _rounded(before),
                "after": _rounded(after),
                "changes": {
                    str(m): (None if b is None or after.get(m) is None else round(after[m] - b, 2))
                    for m, b in before.items()
                },
            }
        elif kind == "correct":
            n = responses.get(pk_of.get(qid), 0)
            out[key] = {
                "kind": kind,
                "n_responses": n,
                "n_judges": len(graders.judge_ids),
                "pairs": n * len(graders.judge_ids),
                "graders": graders,
            }
        else:
            out[key] = {}
    return out
