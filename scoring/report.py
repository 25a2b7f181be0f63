"""The methodology report (methodology.md rule 12) and the text renderings of scoring figures.

`build_report` computes every figure of the original write-up from stored data for one key
edition (optionally against a comparison edition) and says, per figure, which key edition,
judges or auditors and which rows it was computed from (`provenance`). The renderers turn
the JSON documents of the leaderboard, agreement and report into the table, CSV and
Markdown forms used by the commands and the download links.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import numpy as np

from questions.models import KeyEdition, KeyEntry
from scoring.audit_rule import SINGLE, TO_REVIEW, audit_decisions
from scoring.costs import costs_markdown
from scoring.engine import agreed_grades, compare_leaderboards, grade_changes
from scoring.engine.robustness import GradeChange
from scoring.models import Grade
from scoring.runs_selectors import edition_costs
from scoring.selectors import (
    BoardResult,
    EditionGrades,
    JudgeRef,
    _judge_filter,
    auditors,
    board_for_edition,
    load_edition_grades,
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
    "auditor_agreement_rate",
    "responses_total",
    "responses_counted",
    "responses_excluded_disagreement",
    "responses_unparsed",
    "agreement_rate",
    "n_models",
    "n_bands",
    "top3_unchanged",
    "bottom5_unchanged",
    "grade_changes",
)

LABELS = {
    "questions_total": "Questions in the set",
    "questions_scored": "Questions scored",
    "excluded_by_audit": "Excluded by the key audit (both auditors adverse)",
    "removed_by_review": "Removed from scoring by review",
    "corrected": "Corrected key entries",
    "single_auditor_flags": "Single-auditor flags sent to review",
    "audit_sent_to_review": "Questions the key audit sent to review (any reason)",
    "judge_flagged": "Questions flagged by a judge (shortlist)",
    "auditor_agreement_rate": "Auditor agreement rate",
    "responses_total": "Responses graded",
    "responses_counted": "Responses counted (judges agree)",
    "responses_excluded_disagreement": "Responses excluded on disagreement",
    "responses_unparsed": "Responses with an unparsed grade",
    "agreement_rate": "Judge agreement rate",
    "n_models": "Models under test scored",
    "n_bands": "Bands",
    "top3_unchanged": "Top 3 unchanged",
    "bottom5_unchanged": "Bottom 5 unchanged",
    "kendall_tau": "Kendall's tau between the two rankings",
}


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


def _judge_flagged(entry_pks: list[int], judges: list[JudgeRef]) -> int:
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
    board = board_for_edition(edition, judge_ids=judge_ids)
    data = load_edition_grades(edition, judge_ids=board.judges or None)
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
        "auditors": auditor_names,
        "grade_scale": list(benchmark.grade_scale or [0, 1, 2]),
        "questions_total": board.questions_total,
        "questions_scored": board.questions_scored,
        "excluded_by_audit": board.excluded_by_audit,
        "removed_by_review": board.removed_by_review,
        "corrected": len(_corrected_question_pks(data)),
        "single_auditor_flags": audit["single"],
        "audit_sent_to_review": audit["to_review"],
        "judge_flagged": _judge_flagged(entry_pks, judges),
        "auditor_agreement_rate": _rate(audit["agree"], audit["both"]),
        "auditor_pairs_with_verdicts": audit["both"],
        "responses_total": lb.responses_total if lb else 0,
        "responses_counted": lb.responses_counted if lb else 0,
        "responses_excluded_disagreement": lb.responses_excluded_disagreement if lb else 0,
        "responses_unparsed": lb.responses_unparsed if lb else 0,
        "responses_missing_grade": lb.responses_missing_grade if lb else 0,
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
        "grade_changes": [],
        "notes": list(board.notes) + (list(lb.notes) if lb else []),
        # what the judge calls of the edition's runs cost (issue 20): tokens and money
        "judge_costs": edition_costs(edition),
    }

    if compare is not None:
        _add_comparison(doc, compare, data, board, judge_names)
    doc["provenance"] = _provenance(edition, compare, board, judge_names, auditor_names)
    return doc


def _add_comparison(
    doc: dict[str, Any],
    compare: KeyEdition,
    data: EditionGrades,
    board: BoardResult,
    judge_names: list[str],
) -> None:
    """Fill the report's comparison figures in `doc` (robustness against `compare`'s
    leaderboard, per-response grade changes of the questions whose key entry differs)."""
    lb = board.leaderboard
    cmp_board = board_for_edition(compare, judge_ids=judge_names or None)
    cmp_data = load_edition_grades(compare, judge_ids=judge_names or None)
    if cmp_board.leaderboard is not None and lb is not None:
        robust = compare_leaderboards(cmp_board.leaderboard, lb).to_dict()
        doc["top3_unchanged"] = robust["top3_unchanged"]
        doc["bottom5_unchanged"] = robust["bottom5_unchanged"]
        doc["kendall_tau"] = robust["kendall_tau"]
        doc["model_moves"] = robust["models"]
        doc["band_changes"] = robust["band_changes"]
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


def _provenance(
    edition: KeyEdition,
    compare: KeyEdition | None,
    board: BoardResult,
    judge_names: list[str],
    auditor_names: list[str],
) -> dict[str, dict[str, Any]]:
    """Return the report's provenance: {figure: {edition, judges or auditors, data}}."""
    benchmark = edition.benchmark
    e, j, a = edition.name, judge_names, auditor_names
    c = compare.name if compare else None
    questions = f"questions of benchmark {benchmark.name} keyed in edition {e}"
    graded = (
        f"grades of judges {', '.join(j) or '(none)'} (current prompt versions) against the "
        f"effective key entries of edition {e}, scored questions only"
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
            f"grades of judges {', '.join(j)} against edition {e}'s entries with flag set, distinct questions",
        ),
        "responses_total": (e, j, graded),
        "responses_counted": (e, j, graded + ": every judge gave the same grade"),
        "responses_excluded_disagreement": (e, j, graded + ": judges differ"),
        "responses_unparsed": (e, j, graded + ": a null (unparsed) grade"),
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


