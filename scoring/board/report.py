"""The methodology report (methodology.md rule 12): every figure of the write-up, with provenance.

`build_report` computes every figure of the original write-up from stored data for one key
edition (optionally against a comparison edition) and says, per figure, which key edition,
judges or auditors and which rows it was computed from (`provenance`). The renderers of
the JSON documents (tables, CSV, Markdown) are in `scoring.board.render`, re-exported here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine import agreed_grades, classify_responses, compare_leaderboards, grade_changes
from engine.robustness import GradeChange
from engine.support import top_k_flip_count
from questions.models import KeyEdition, KeyEntry
from questions.selectors import edition_ancestry_ids
from scoring.audit_rule import SINGLE, TO_REVIEW, audit_decisions

# The renderers live in scoring.board.render; their names stay importable from here.
from scoring.board.render import (  # noqa: F401
    LABELS,
    LEADERBOARD_CSV_FIELDS,
    agreement_table,
    banding_sentence,
    boundary_words,
    diagnostics_markdown,
    figure_rows,
    incomplete_sentence,
    leaderboard_csv,
    leaderboard_table,
    panel_cell,
    panel_words,
    report_markdown,
    robustness_lines,
)
from scoring.models import Grade
from scoring.runs.selectors import edition_costs
from scoring.selectors import (
    BoardResult,
    EditionGrades,
    JudgeRef,
    _judge_filter,
    auditors,
    board_for_edition,
    load_edition_grades,
    resolve_judges,
)

# The keys cli.md promises for `report --format json`, in display order.
REPORT_KEYS = (
    "edition",
    "compare_edition",
    "questions_total",
    "questions_scored",
    "excluded_by_audit",
    "removed_by_review",
    "corrected",
    "single_auditor_flags",
    "audit_sent_to_review",
    "judge_flagged",
    "judge_flags_standing",
    "auditor_agreement_rate",
    "responses_total",
    "responses_counted",
    "responses_excluded_disagreement",
    "responses_unparsed",
    "responses_missing_grade",
    "agreement_rate",
    "n_models",
    "n_bands",
    "top3_unchanged",
    "bottom5_unchanged",
    "grade_changes",
)


def _rate(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def _audit_figures(entry_pks: list[int], auditor_refs: list[JudgeRef]) -> dict[str, Any]:
    """Count single-auditor flags and the auditor agreement over the given key entries.

    Rule 4 is decided by `scoring.audit_rule.audit_decisions` (the verdicts that count:
    each auditor's at its current prompt version), as for triage's queue: a single-auditor
    flag is an entry whose outcome is SINGLE (exactly one auditor adverse); `to_review`
    counts every outcome triage queues (TO_REVIEW: single, mixed, not independent). Agreement =
    entries where every auditor gave a parsed verdict and all verdicts are the same /
    entries where every auditor gave a parsed verdict.
    """
    if not auditor_refs or not entry_pks:
        return {"single": 0, "to_review": 0, "agree": 0, "both": 0, "audited": 0}
    decisions = audit_decisions(entry_pks)
    n_auditors = len(auditor_refs)
    single = to_review = agree = both = 0
    for decision in decisions.values():
        if decision.outcome == SINGLE:
            single += 1
        if decision.outcome in TO_REVIEW:
            to_review += 1
        given = [v for _, v, _ in decision.verdicts if v]
        if n_auditors >= 2 and len(given) == n_auditors:
            both += 1
            if len(set(given)) == 1:
                agree += 1
    return {
        "single": single,
        "to_review": to_review,
        "agree": agree,
        "both": both,
        "audited": len(decisions),
    }


def _judge_flag_shortlist(edition: KeyEdition, judges: list[JudgeRef]) -> int:
    """Count the shortlist: distinct questions a judge of `judges` flagged while grading,
    against whichever key entry the question had then (an entry of any edition on the chain
    from `original` to `edition`, removed questions included), so a corrected edition still
    shows the shortlist its corrections came from (cli.md `judge_flagged`, issue 21 item 5).
    """
    if not judges:
        return 0
    return (
        Grade.objects.filter(key_entry__edition_id__in=edition_ancestry_ids(edition), flag=True)
        .filter(_judge_filter(judges))
        .order_by()
        .values("key_entry__question_id")
        .distinct()
        .count()
    )


def _judge_flagged(entry_pks: list[int], judges: list[JudgeRef]) -> int:
    """Count the flags still standing: distinct entries among `entry_pks` (the edition's
    effective entries, one per question) that a judge of `judges` flagged (cli.md
    `judge_flags_standing`)."""
    if not judges or not entry_pks:
        return 0
    return (
        Grade.objects.filter(key_entry_id__in=entry_pks, flag=True)
        .filter(_judge_filter(judges))
        .order_by()
        .values("key_entry_id")
        .distinct()
        .count()
    )


def _corrected_question_pks(data: EditionGrades) -> list[int]:
    """Questions whose effective entry in the edition is a correction (not the root, not removed)."""
    e = data.entries
    mask = (e.entry_edition_pk != e.root_pk) & ~e.removed
    return e.question_pk[mask].tolist()


def _changed_question_ids(data: EditionGrades, compare: EditionGrades) -> list[str]:
    """Question ids whose effective entry differs between the two editions and are kept in `data`."""
    mine = data.entries.as_dict()
    theirs = compare.entries.as_dict()
    removed = dict(
        zip(data.entries.question_pk.tolist(), data.entries.removed.tolist(), strict=True)
    )
    pks = [q for q, entry in mine.items() if theirs.get(q) != entry and not removed[q]]
    id_of = dict(zip(data.questions["pk"], data.questions["question_id"], strict=True))
    return sorted(str(id_of[q]) for q in pks if q in id_of)


def _bands(board: BoardResult) -> list[dict[str, Any]]:
    if board.leaderboard is None:
        return []
    bands: dict[int, list] = {}
    for m in board.leaderboard.models:
        if m.band is not None:
            bands.setdefault(m.band, []).append(m)
    return [
        {
            "band": band,
            "models": [str(m.model_id) for m in rows],
            "score_high": round(max(m.score for m in rows), 4),
            "score_low": round(min(m.score for m in rows), 4),
        }
        for band, rows in sorted(bands.items())
    ]


def build_report(
    edition: KeyEdition,
    *,
    compare: KeyEdition | None = None,
    judge_ids: list[str] | None = None,
) -> dict[str, Any]:
    """Return the methodology report of `edition` as a JSON-safe dict (cli.md keys first).

    Counts are integers, rates fractions 0-1; `top3_unchanged`, `bottom5_unchanged`,
    `kendall_tau` are None and `grade_changes` empty without `compare`. `provenance`
    maps each figure to {edition, judges or auditors, data}. Raises NotFoundError for an
    unknown judge id and DomainError when `compare` belongs to another benchmark.
    """
    from questions.errors import DomainError

    benchmark = edition.benchmark
    if compare is not None and compare.benchmark_id != edition.benchmark_id:
        raise DomainError("the comparison edition belongs to another benchmark")
    judge_set = resolve_judges(benchmark, judge_ids)
    board = board_for_edition(edition, judge_ids=judge_ids)
    data = load_edition_grades(edition, judge_set=judge_set)
    lb = board.leaderboard
    entry_pks = data.entries.entry_pk.tolist()
    audit_refs = auditors(benchmark)
    audit = _audit_figures(entry_pks, audit_refs)
    judges = data.judges
    judge_names = [j.judge_id for j in judges]
    auditor_names = [a.judge_id for a in audit_refs]

    doc: dict[str, Any] = {
        "benchmark": benchmark.name,
        "edition": edition.name,
        "edition_status": edition.status,
        "compare_edition": compare.name if compare else None,
        "judges": judge_names,
        "panel": judge_set.describe(),
        "judge_set": judge_set.kind,
        "auditors": auditor_names,
        "grade_scale": list(benchmark.grade_scale or [0, 1, 2]),
        "questions_total": board.questions_total,
        "questions_scored": board.questions_scored,
        "excluded_by_audit": board.excluded_by_audit,
        "removed_by_review": board.removed_by_review,
        "corrected": len(_corrected_question_pks(data)),
        "single_auditor_flags": audit["single"],
        "audit_sent_to_review": audit["to_review"],
        "judge_flagged": _judge_flag_shortlist(edition, judges),
        "judge_flags_standing": _judge_flagged(entry_pks, judges),
        "auditor_agreement_rate": _rate(audit["agree"], audit["both"]),
        "auditor_pairs_with_verdicts": audit["both"],
        "responses_total": lb.responses_total if lb else 0,
        "responses_counted": lb.responses_counted if lb else 0,
        "responses_excluded_disagreement": lb.responses_excluded_disagreement if lb else 0,
        "responses_unparsed": lb.responses_unparsed if lb else 0,
        "responses_missing_grade": data.completeness.responses_missing_grade,
        "complete": data.completeness.complete,
        "missing_grade_by_question": data.completeness.to_dict()["missing_grade_by_question"],
        "agreement_rate": (
            round(lb.agreement_rate, 4) if lb and lb.agreement_rate is not None else None
        ),
        "n_models": sum(1 for m in lb.models if m.score is not None) if lb else 0,
        "n_bands": lb.n_bands if lb else 0,
        "band_gap": board.band_gap,
        "banding": board.banding,
        "bands": _bands(board),
        "top3_unchanged": None,
        "bottom5_unchanged": None,
        "kendall_tau": None,
        "model_moves": [],
        "correction_margin": None,
        "grade_changes": [],
        "notes": list(board.notes) + (list(lb.notes) if lb else []),
        # what the judge calls of the edition's runs cost (issue 20): tokens and money
        "judge_costs": edition_costs(edition),
    }

    doc["top3_flip_count"] = _flip_count(data, lb)
    if compare is not None:
        _add_comparison(doc, compare, data, board, judge_ids)
        _mark_not_regraded(doc["grade_changes"], data)
    from scoring.board.judge_diagnostics import judge_diagnostics

    doc["judge_diagnostics"] = judge_diagnostics(data)
    from scoring.board.human import human_figures

    # Judges against people (issue 31 item 2): None until a blind sample is drawn.
    doc["human_agreement"] = human_figures(edition, data)
    doc["provenance"] = _provenance(
        edition, compare, board, judge_names, auditor_names, panel_words(doc)
    )
    return doc


def _add_comparison(
    doc: dict[str, Any],
    compare: KeyEdition,
    data: EditionGrades,
    board: BoardResult,
    judge_ids: list[str] | None,
) -> None:
    """Fill the report's comparison figures in `doc` (robustness against `compare`'s
    leaderboard, per-response grade changes of the questions whose key entry differs),
    with the same judges as `data` (the judge panel unless `judge_ids` names others)."""
    lb = board.leaderboard
    cmp_board = board_for_edition(compare, judge_ids=judge_ids)
    cmp_data = load_edition_grades(compare, judge_set=data.judge_set)
    if cmp_board.leaderboard is not None and lb is not None:
        robust = compare_leaderboards(cmp_board.leaderboard, lb).to_dict()
        doc["top3_unchanged"] = robust["top3_unchanged"]
        doc["bottom5_unchanged"] = robust["bottom5_unchanged"]
        doc["kendall_tau"] = robust["kendall_tau"]
        doc["model_moves"] = robust["models"]
        doc["band_changes"] = robust["band_changes"]
        _correction_margin(doc, board.band_gap)
        doc["n_bands_compare"] = robust["n_bands_original"]
        doc["notes"] += [n for n in robust["notes"] if n not in doc["notes"]]
    changed = _changed_question_ids(data, cmp_data)
    if changed and data.table is not None:
        # Scored questions only: a question excluded or removed in one edition is not
        # counted there, so it moves in or out of scoring (newly / no longer counted).
        before = (
            agreed_grades(cmp_data.table, scored_only=True) if cmp_data.table is not None else {}
        )
        after = agreed_grades(data.table, scored_only=True)
        reasons = _entry_reasons(data, changed)
        doc["grade_changes"] = [
            {
                **c.to_dict(),
                "question_id": str(c.question_id),
                "reason": reasons.get(str(c.question_id), ""),
            }
            for c in grade_changes(before, after, question_ids=changed)
        ]
    elif changed:
        doc["grade_changes"] = [
            {**GradeChange(q, 0, 0, 0, 0).to_dict(), "reason": ""} for q in changed
        ]


def _flip_count(data: EditionGrades, lb: Any) -> dict[str, Any] | None:
    """Return `engine.support.top_k_flip_count` for the edition's top 3 (None
    without a leaderboard)."""
    table = data.table
    if table is None or lb is None:
        return None
    status = classify_responses(table.scored_codes(), table.scale)
    span = float(table.scale[-1] - table.scale[0])
    index = {m: i for i, m in enumerate(table.model_ids.tolist())}
    order = [index[m.model_id] for m in lb.models if m.score is not None]
    return top_k_flip_count(
        status.points / span, status.counted, order, table.model_ids.tolist(), k=3
    )


def _correction_margin(doc: dict[str, Any], band_gap: float) -> None:
    """Add `correction_margin`: how far the corrections between the compared editions moved
    each model's score (absolute points), and whether the band gap covers the largest move
    (the write-up chose 1.5 points as "the margin our own corrections moved things").
    `complete` is false when this edition lacks grades, so the moves are not the
    corrections' effect alone."""
    moves = [
        abs(m["score_corrected"] - m["score_original"])
        for m in doc["model_moves"]
        if m["score_corrected"] is not None and m["score_original"] is not None
    ]
    if not moves:
        doc["correction_margin"] = None
        return
    largest = max(moves)
    doc["correction_margin"] = {
        "n_models": len(moves),
        "max_move": round(largest, 4),
        "median_move": round(float(np.median(moves)), 4),
        "band_gap": band_gap,
        "band_gap_covers": band_gap >= largest,
        # Responses lacking grades drop out of one edition's scores: the moves then are not
        # the corrections' effect alone (rule 12), and the margin must say so.
        "complete": bool(doc["complete"]),
    }


