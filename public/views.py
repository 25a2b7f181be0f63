"""The public results site: read-only pages of a benchmark whose admin made it public (issue 22).

Anonymous visitors reach these through `config.middleware.LoginRequiredMiddleware`, which
lets `/public/<benchmark>/...` through only for a public benchmark; each view resolves the
benchmark again with `public.selectors.public_benchmark` (404 when private) and offers
published key editions only. No page here names a person unless the admin opted in to
credit them (`Benchmark.credit_reviewers`), and none links to a private page. Pages carry
an ETag and Last-Modified (`public.selectors`) and answer a matching conditional GET with
304. They load no script: every control is a plain link or a GET form.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import get_conditional_response
from django.utils.http import http_date, urlencode

from public.forms import ReaderReportForm
from public.selectors import (
    public_benchmark,
    public_etag,
    public_last_modified,
    published_edition,
    published_editions,
)
from questions.errata import Erratum, errata_for_edition, errata_register, erratum_get
from questions.errors import DomainError, NotFoundError
from questions.models import Benchmark, KeyEdition, Question
from review.errors import InvalidInputError, RateLimitedError
from review.services import reader_report_create
from scoring.board.report import (
    LEADERBOARD_CSV_FIELDS,
    report_markdown,
)
from scoring.board.views import (
    board_page_context,
    edition_navigation,
    report_for_selection,
    report_page_context,
    with_default_compare,
)
from scoring.selectors import BANDINGS, board_for_edition
from scoring.spreadsheet import csv_text

# Runs are private: the public page says the figures are provisional, not which run or why.
PUBLIC_STALE = (
    "Re-scoring after the latest corrections has not finished: these figures do not yet "
    "include every grade owed, and may change."
)
ERRATA_CSV_FIELDS = (
    "id",
    "edition",
    "parent_edition",
    "kind",
    "question_id",
    "old_answer",
    "new_answer",
    "old_citation",
    "new_citation",
    "reason",
    "reason_label",
    "took_effect",
)


# ----------------------------------------------------------------------------- helpers
def _conditional(
    request: HttpRequest,
    benchmark: Benchmark,
    editions: list[KeyEdition],
    edition: KeyEdition | None,
    make: Callable[[], HttpResponse],
) -> HttpResponse:
    """Answer 304 when the client's copy is current, else `make()` with validators set."""
    etag = public_etag(benchmark, editions, edition, request.path + "?" + request.GET.urlencode())
    last = public_last_modified(benchmark, editions)
    stamp = int(last.timestamp()) if last else None
    unchanged = get_conditional_response(request, etag=etag, last_modified=stamp)
    response = unchanged if unchanged is not None else make()
    response["ETag"] = etag
    if stamp is not None:
        response["Last-Modified"] = http_date(stamp)
    # Cacheable by browsers and shared caches for a minute, then revalidated with the ETag.
    response["Cache-Control"] = "public, max-age=60"
    return response


def _selection(request: HttpRequest, benchmark_name: str) -> dict[str, Any]:
    benchmark = public_benchmark(benchmark_name)
    editions = published_editions(benchmark)
    edition = published_edition(editions, request.GET.get("edition"))
    compare_name = request.GET.get("compare") or ""
    compare = published_edition(editions, compare_name) if compare_name else None
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


def _query(sel: dict[str, Any]) -> str:
    params = {"edition": sel["edition"].name}
    if sel.get("compare"):
        params["compare"] = sel["compare"].name
    if sel["banding"] != "gap":
        params["banding"] = sel["banding"]
    return urlencode(params)


def _public_doc(sel: dict[str, Any]) -> dict[str, Any]:
    from scoring.board.views import leaderboard_doc

    result = board_for_edition(sel["edition"], banding=sel["banding"])
    doc = leaderboard_doc(result, sel["edition"])
    return _public_state(doc)


def _public_state(doc: dict[str, Any]) -> dict[str, Any]:
    """Put the public wording of a stale board's reason in `doc`, and its state in words
    with it (`scoring.completeness.describe_figures`): no run number or time in public."""
    from scoring.completeness import describe_figures

    if doc.get("stale"):
        doc["stale_reason"] = PUBLIC_STALE
        doc.update(describe_figures(doc))
    return doc


