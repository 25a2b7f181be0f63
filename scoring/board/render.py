"""Text renderings of the scoring documents: the leaderboard, agreement and report JSON
turned into the tables, CSV and Markdown of the commands and downloads, and the sentences
the pages share (the panel, banding, band boundaries, incompleteness).

Pure functions of the JSON documents (`scoring.selectors.BoardResult.leaderboard_dict`,
`agreement_dict`, `scoring.board.report.build_report`); CSV goes through
`scoring.spreadsheet.csv_text` (spreadsheet-safe).
"""

from __future__ import annotations

from typing import Any

from engine.bands import DEFAULT_BAND_GAP
from scoring.runs.costs import costs_markdown
from scoring.spreadsheet import csv_text

LABELS = {
    "questions_total": "Questions in the set",
    "questions_scored": "Questions scored",
    "excluded_by_audit": "Excluded by the key audit (both auditors adverse)",
    "removed_by_review": "Removed from scoring by review",
    "corrected": "Corrected key entries",
    "single_auditor_flags": "Single-auditor flags sent to review",
    "audit_sent_to_review": "Questions the key audit sent to review (any reason)",
    "judge_flagged": "Questions flagged by a judge when graded (shortlist, history)",
    "judge_flags_standing": "Questions whose entry in this edition a judge flags (standing)",
    "auditor_agreement_rate": "Auditor agreement rate",
    "responses_total": "Responses graded",
    "responses_counted": "Responses counted (judges agree)",
    "responses_excluded_disagreement": "Responses excluded on disagreement",
    "responses_unparsed": "Responses with an unparsed grade",
    "responses_missing_grade": "Responses lacking a grade (not in the figures)",
    "agreement_rate": "Judge agreement rate",
    "n_models": "Models under test scored",
    "n_bands": "Bands",
    "top3_unchanged": "Top 3 unchanged",
    "bottom5_unchanged": "Bottom 5 unchanged",
    "kendall_tau": "Kendall's tau between the two rankings",
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
    sentence = (
        f"Banding: gap bands, threshold {doc.get('band_gap', DEFAULT_BAND_GAP):g} points (a new band starts "
        "where the gap to the next model is at least the threshold; gaps under it are not findings)."
    )
    if doc.get("band_boundaries"):
        sentence += (
            " Band boundaries supported by a paired bootstrap of per-question differences "
            f"(Miller 2024, arXiv 2411.00640): {doc.get('band_boundaries_supported', 0)} of "
            f"{doc['band_boundaries']}."
        )
    return sentence


def tier_sentence(doc: dict[str, Any]) -> str:
    """Say in words which order of the models the data establish (issue 30 item 10).

    Reads the leaderboard `doc`'s ``models`` (``tier``, ``band``, ``model_id``, in display
    order) and ``n_tiers``: the tiers of ``engine.bands.established_tiers``, bands
    merged where the paired comparison does not support the boundary.  "" without
    scored models.  Used by the signed-in board and the public site alike.
    """
    scored = [m for m in doc.get("models") or [] if m.get("tier") is not None]
    if not scored:
        return ""
    n_tiers = doc.get("n_tiers") or len({m["tier"] for m in scored})
    n_bands = len({m["band"] for m in scored})
    if n_tiers == 1:
        return (
            f"Established order: none. The data do not support any of the {n_bands - 1} "
            f"band boundar{'y' if n_bands == 2 else 'ies'}, so all {len(scored)} models are "
            "shown as one tier; their order within it is not established."
            if n_bands > 1
            else f"Established order: none. All {len(scored)} models are in one band."
        )
    tiers: dict[int, list[str]] = {}
    for m in scored:
        tiers.setdefault(m["tier"], []).append(str(m["model_id"]))
    parts = [
        f"tier {t} ({', '.join(names) if len(names) <= 3 else f'{len(names)} models'})"
        for t, names in tiers.items()
    ]
    return (
        "Established order: " + " above ".join(parts) + ". Bands whose boundary the paired "
        "comparison does not support are shown as one tier; within a tier the order is not "
        "established."
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
    "few_counted",
)
# Every row also says which key edition and judges its figures are for (rule 12).
LEADERBOARD_CSV_PROVENANCE = ("edition", "panel")


def panel_words(doc: dict[str, Any]) -> str:
    """Return who graded for a leaderboard/agreement/report document, in words.

    E.g. "judge panel gpt-4@v1, claude@v2"; "judges j1@v1 (asked for: not the judge
    panel)"; "judges j1@v1 (no judge panel set: every active judge)". Reads the `panel`
    ([{judge, prompt_version}]) and `judge_set` keys; falls back to `judges`.
    """
    members = doc.get("panel")
    if members is None:
        names = ", ".join(doc.get("judges") or []) or "(none)"
    else:
        names = ", ".join(f"{m['judge']}@{m['prompt_version']}" for m in members) or "(none)"
    kind = doc.get("judge_set", "panel")
    if kind == "panel":
        return f"judge panel {names}"
    if kind == "requested":
        return f"judges {names} (asked for: not the judge panel)"
    return f"judges {names} (no judge panel set: every active judge)"


def panel_cell(doc: dict[str, Any]) -> str:
    """Return the panel as one CSV cell: "j1@v1 j2@v1", with " (not the panel)" when asked for."""
    members = doc.get("panel") or []
    cell = " ".join(f"{m['judge']}@{m['prompt_version']}" for m in members)
    kind = doc.get("judge_set", "panel")
    if kind == "requested":
        cell += " (not the panel)"
    elif kind != "panel":
        cell += " (no panel set)"
    return cell


def leaderboard_csv(doc: dict[str, Any]) -> str:
    """Return the leaderboard as CSV, one row per model, in display order.

    Columns: LEADERBOARD_CSV_FIELDS then `edition` and `panel` (`panel_cell`) on every row.
    Spreadsheet-safe: cells such as a tie rank `=3` or a model id `=1+2` are neutralised
    (`scoring.spreadsheet.csv_text`).
    """
    tail = [doc.get("edition", ""), panel_cell(doc)]
    return csv_text(
        LEADERBOARD_CSV_FIELDS + LEADERBOARD_CSV_PROVENANCE,
        ([m.get(k) for k in LEADERBOARD_CSV_FIELDS] + tail for m in doc["models"]),
    )


def boundary_words(c: dict[str, Any] | None) -> str:
    """Return " boundary supported|not supported (paired difference ...)" for a neighbour
    comparison of the leaderboard JSON, or "" without one."""
    if c is None:
        return ""
    if c["difference"] is None:
        return " boundary not tested (no question counted for both)"
    if c["supported"] is None:
        return (
            f" boundary not tested (no bootstrap, or only {c['n_questions']} paired "
            f"questions; paired difference {c['difference']:.1f})"
        )
    verdict = "supported" if c["supported"] else "NOT supported"
    return (
        f" boundary {verdict}: paired difference {c['difference']:.1f} points "
        f"[{c['ci_low']:.1f}, {c['ci_high']:.1f}] over {c['n_questions']} questions"
    )


def incomplete_sentence(doc: dict[str, Any]) -> str:
    """Return the plain warning for a leaderboard or report whose `complete` is false."""
    n = doc.get("responses_missing_grade", 0)
    k = len(doc.get("missing_grade_by_question") or [])
    return (
        f"INCOMPLETE: {n} response{'' if n == 1 else 's'} of {k} scored "
        f"question{'' if k == 1 else 's'} lack a grade from {panel_words(doc)} against "
        f"{doc['edition']} and are not in these figures (see the notes)."
    )


def leaderboard_table(doc: dict[str, Any]) -> str:
    """Return the leaderboard as a plain-text table with its edition, judges and banding."""
    lines = [
        f"Leaderboard: {doc.get('benchmark', '')}, key edition {doc['edition']}, "
        f"{panel_words(doc)}",
        banding_sentence(doc),
        (
            f"Intervals: 95%, bootstrap over questions ({doc.get('n_bootstrap', 0)} resamples, "
            f"seed {doc.get('seed')}); Wilson where the bootstrap degenerates."
            if doc.get("n_bootstrap")
            else "Intervals: 95% Wilson intervals (no bootstrap: --bootstrap 0)."
        ),
        f"Agreement rate: {_frac_pct(doc.get('agreement_rate'))}  "
        f"Questions scored: {doc.get('questions_scored', 0)}  Bands: {doc.get('n_bands', 0)}",
    ]
    if doc.get("complete") is False:
        lines.append(incomplete_sentence(doc))
    lines.append("")
    head = (
        "band",
        "rank",
        "model",
        "score",
        "95% interval",
        "counted",
        "excl. disagree",
        "unparsed",
        "no grade",
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
                str(m.get("n_missing_grade", 0)),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    left = {2}
    prev_band = None
    pairs = {(c["above"], c["below"]): c for c in doc.get("neighbours") or []}
    for n, r in enumerate(rows):
        if n > 1 and r[0] != prev_band:
            rule = "-" * (sum(widths) + 2 * (len(widths) - 1))
            lines.append(rule + boundary_words(pairs.get((rows[n - 1][2], r[2]))))
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
        f"Agreement: {doc.get('benchmark', '')}, key edition {doc['edition']}, {panel_words(doc)}"
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
        if p.get("per_model"):
            lines.append("  per model (n, exact agreement, kappa, quadratic kappa, alpha):")
            for m in p["per_model"]:
                lines.append(
                    f"    {m['model_id']}: {m['n']}, {_frac_pct(m['exact_agreement'])}, "
                    f"{_num(m['cohen_kappa'])}, {_num(m['cohen_kappa_quadratic'])}, "
                    f"{_num(m['krippendorff_alpha_ordinal'])}"
                )
                for note in m.get("notes") or []:
                    lines.append(f"      note: {note}")
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
    "judge_flags_standing",
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


def diagnostics_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """Return the Markdown lines of the report's judge diagnostics ([] without any)."""
    if not rows:
        return []
    md = [
        "",
        "## Judge diagnostics",
        "",
        "Length: Spearman's rank correlation of response length (characters) with the "
        "judge's grade, 95% interval (Fisher z, Bonett & Wright 2000). Own vendor: mean of "
        "(judge's grade - mean grade of the judges of other vendors) on the same responses, "
        "for models of the judge's vendor, for the other models, and the excess (grade "
        "points).",
        "",
        "| judge | length rho [95%] | n | vendor | own vendor | other models | excess |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        lg, ov = r["length_grade"], r["own_vendor"]
        rho = (
            f"{lg['spearman']:.3f} [{lg['ci_low']:.3f}, {lg['ci_high']:.3f}]"
            if lg["spearman"] is not None
            else f"cannot compute: {lg['cannot_compute']}"
        )
        if ov["cannot_compute"]:
            own = f"cannot compute: {ov['cannot_compute']} | – | –"
        else:
            own = (
                f"{_num(ov['own_vendor_difference'])} | {_num(ov['other_vendor_difference'])} "
                f"| {_num(ov['excess'])}"
            )
        md.append(f"| {r['judge']} | {rho} | {lg['n']} | {ov['vendor'] or '–'} | {own} |")
    return md


def robustness_lines(doc: dict[str, Any]) -> list[str]:
    """Return the sentences on the top 3's flip count and the corrections' margin (Markdown
    lines, also shown on the report page)."""
    out: list[str] = []
    flip = doc.get("top3_flip_count")
    if flip:
        if flip["flip_count"] is not None:
            out.append(
                f"Worst-case flip count: {flip['flip_count']} key correction"
                f"{'' if flip['flip_count'] == 1 else 's'} could change the top 3 "
                f"({', '.join(map(str, flip['top']))}), first by putting {flip['pair'][1]} "
                f"above {flip['pair'][0]} ({flip['gap']:.2f} points apart). Method: "
                f"{flip['method']}."
            )
        else:
            out.append(f"Worst-case flip count: cannot compute: {flip['cannot_compute']}.")
    margin = doc.get("correction_margin")
    if margin:
        covers = "covers" if margin["band_gap_covers"] else "does not cover"
        out.append(
            f"The corrections moved model scores by up to {margin['max_move']:.2f} points "
            f"(median {margin['median_move']:.2f}); the band gap of {margin['band_gap']:g} "
            f"points {covers} that margin."
            + (
                ""
                if margin.get("complete", True)
                else " Not the corrections' effect alone: some responses of this edition "
                "lack grades and are missing from its scores."
            )
        )
    return ["", "## How robust the top is", "", *out] if out else []


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
        + f". Grades: {panel_words(doc)}. Auditors: {', '.join(doc['auditors']) or '(none)'}.",
    ]
    if doc.get("complete") is False:
        md += ["", "**" + incomplete_sentence(doc) + "**"]
    md += [
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
    md += robustness_lines(doc)
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
                if g.get("re_graded") is False:
                    md.append(
                        f"| {g['question_id']} | {g.get('reason') or '–'} "
                        f"| not re-graded: {g['n_missing_grade']} responses lack a grade "
                        "| – | – | – | – | – |"
                    )
                    continue
                md.append(
                    f"| {g['question_id']} | {g.get('reason') or '–'} | {g['up']} | {g['down']} "
                    f"| {g['same']} | {g.get('newly_counted', 0)} "
                    f"| {g.get('no_longer_counted', 0)} | {g.get('neither_counted', 0)} |"
                )
        else:
            md.append("No key entry differs between the two editions.")
    md += diagnostics_markdown(doc.get("judge_diagnostics") or [])
    from scoring.board.human import human_markdown

    md += human_markdown(doc.get("human_agreement"))
    if "judge_costs" in doc:
        md += costs_markdown(doc["judge_costs"])
    if doc["notes"]:
        md += ["", "## Notes", ""] + [f"- {n}" for n in doc["notes"]]
    return "\n".join(md) + "\n"