def _mark_not_regraded(changes: list[dict[str, Any]], data: EditionGrades) -> None:
    """Add `re_graded` and `n_missing_grade` to each grade change: a corrected question whose
    responses lack a grade from a judge of the set against its new entry was not re-graded
    (False), and its up/down/same counts are not a finding (rule 12), never a silent 0/0.
    `re_graded` is None for a question not scored in the edition (removed or excluded)."""
    missing = data.completeness.by_question if data.completeness else {}
    q = data.questions
    scored = set(q.loc[q["scored"], "question_id"].astype(str)) if len(q) else set()
    for change in changes:
        qid = str(change["question_id"])
        n = missing.get(qid, 0)
        change["n_missing_grade"] = n
        # None: not scored in this edition (removed or excluded), so nothing to re-grade.
        change["re_graded"] = (n == 0) if qid in scored else None


def _provenance(
    edition: KeyEdition,
    compare: KeyEdition | None,
    board: BoardResult,
    judge_names: list[str],
    auditor_names: list[str],
    who: str,
) -> dict[str, dict[str, Any]]:
    """Return the report's provenance: {figure: {edition, judges or auditors, data}}.

    `who` names the judges with their prompt versions (`panel_words`)."""
    benchmark = edition.benchmark
    e, j, a = edition.name, judge_names, auditor_names
    c = compare.name if compare else None
    questions = f"questions of benchmark {benchmark.name} keyed in edition {e}"
    graded = (
        f"grades of {who} against the effective key entries of edition {e}, scored questions only"
    )
    audits = (
        f"audit verdicts of auditors {', '.join(a) or '(none)'} (current prompt versions) on "
        f"the effective key entries of edition {e}"
    )
    prov = {
        "questions_total": (e, [], questions),
        "questions_scored": (e, [], questions + ", not excluded by audit nor removed by review"),
        "excluded_by_audit": (
            e,
            a,
            f"effective key entries of edition {e} excluded by the key audit (rule 4)",
        ),
        "removed_by_review": (e, [], f"effective key entries of edition {e} marked removed"),
        "corrected": (
            e,
            [],
            f"effective key entries of edition {e} made after the original, not removals",
        ),
        "single_auditor_flags": (e, a, audits + ": exactly one adverse verdict"),
        "audit_sent_to_review": (
            e,
            a,
            audits + ": every outcome of rule 4 that goes to review (scoring.audit_rule.TO_REVIEW)",
        ),
        "auditor_agreement_rate": (e, a, audits + ": same verdict / every auditor gave one"),
        "judge_flagged": (
            e,
            j,
            f"grades of judges {', '.join(j)} with flag set against the entry each question "
            f"had when graded (any edition from original to {e}), distinct questions",
        ),
        "judge_flags_standing": (
            e,
            j,
            f"grades of judges {', '.join(j)} against edition {e}'s entries with flag set, distinct questions",
        ),
        "responses_total": (e, j, graded),
        "responses_counted": (e, j, graded + ": every judge gave the same grade"),
        "responses_excluded_disagreement": (e, j, graded + ": judges differ"),
        "responses_unparsed": (e, j, graded + ": a null (unparsed) grade"),
        "responses_missing_grade": (
            e,
            j,
            f"responses of edition {e}'s scored questions without a grade row from every "
            f"one of {who} against the effective key entry",
        ),
        "agreement_rate": (e, j, graded + ": counted / (counted + excluded on disagreement)"),
        "n_models": (e, j, graded),
        "n_bands": (
            e,
            j,
            f"leaderboard of edition {e}, {board.banding} banding, gap {board.band_gap} points",
        ),
    }
    if c:
        both = (
            f"leaderboards of editions {c} and {e}, judges {', '.join(j)}, {board.banding} banding"
        )
        prov["top3_unchanged"] = (f"{c} → {e}", j, both)
        prov["bottom5_unchanged"] = (f"{c} → {e}", j, both)
        prov["kendall_tau"] = (f"{c} → {e}", j, both + ", Kendall's tau-b on scores")
        prov["grade_changes"] = (
            f"{c} → {e}",
            j,
            f"agreed grades per response under editions {c} and {e} for questions whose key entry differs",
        )
    return {
        k: {
            "edition": ed,
            "judges"
            if k
            not in (
                "single_auditor_flags",
                "audit_sent_to_review",
                "auditor_agreement_rate",
                "excluded_by_audit",
            )
            else "auditors": who,
            "data": what,
        }
        for k, (ed, who, what) in prov.items()
    }


def _entry_reasons(data: EditionGrades, question_ids: list[str]) -> dict[str, str]:
    pk_of = dict(zip(data.questions["question_id"], data.questions["pk"], strict=True))
    entry_of = data.entries.as_dict()
    wanted = {entry_of[pk_of[q]]: q for q in question_ids if q in pk_of and pk_of[q] in entry_of}
    return {
        wanted[pk]: reason
        for pk, reason in KeyEntry.objects.filter(pk__in=list(wanted)).values_list("pk", "reason")
    }


def numpy_free(value: Any) -> Any:
    """Return `value` with numpy scalars turned into Python numbers (for json.dumps)."""
    if isinstance(value, dict):
        return {str(k): numpy_free(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [numpy_free(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