# ----------------------------------------------------------------------------- renderers
def _pct(value: float | None, dp: int = 1) -> str:
    return "–" if value is None else f"{value:.{dp}f}"


def _frac_pct(value: float | None, dp: int = 1) -> str:
    return "–" if value is None else f"{100 * value:.{dp}f}%"


def banding_sentence(doc: dict[str, Any]) -> str:
    """Say in words which banding a leaderboard uses (cli tables, pages, Markdown)."""
    if doc.get("banding") == "ci_overlap":
        return (
            "Banding: interval overlap (a model joins the band of the leader whose 95% "
            "interval it overlaps)."
        )
    return (
        f"Banding: gap bands, threshold {doc.get('band_gap', 1.5):g} points (a new band starts "
        "where the gap to the next model is at least the threshold; gaps under it are not findings)."
    )


LEADERBOARD_CSV_FIELDS = (
    "band",
    "rank",
    "model_id",
    "score",
    "ci_low",
    "ci_high",
    "n_counted",
    "n_excluded_disagreement",
    "n_unparsed",
    "agreement_rate",
)


def leaderboard_csv(doc: dict[str, Any]) -> str:
    """Return the leaderboard as CSV, one row per model, in display order."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(LEADERBOARD_CSV_FIELDS)
    for m in doc["models"]:
        writer.writerow(["" if m.get(k) is None else m.get(k) for k in LEADERBOARD_CSV_FIELDS])
    return out.getvalue()


def leaderboard_table(doc: dict[str, Any]) -> str:
    """Return the leaderboard as a plain-text table with its edition, judges and banding."""
    lines = [
        f"Leaderboard: {doc.get('benchmark', '')}, key edition {doc['edition']}, "
        f"judges {', '.join(doc['judges']) or '(none)'}",
        banding_sentence(doc),
        (
            f"Intervals: 95%, bootstrap over questions ({doc.get('n_bootstrap', 0)} resamples, "
            f"seed {doc.get('seed')}); Wilson where the bootstrap degenerates."
            if doc.get("n_bootstrap")
            else "Intervals: 95% Wilson intervals (no bootstrap: --bootstrap 0)."
        ),
        f"Agreement rate: {_frac_pct(doc.get('agreement_rate'))}  "
        f"Questions scored: {doc.get('questions_scored', 0)}  Bands: {doc.get('n_bands', 0)}",
        "",
    ]
    head = (
        "band",
        "rank",
        "model",
        "score",
        "95% interval",
        "counted",
        "excl. disagree",
        "unparsed",
    )
    rows = [head]
    for m in doc["models"]:
        rows.append(
            (
                "–" if m["band"] is None else str(m["band"]),
                m["rank"] or "–",
                str(m["model_id"]),
                _pct(m["score"]),
                f"{_pct(m['ci_low'])}–{_pct(m['ci_high'])}" if m["ci_low"] is not None else "–",
                str(m["n_counted"]),
                str(m["n_excluded_disagreement"]),
                str(m["n_unparsed"]),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    left = {2}
    prev_band = None
    for n, r in enumerate(rows):
        if n > 1 and r[0] != prev_band:
            lines.append("-" * (sum(widths) + 2 * (len(widths) - 1)))
        prev_band = r[0] if n else None
        lines.append(
            "  ".join(
                c.ljust(w) if i in left else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
        )
    for note in doc.get("notes") or []:
        lines.append(f"Note: {note}")
    return "\n".join(lines) + "\n"


def agreement_table(doc: dict[str, Any]) -> str:
    """Return the per-pair inter-rater statistics as text; one judge gets a plain note."""
    lines = [
        f"Agreement: {doc.get('benchmark', '')}, key edition {doc['edition']}, "
        f"judges {', '.join(doc['judges']) or '(none)'}"
    ]
    if not doc["pairs"]:
        lines.append(
            "Agreement needs two judges: this edition's grades come from "
            f"{len(doc['judges'])} judge{'' if len(doc['judges']) == 1 else 's'}, so there is no"
            " inter-rater statistic."
        )
    for p in doc["pairs"]:
        lines += [
            "",
            f"{p['judges'][0]} vs {p['judges'][1]}: {p['n']} responses graded by both "
            f"({p['n_missing']} dropped: a grade null or missing)",
            f"  exact agreement               {_frac_pct(p['exact_agreement'])}",
            f"  Cohen's kappa                 {_num(p['cohen_kappa'])}",
            f"  Cohen's kappa (quadratic)     {_num(p['cohen_kappa_quadratic'])}",
            f"  Krippendorff's alpha ordinal  {_num(p['krippendorff_alpha_ordinal'])}",
            "  confusion (rows: first judge, columns: second judge):",
        ]
        scale = doc.get("scale") or list(range(len(p["confusion"])))
        width = max(4, max((len(str(v)) for row in p["confusion"] for v in row), default=1) + 1)
        lines.append("    " + " " * 4 + "".join(str(s).rjust(width) for s in scale))
        for s, row in zip(scale, p["confusion"], strict=True):
            lines.append("    " + str(s).rjust(4) + "".join(str(v).rjust(width) for v in row))
        for note in p.get("notes") or []:
            lines.append(f"  note: {note}")
    for note in doc.get("notes") or []:
        lines.append(f"Note: {note}")
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def _fmt(key: str, value: Any) -> str:
    if value is None:
        return (
            "– (no comparison edition)"
            if key in ("top3_unchanged", "bottom5_unchanged", "kendall_tau")
            else "–"
        )
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key.endswith("_rate"):
        return _frac_pct(value)
    if isinstance(value, float):
        return f"{value:.3f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


FIGURE_ROWS = (
    "questions_total",
    "questions_scored",
    "excluded_by_audit",
    "removed_by_review",
    "corrected",
    "judge_flagged",
    "single_auditor_flags",
    "audit_sent_to_review",
    "auditor_agreement_rate",
    "responses_total",
    "responses_counted",
    "responses_excluded_disagreement",
    "responses_unparsed",
    "agreement_rate",
    "n_models",
    "n_bands",
    "top3_unchanged",
    "bottom5_unchanged",
    "kendall_tau",
)


def figure_rows(doc: dict[str, Any]) -> list[dict[str, str]]:
    """Return [{key, label, value, source}] for the report's headline figures (pages, Markdown)."""
    rows = []
    for key in FIGURE_ROWS:
        prov = doc.get("provenance", {}).get(key)
        if prov:
            who = prov.get("judges", prov.get("auditors")) or []
            source = (
                f"edition {prov['edition']}"
                + (f"; {', '.join(who)}" if who else "")
                + f"; {prov['data']}"
            )
        else:
            source = "needs a comparison edition"
        rows.append(
            {"key": key, "label": LABELS[key], "value": _fmt(key, doc.get(key)), "source": source}
        )
    return rows