def _attachment(body: str, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _json(doc: Any) -> str:
    return json.dumps(doc, ensure_ascii=False, allow_nan=False, indent=2)


def _csv(fields: tuple[str, ...], rows: list[dict[str, Any]]) -> str:
    """Return CSV of `rows` under `fields`, spreadsheet-safe (scoring.spreadsheet.csv_text,
    the product's one CSV writer)."""
    return csv_text(fields, ([row.get(k) for k in fields] for row in rows))


# ----------------------------------------------------------------------------- index
def index(request: HttpRequest) -> HttpResponse:
    """List the public benchmarks (an empty list says so)."""
    benchmarks = list(Benchmark.objects.filter(is_public=True).order_by("name"))
    return render(request, "public/index.html", {"benchmarks": benchmarks})


# ----------------------------------------------------------------------------- leaderboard
def leaderboard(request: HttpRequest, benchmark: str) -> HttpResponse:
    """Show the banded leaderboard of a published edition, with its notes and a comparison."""
    sel = _selection(request, benchmark)

    def make() -> HttpResponse:
        ctx = board_page_context(sel)
        _public_state(ctx["doc"])
        base = reverse("public:leaderboard", args=[benchmark])
        query = _query(sel)
        ctx.update(
            {
                "page_url": base,
                "csv_url": reverse("public:leaderboard-csv", args=[benchmark]) + "?" + query,
                "json_url": reverse("public:leaderboard-json", args=[benchmark]) + "?" + query,
                "report_url": reverse("public:report", args=[benchmark])
                + f"?edition={sel['edition'].name}",
                **edition_navigation(sel, base),
                "errata_url": reverse("public:errata", args=[benchmark])
                + f"?edition={sel['edition'].name}",
                "n_errata": len(errata_for_edition(sel["edition"])),
                "report_error_url": reverse("public:report-error-choose", args=[benchmark]),
            }
        )
        ctx["nav"] = "leaderboard"
        return render(request, "public/leaderboard.html", ctx)

    return _conditional(request, sel["benchmark"], sel["editions"], sel["edition"], make)


def leaderboard_csv(request: HttpRequest, benchmark: str) -> HttpResponse:
    """Download the leaderboard as spreadsheet-safe CSV, one row per model."""
    sel = _selection(request, benchmark)
    name = f"leaderboard-{benchmark}-{sel['edition'].name}.csv"

    def make() -> HttpResponse:
        rows = _public_doc(sel)["models"]
        return _attachment(_csv(LEADERBOARD_CSV_FIELDS, rows), "text/csv; charset=utf-8", name)

    return _conditional(request, sel["benchmark"], sel["editions"], sel["edition"], make)


def leaderboard_json(request: HttpRequest, benchmark: str) -> HttpResponse:
    """Download the leaderboard and judge agreement as JSON (the private download's shape)."""
    sel = _selection(request, benchmark)

    def make() -> HttpResponse:
        doc = _public_doc(sel)
        doc["agreement"] = board_for_edition(
            sel["edition"], banding=sel["banding"]
        ).agreement_dict()
        name = f"leaderboard-{benchmark}-{sel['edition'].name}.json"
        return _attachment(_json(doc), "application/json", name)

    return _conditional(request, sel["benchmark"], sel["editions"], sel["edition"], make)


# ----------------------------------------------------------------------------- report
def _report_selection(request: HttpRequest, benchmark: str) -> dict[str, Any]:
    return with_default_compare(_selection(request, benchmark), request.GET)


def report(request: HttpRequest, benchmark: str) -> HttpResponse:
    """Render the methodology report of a published edition against its parent."""
    sel = _report_selection(request, benchmark)

    def make() -> HttpResponse:
        try:
            doc, error = report_for_selection(sel), None
        except DomainError as exc:
            doc, error = None, str(exc)
        query = _query({**sel, "compare": sel["compare"]})
        if sel["compare"] is None:
            query += "&compare="
        ctx = {
            **sel,
            "public_site": True,
            "nav": "report",
            "doc": doc,
            "error": error,
            **report_page_context(doc),
            "md_url": reverse("public:report-md", args=[benchmark]) + "?" + query,
            "json_url": reverse("public:report-json", args=[benchmark]) + "?" + query,
            "leaderboard_url": reverse("public:leaderboard", args=[benchmark])
            + f"?edition={sel['edition'].name}",
            "page_url": reverse("public:report", args=[benchmark]),
        }
        return render(request, "public/report.html", ctx)

    return _conditional(request, sel["benchmark"], sel["editions"], sel["edition"], make)


def report_md(request: HttpRequest, benchmark: str) -> HttpResponse:
    """Download the methodology report as Markdown."""
    sel = _report_selection(request, benchmark)
    name = f"report-{benchmark}-{sel['edition'].name}.md"
    return _conditional(
        request,
        sel["benchmark"],
        sel["editions"],
        sel["edition"],
        lambda: _attachment(
            report_markdown(report_for_selection(sel)), "text/markdown; charset=utf-8", name
        ),
    )


def report_json(request: HttpRequest, benchmark: str) -> HttpResponse:
    """Download the methodology report as JSON."""
    sel = _report_selection(request, benchmark)
    name = f"report-{benchmark}-{sel['edition'].name}.json"
    return _conditional(
        request,
        sel["benchmark"],
        sel["editions"],
        sel["edition"],
        lambda: _attachment(_json(report_for_selection(sel)), "application/json", name),
    )


# ----------------------------------------------------------------------------- editions
def editions(request: HttpRequest, benchmark: str) -> HttpResponse:
    """List the published key editions, newest first, with their errata counts."""
    bench = public_benchmark(benchmark)
    published = published_editions(bench)

    def make() -> HttpResponse:
        rows = []
        for e in reversed(published):
            errata = errata_for_edition(e)
            rows.append(
                {
                    "edition": e,
                    "corrections": sum(1 for x in errata if x.kind == "correction"),
                    "removals": sum(1 for x in errata if x.kind == "removal"),
                    "publisher": e.published_by.get_username()
                    if bench.credit_reviewers and e.published_by
                    else "",
                }
            )
        return render(
            request, "public/editions.html", {"benchmark": bench, "rows": rows, "nav": "editions"}
        )

    return _conditional(request, bench, published, None, make)


# ----------------------------------------------------------------------------- errata
def _errata_selection(request: HttpRequest, benchmark: str) -> tuple[Benchmark, list, list]:
    bench = public_benchmark(benchmark)
    published = published_editions(bench)
    name = request.GET.get("edition") or ""
    if name:
        errata = errata_for_edition(published_edition(published, name))
    else:
        errata = errata_register(bench)
    return bench, published, errata


def errata(request: HttpRequest, benchmark: str) -> HttpResponse:
    """Show the errata register: every correction and removal, newest edition first."""
    bench, published, items = _errata_selection(request, benchmark)
    edition = request.GET.get("edition") or ""
    return _conditional(
        request,
        bench,
        published,
        None,
        lambda: render(
            request,
            "public/errata.html",
            {
                "benchmark": bench,
                "errata": items,
                "edition_name": edition,
                "editions": published,
                "nav": "errata",
            },
        ),
    )


def errata_download(request: HttpRequest, benchmark: str, fmt: str) -> HttpResponse:
    """Download the errata register (or one edition's, `?edition=`) as CSV or JSON."""
    bench, published, items = _errata_selection(request, benchmark)
    rows = [e.to_dict() for e in items]
    if fmt == "csv":
        body, kind = _csv(ERRATA_CSV_FIELDS, rows), "text/csv; charset=utf-8"
    else:
        body, kind = _json({"benchmark": bench.name, "errata": rows}), "application/json"
    return _conditional(
        request,
        bench,
        published,
        None,
        lambda: _attachment(body, kind, f"errata-{bench.name}.{fmt}"),
    )


def erratum(request: HttpRequest, benchmark: str, edition: str, question: str) -> HttpResponse:
    """Show one erratum, `<benchmark>/<edition>/<question>`, with its before and after."""
    bench = public_benchmark(benchmark)
    published = published_editions(bench)
    try:
        item: Erratum = erratum_get(bench, edition, question)
    except NotFoundError as exc:
        raise Http404(str(exc)) from exc
    return _conditional(
        request,
        bench,
        published,
        None,
        lambda: render(
            request, "public/erratum.html", {"benchmark": bench, "erratum": item, "nav": "errata"}
        ),
    )


# ----------------------------------------------------------------------------- reports
#: Largest request body the report form accepts (bytes). The fields' limits count
#: characters (the form's max_length: 2,000, 1,000 and 254 for the address); this cap only
#: stops a flood before parsing, so it holds every field at its limit in characters that
#: take 4 bytes in UTF-8, each sent as 12 (`%F0%9D%9F%8F`, as a browser url-encodes a
#: form), and 2 KiB for the field names and the CSRF token: 41,096 bytes. (It was 16 KiB,
#: which refused 2,000 `≤`, 18,000 bytes url-encoded, though the limit is 2,000
#: characters: issue 26 part 4.)
REPORT_BODY_MAX = 12 * sum(f.max_length for f in ReaderReportForm.base_fields.values()) + 2048


def report_error_choose(request: HttpRequest, benchmark: str) -> HttpResponse:
    """Let a reader pick the question whose key entry is wrong, then send them to its form.

    GET without ``question``: a page with a list of the benchmark's question ids (no key
    answers). GET ``?question=<id>``: 303 to that question's report form
    (`report_error`); an id the benchmark does not have answers 404 with the list again,
    naming the id. Linked from the leaderboard's comparison and the errata register
    (issue 30 item 9), so a reader can report a question that has no erratum.
    """
    bench = public_benchmark(benchmark)
    ids = list(
        Question.objects.filter(benchmark=bench)
        .order_by("question_id")
        .values_list("question_id", flat=True)
    )
    wanted = (request.GET.get("question") or "").strip()
    status, unknown = 200, ""
    if wanted:
        if wanted in ids:
            url = reverse("public:report-error", args=[bench.name, wanted])
            return HttpResponse(status=303, headers={"Location": url})
        status, unknown = 404, wanted
    return render(
        request,
        "public/report_error_choose.html",
        {"benchmark": bench, "question_ids": ids, "unknown": unknown, "nav": "errata"},
        status=status,
    )


def report_error(request: HttpRequest, benchmark: str, question: str) -> HttpResponse:
    """GET the key-error form for one question of a public benchmark; POST files the report.

    No account: the report goes to the review queue (`review.services.reader_report_create`).
    Answers 413 for a body over REPORT_BODY_MAX, 422 with the form for bad input, 429 with
    Retry-After past a rate limit, and 303 to `?sent=1` once filed. The page shows no key
    answer: the public site reveals only what is already published (errata).
    """

    bench = public_benchmark(benchmark)
    q = Question.objects.filter(benchmark=bench, question_id=question).first()
    if q is None:
        raise Http404(f"{bench.name} has no question {question!r}")
    status, limited = 200, ""
    if request.method == "POST":
        if int(request.META.get("CONTENT_LENGTH") or 0) > REPORT_BODY_MAX:
            return HttpResponse(
                f"A report is at most {REPORT_BODY_MAX} bytes.",
                status=413,
                content_type="text/plain",
            )
        form = ReaderReportForm(request.POST)
        if form.is_valid():
            try:
                reader_report_create(
                    question=q,
                    what=form.cleaned_data["what"],
                    source_text=form.cleaned_data["source_text"],
                    email=form.cleaned_data["email"],
                    address=request.META.get("REMOTE_ADDR", ""),
                )
            except InvalidInputError as exc:
                for field, errors in exc.errors.items():
                    form.add_error(field if field in form.fields else None, errors)
            except RateLimitedError as exc:
                limited, status = str(exc), 429
            else:
                return HttpResponse(status=303, headers={"Location": request.path + "?sent=1"})
        status = status if limited else 422
    else:
        form = ReaderReportForm()
    errata = [e for e in errata_register(bench) if e.question_id == q.question_id]
    response = render(
        request,
        "public/report_error.html",
        {
            "benchmark": bench,
            "question": q,
            "form": form,
            "sent": request.method == "GET" and request.GET.get("sent") == "1",
            "limited": limited,
            "errata": errata,
            "nav": "errata",
        },
        status=status,
    )
    if limited:
        response["Retry-After"] = "3600"
    return response
