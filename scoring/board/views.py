"""Leaderboard and methodology report pages (htmx), with CSV / JSON / Markdown downloads.

Thin views: resolve the benchmark and editions, ask `scoring.selectors` / `scoring.board.report`
for the figures (cached), shape them for the templates. The edition switch re-renders the
board fragment for htmx requests (`Vary: HX-Request`) and the whole page otherwise.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from core.htmx import vary_on_htmx, wants_fragment
from engine import compare_leaderboards
from questions.errors import DomainError, NotFoundError
from questions.models import Benchmark, Category, KeyEdition, KeyEntry
from questions.selectors import latest_published_edition
from scoring.board.render import tier_sentence
from scoring.board.report import (
    banding_sentence,
    build_report,
    figure_rows,
    leaderboard_csv,
    panel_words,
    report_markdown,
    robustness_lines,
)
from scoring.completeness import describe_figures
from scoring.selectors import BANDINGS, BoardResult, board_for_edition

SVG_WIDTH = 220
SVG_HEIGHT = 18


# ----------------------------------------------------------------------------- staleness
def board_staleness(
    edition: KeyEdition, panel: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """Return {"stale": bool, "stale_reason": str | None, "stale_run_status": the owing
    run's status or None} for the edition's figures.

    The figures are stale while the edition's newest re-scoring run
    (`scoring.runs.selectors.latest_run`) owes pairs they count: it is pending or running,
    or it ended failed, cancelled or stopped at its budget, with pairs still lacking a
    grade. `panel` ([{"judge", "prompt_version"}], the board's judges) limits the pairs to
    those of these judges at these versions (a run grades at a judge's current version):
    a run for a candidate panel, or at a prompt version the panel does not pin, owes the
    judge panel's figures nothing (issue 31). None: every pair of the run. Not cached (two
    queries), so a cancel, which changes no grade, shows at once.
    """
    from django.db.models import Exists, OuterRef, Q
    from django.utils import timezone

    from scoring.models import Grade, RunItem, ScoringRun
    from scoring.runs.selectors import latest_run

    run = latest_run(edition)
    if run is None or run.status == ScoringRun.Status.COMPLETE:
        return {"stale": False, "stale_reason": None, "stale_run_status": None}
    has_grade = Grade.objects.filter(
        response_id=OuterRef("response_id"),
        judge_id=OuterRef("judge_id"),
        key_entry_id=OuterRef("key_entry_id"),
        prompt_version=OuterRef("judge__prompt_version"),
    )
    counted = Q()
    if panel is not None:
        counted = Q(pk__in=[])
        for m in panel:
            counted |= Q(judge__judge_id=m["judge"], judge__prompt_version=m["prompt_version"])
    lacking = (
        RunItem.objects.filter(counted, run=run, response__isnull=False)
        .exclude(state__in=(RunItem.State.GRADED, RunItem.State.UNPARSED, RunItem.State.REUSED))
        .filter(~Exists(has_grade))
        .count()
    )
    if not lacking:
        return {"stale": False, "stale_reason": None, "stale_run_status": None}
    tail = (
        f"{lacking} of {run.needed} pair{'s' if run.needed != 1 else ''} lack a grade — "
        "these figures do not yet reflect them."
    )
    if run.status in (ScoringRun.Status.PENDING, ScoringRun.Status.RUNNING):
        head = f"Re-scoring run {run.pk} is {run.status} ({run.done} of {run.needed} pairs settled)"
    else:
        when = timezone.localtime(run.finished_at or run.created_at)
        verb = {
            ScoringRun.Status.FAILED: "failed",
            ScoringRun.Status.STOPPED: "stopped at its budget",
        }.get(run.status, "was cancelled")
        head = f"Re-scoring run {run.pk} {verb} at {when:%H:%M} on {when:%Y-%m-%d} ({when:%Z})"
    return {"stale": True, "stale_reason": f"{head}; {tail}", "stale_run_status": run.status}


def leaderboard_doc(result: BoardResult, edition: KeyEdition) -> dict[str, Any]:
    """Return the leaderboard JSON document of `result` with `stale`, `stale_reason`,
    `figures_state` and `figures_state_words` (`scoring.completeness.describe_figures`).

    Stale only for pairs the board's judges owe (`board_staleness` with its panel), and
    never beside `complete: true`: figures with every grade owed reflect them all, so a
    run owing grades they do not count (a candidate's, another prompt version's) leaves
    them complete and not stale; one state, said in words (issue 31).
    """
    doc = result.leaderboard_dict()
    doc.update(board_staleness(edition, result.panel))
    if doc.get("complete") is True:
        doc.update(stale=False, stale_reason=None, stale_run_status=None)
    doc.update(describe_figures(doc))
    return doc


# ----------------------------------------------------------------------------- helpers
def _benchmark_index(request: HttpRequest, url_name: str, title: str) -> HttpResponse:
    benchmarks = list(Benchmark.objects.order_by("name"))
    if len(benchmarks) == 1:
        return redirect(url_name, benchmark=benchmarks[0].name)
    items = [{"name": b.name, "url": reverse(url_name, args=[b.name])} for b in benchmarks]
    return render(
        request, "scoring/board/benchmark_index.html", {"benchmarks": items, "page_title": title}
    )


def _editions(benchmark: Benchmark) -> list[KeyEdition]:
    return list(KeyEdition.objects.filter(benchmark=benchmark).order_by("created_at", "id"))


def _pick(editions: list[KeyEdition], name: str | None, default: KeyEdition | None):
    if not name:
        return default
    for e in editions:
        if e.name == name:
            return e
    raise Http404(f"no key edition {name!r}")


def _selection(request: HttpRequest, benchmark_name: str) -> dict[str, Any]:
    """Resolve benchmark, edition, comparison edition and banding from the query string."""
    benchmark = get_object_or_404(Benchmark, name=benchmark_name)
    editions = _editions(benchmark)
    latest = latest_published_edition(benchmark)
    default = latest or (editions[-1] if editions else None)
    edition = _pick(editions, request.GET.get("edition"), default)
    if edition is None:
        raise Http404("this benchmark has no key edition")
    compare_name = request.GET.get("compare") or ""
    compare = _pick(editions, compare_name, None) if compare_name else None
    banding = request.GET.get("banding") or "gap"
    if banding not in BANDINGS:
        banding = "gap"
    return {
        "benchmark": benchmark,
        "editions": editions,
        "edition": edition,
        "compare": compare,
        "banding": banding,
    }


def _interval_svg(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Add an `svg` dict (x positions in px) to each model row; return the axis."""
    lows = [r["ci_low"] for r in rows if r["ci_low"] is not None]
    highs = [r["ci_high"] for r in rows if r["ci_high"] is not None]
    if not lows:
        return {"lo": 0, "hi": 100, "ticks": []}
    lo = max(0.0, min(lows) - 2)
    hi = min(100.0, max(highs) + 2)
    if hi - lo < 5:
        lo, hi = max(0.0, lo - 2.5), min(100.0, hi + 2.5)
    pad = 6
    span = SVG_WIDTH - 2 * pad

    def x(v: float) -> float:
        return round(pad + (v - lo) / (hi - lo) * span, 1)

    for r in rows:
        if r["score"] is None or r["ci_low"] is None:
            r["svg"] = None
            continue
        r["svg"] = {
            "x1": x(r["ci_low"]),
            "x2": x(r["ci_high"]),
            "w": max(1.0, round(x(r["ci_high"]) - x(r["ci_low"]), 1)),
            "cx": x(r["score"]),
        }
    step = 5 if hi - lo <= 40 else 10 if hi - lo <= 80 else 20
    first = int(lo // step + 1) * step
    ticks = [{"x": x(t), "label": t} for t in range(first, int(hi) + 1, step)]
    return {"lo": round(lo, 1), "hi": round(hi, 1), "ticks": ticks}


def _heat_colour(score: float | None) -> str:
    """Return a background colour for a 0-100 score: red (low) through amber to green (high)."""
    if score is None:
        return "#eceff3"
    hue = round(score / 100 * 120)  # 0 red, 60 amber, 120 green
    return f"hsl({hue}, 65%, 82%)"


# A category score from fewer counted responses than this is shown as "few" (issue 18):
# one response makes a cell a full 0 or 100, which the colour would overstate.
HEAT_MIN_RESPONSES = 5


def _heat_table(doc: dict[str, Any], names: dict[str, str]) -> dict[str, Any] | None:
    """The score-by-category table: columns {"id", "name"} (names: category_id -> name),
    rows of cells {"score", "n", "colour", "few"}; a cell with fewer than
    HEAT_MIN_RESPONSES counted responses is "few" and left uncoloured. None if no category."""
    categories: list[Any] = []
    for m in doc["models"]:
        for c in m.get("categories") or []:
            if c["category"] not in categories:
                categories.append(c["category"])
    if len(categories) < 1:
        return None
    rows = []
    for m in doc["models"]:
        by_cat = {c["category"]: c for c in m.get("categories") or []}
        cells = []
        for cat in categories:
            c = by_cat.get(cat)
            score = c["score"] if c else None
            n = c["n_counted"] if c else 0
            few = score is not None and n < HEAT_MIN_RESPONSES
            cells.append(
                {
                    "score": score,
                    "n": n,
                    "few": few,
                    "colour": _heat_colour(None if few else score),
                }
            )
        rows.append({"model_id": m["model_id"], "cells": cells})
    columns = [
        {"id": "" if c is None else c, "name": "(none)" if c is None else names.get(c, c)}
        for c in categories
    ]
    return {"categories": columns, "rows": rows, "few_below": HEAT_MIN_RESPONSES}


def _pairs_for_display(agreement: dict[str, Any]) -> list[dict[str, Any]]:
    """Add confusion rows with a shade per cell (darker = more responses) to each pair."""
    scale = agreement.get("scale") or []
    pairs = []
    for p in agreement["pairs"]:
        biggest = max((v for row in p["confusion"] for v in row), default=0) or 1
        rows = [
            {
                "label": label,
                "cells": [
                    {
                        "n": v,
                        "diag": i == j,
                        "alpha": round(0.08 + 0.8 * v / biggest, 3) if v else 0,
                    }
                    for j, v in enumerate(row)
                ],
            }
            for i, (label, row) in enumerate(zip(scale, p["confusion"], strict=False))
        ]
        pairs.append({**p, "scale": scale, "rows": rows})
    return pairs


def _board_context(sel: dict[str, Any]) -> dict[str, Any]:
    result: BoardResult = board_for_edition(sel["edition"], banding=sel["banding"])
    doc = leaderboard_doc(result, sel["edition"])
    models = doc["models"]
    prev_band = None
    pairs = {(c["above"], c["below"]): c for c in doc.get("neighbours") or []}
    prev_model = None
    prev_tier = None
    for m in models:
        m["band_start"] = m["band"] != prev_band
        m["tier_start"] = m.get("tier") != prev_tier
        # The paired comparison across this band boundary (issue 21), if any.
        m["boundary"] = pairs.get((prev_model, m["model_id"])) if m["band_start"] else None
        prev_band, prev_model, prev_tier = m["band"], m["model_id"], m.get("tier")
    for m in models:  # the bands each tier merges, for its first row ("bands 1-3")
        members = [o["band"] for o in models if o.get("tier") == m.get("tier")]
        m["tier_bands"] = (members[0], members[-1]) if m.get("tier") is not None else None
    axis = _interval_svg(models)
    ctx: dict[str, Any] = {
        **sel,
        "result": result,
        "doc": doc,
        "models": models,
        "axis": axis,
        "svg_width": SVG_WIDTH,
        "svg_height": SVG_HEIGHT,
        "heat": _heat_table(
            doc,
            dict(
                Category.objects.filter(benchmark=sel["benchmark"]).values_list(
                    "category_id", "name"
                )
            ),
        ),
        "agreement": result.agreement_dict(),
        "pairs": _pairs_for_display(result.agreement_dict()),
        "banding_sentence": banding_sentence(doc),
        "tier_sentence": tier_sentence(doc),
        "panel_words": panel_words(doc),
        "agreement_pct": None
        if doc["agreement_rate"] is None
        else round(100 * doc["agreement_rate"], 1),
        "compare_result": None,
    }
    if sel["compare"] is not None and result.leaderboard is not None:
        other = board_for_edition(sel["compare"], banding=sel["banding"])
        if other.leaderboard is not None:
            robust = compare_leaderboards(other.leaderboard, result.leaderboard).to_dict()
            for m in robust["models"]:
                move = m["rank_move"]
                m["arrow"] = "" if move is None else "▲" if move > 0 else "▼" if move < 0 else "="
                m["abs_move"] = abs(move) if move else 0
                if m["score_original"] is not None and m["score_corrected"] is not None:
                    m["score_change"] = round(m["score_corrected"] - m["score_original"], 2)
                else:
                    m["score_change"] = None
            ctx["compare_result"] = robust
    return ctx


def _query(sel: dict[str, Any], **extra: str) -> str:
    from urllib.parse import urlencode

    params = {"edition": sel["edition"].name}
    if sel.get("compare"):
        params["compare"] = sel["compare"].name
    if sel.get("banding") and sel["banding"] != "gap":
        params["banding"] = sel["banding"]
    params.update({k: v for k, v in extra.items() if v})
    return urlencode(params)


# ----------------------------------------------------------------------------- leaderboard
def leaderboard_index(request: HttpRequest) -> HttpResponse:
    """List the benchmarks, or go straight to the only one."""
    return _benchmark_index(request, "scoring:leaderboard", "Leaderboard")


def leaderboard(request: HttpRequest, benchmark: str) -> HttpResponse:
    """Show the band table, heat table, agreement panel and edition comparison."""
    sel = _selection(request, benchmark)
    ctx = _board_context(sel)
    base = reverse("scoring:leaderboard", args=[benchmark])
    ctx.update(
        {
            "page_url": base,
            "query": _query(sel),
            "csv_url": reverse("scoring:leaderboard-csv", args=[benchmark]) + "?" + _query(sel),
            "json_url": reverse("scoring:leaderboard-json", args=[benchmark]) + "?" + _query(sel),
            "report_url": reverse("scoring:report", args=[benchmark]) + "?" + _query(sel),
            **edition_navigation(sel, base),
        }
    )
    template = (
        "scoring/board/_leaderboard.html"
        if wants_fragment(request)
        else "scoring/board/leaderboard.html"
    )
    return vary_on_htmx(render(request, template, ctx))


def leaderboard_csv_download(request: HttpRequest, benchmark: str) -> HttpResponse:
    sel = _selection(request, benchmark)
    doc = board_for_edition(sel["edition"], banding=sel["banding"]).leaderboard_dict()
    response = HttpResponse(leaderboard_csv(doc), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="leaderboard-{benchmark}-{sel["edition"].name}.csv"'
    )
    return response


def leaderboard_json_download(request: HttpRequest, benchmark: str) -> HttpResponse:
    sel = _selection(request, benchmark)
    result = board_for_edition(sel["edition"], banding=sel["banding"])
    doc = leaderboard_doc(result, sel["edition"])
    doc["agreement"] = result.agreement_dict()
    response = HttpResponse(
        json.dumps(doc, ensure_ascii=False, allow_nan=False, indent=2),
        content_type="application/json",
    )
    response["Content-Disposition"] = (
        f'attachment; filename="leaderboard-{benchmark}-{sel["edition"].name}.json"'
    )
    return response


# ----------------------------------------------------------------------------- report
def report_index(request: HttpRequest) -> HttpResponse:
    return _benchmark_index(request, "scoring:report", "Methodology report")


def edition_navigation(sel: dict[str, Any], base: str) -> dict[str, Any]:
    """Return `edition_links` (name, status, url under `base`, current) and
    `compare_choices` (the other editions) of a page selection (also the public site's)."""
    return {
        "edition_links": [
            {
                "name": e.name,
                "status": e.status,
                "url": f"{base}?edition={e.name}",
                "current": e.pk == sel["edition"].pk,
            }
            for e in sel["editions"]
        ],
        "compare_choices": [e for e in sel["editions"] if e.pk != sel["edition"].pk],
    }


def with_default_compare(sel: dict[str, Any], query: Any) -> dict[str, Any]:
    """Return the page selection `sel` comparing with the edition's parent (corrected-1
    against original) unless the query string names `compare` (also the public site's)."""
    if "compare" not in query:
        parent = next((e for e in sel["editions"] if e.pk == sel["edition"].parent_id), None)
        sel["compare"] = parent
    return sel


def report_for_selection(sel: dict[str, Any]) -> dict[str, Any]:
    """Build the report of the selection's edition against its `compare` edition (also the
    public site's); Http404 for a missing edition, DomainError as build_report raises it."""
    try:
        return build_report(sel["edition"], compare=sel["compare"])
    except NotFoundError as exc:
        raise Http404(str(exc)) from exc


def report_page_context(doc: dict[str, Any] | None) -> dict[str, Any]:
    """Return the words the report body template needs from a report `doc` (None: no report).

    Shared by the signed-in report and the public site's (issue 30 item 8: the public page
    read "Grades: ." because it built its own context without the panel's words). Keys:
    figures, banding_sentence, panel_words, robustness_sentences, grade_change_rows.
    """
    return {
        "figures": figure_rows(doc) if doc else [],
        "banding_sentence": banding_sentence(doc) if doc else "",
        "panel_words": panel_words(doc) if doc else "",
        # The flip count and correction margin sentences, without the Markdown heading.
        "robustness_sentences": robustness_lines(doc)[3:] if doc else [],
        # The reason codes of the JSON and Markdown report, in words for the page.
        "grade_change_rows": [
            {**g, "reason_label": REASON_LABELS.get(g["reason"], g["reason"])}
            for g in (doc["grade_changes"] if doc else [])
        ],
    }


def _report_selection(request: HttpRequest, benchmark: str) -> dict[str, Any]:
    return with_default_compare(_selection(request, benchmark), request.GET)


def report(request: HttpRequest, benchmark: str) -> HttpResponse:
    """Render the methodology report; the comparison edition is chosen on the page."""
    sel = _report_selection(request, benchmark)
    try:
        doc = report_for_selection(sel)
        error = None
    except DomainError as exc:
        doc, error = None, str(exc)
    query = _query(sel, compare="" if sel["compare"] else "")
    if sel["compare"] is None:
        query += "&compare="
    ctx = {
        **sel,
        "doc": doc,
        "error": error,
        **report_page_context(doc),
        "md_url": reverse("scoring:report-md", args=[benchmark]) + "?" + query,
        "json_url": reverse("scoring:report-json", args=[benchmark]) + "?" + query,
        "leaderboard_url": reverse("scoring:leaderboard", args=[benchmark])
        + f"?edition={sel['edition'].name}",
        "page_url": reverse("scoring:report", args=[benchmark]),
    }
    template = (
        "scoring/board/_report_body.html"
        if wants_fragment(request)
        else "scoring/board/report.html"
    )
    return vary_on_htmx(render(request, template, ctx))


REASON_LABELS = dict(KeyEntry.Reason.choices)


def report_md_download(request: HttpRequest, benchmark: str) -> HttpResponse:
    sel = _report_selection(request, benchmark)
    response = HttpResponse(
        report_markdown(report_for_selection(sel)), content_type="text/markdown; charset=utf-8"
    )
    response["Content-Disposition"] = (
        f'attachment; filename="report-{benchmark}-{sel["edition"].name}.md"'
    )
    return response


def report_json_download(request: HttpRequest, benchmark: str) -> HttpResponse:
    sel = _report_selection(request, benchmark)
    response = HttpResponse(
        json.dumps(report_for_selection(sel), ensure_ascii=False, allow_nan=False, indent=2),
        content_type="application/json",
    )
    response["Content-Disposition"] = (
        f'attachment; filename="report-{benchmark}-{sel["edition"].name}.json"'
    )
    return response


def board_page_context(selection: dict[str, Any]) -> dict[str, Any]:
    """Return the leaderboard page's template context for an already resolved selection.

    `selection` has the keys `_selection` gives: benchmark, editions (those the page may
    offer), edition, compare (or None) and banding. For pages outside this app (the public
    results site) that resolve editions by their own rules and add their own URLs.
    """
    return _board_context(selection)