def report_markdown(doc: dict[str, Any]) -> str:
    """Return the methodology report as Markdown (for people)."""
    md = [
        f"# Methodology report: {doc['benchmark']}",
        "",
        f"Key edition **{doc['edition']}** ({doc['edition_status']})"
        + (
            f", compared with **{doc['compare_edition']}**"
            if doc["compare_edition"]
            else ", no comparison edition"
        )
        + f". Judges: {', '.join(doc['judges']) or '(none)'}. Auditors: {', '.join(doc['auditors']) or '(none)'}.",
        "",
        "## Figures",
        "",
        "| figure | value | computed from |",
        "|---|---:|---|",
    ]
    for row in figure_rows(doc):
        md.append(f"| {row['label']} | {row['value']} | {row['source'].replace('|', '/')} |")
    md += ["", "## Bands", "", banding_sentence(doc), ""]
    if doc["bands"]:
        md += ["| band | models | scores |", "|---:|---|---|"]
        for b in doc["bands"]:
            md.append(
                f"| {b['band']} | {', '.join(b['models'])} | {b['score_low']:.1f}–{b['score_high']:.1f} |"
            )
    else:
        md.append("No model has a counted response in this edition.")
    if doc["compare_edition"]:
        md += ["", f"## Robustness: {doc['compare_edition']} → {doc['edition']}", ""]
        if doc["model_moves"]:
            md += [
                f"| model | score {doc['compare_edition']} | score {doc['edition']} | rank | band | move |",
                "|---|---:|---:|---|---|---:|",
            ]
            for m in doc["model_moves"]:
                move = m["rank_move"]
                arrow = (
                    "–"
                    if move is None
                    else ("↑" + str(move) if move > 0 else "↓" + str(-move) if move < 0 else "=")
                )
                md.append(
                    f"| {m['model_id']} | {_pct(m['score_original'])} | {_pct(m['score_corrected'])} | "
                    f"{m['rank_original'] or '–'} → {m['rank_corrected'] or '–'} | "
                    f"{m['band_original'] or '–'} → {m['band_corrected'] or '–'} | {arrow} |"
                )
        md += ["", "## Grade changes per corrected question", ""]
        if doc["grade_changes"]:
            md += [
                "| question | reason | up | down | same | newly counted | no longer counted "
                "| neither counted |",
                "|---|---|---:|---:|---:|---:|---:|---:|",
            ]
            for g in doc["grade_changes"]:
                md.append(
                    f"| {g['question_id']} | {g.get('reason') or '–'} | {g['up']} | {g['down']} "
                    f"| {g['same']} | {g.get('newly_counted', 0)} "
                    f"| {g.get('no_longer_counted', 0)} | {g.get('neither_counted', 0)} |"
                )
        else:
            md.append("No key entry differs between the two editions.")
    md += costs_markdown(doc["judge_costs"])
    if doc["notes"]:
        md += ["", "## Notes", ""] + [f"- {n}" for n in doc["notes"]]
    return "\n".join(md) + "\n"


def numpy_free(value: Any) -> Any:
    """Return `value` with numpy scalars turned into Python numbers (for json.dumps)."""
    if isinstance(value, dict):
        return {str(k): numpy_free(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [numpy_free(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
