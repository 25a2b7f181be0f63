"""Runs pages (admins): list with live progress, start a re-score or key audit, run detail.

Thin views: access check -> service -> redirect or partial. While a run is pending or
running, its progress fragment carries `hx-trigger="every 1s"`; the fragment rendered
once it has finished has none, so the polling stops by itself.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from core.htmx import vary_on_htmx, wants_fragment
from core.pages import bad_request_page
from core.views import done, requires
from questions.errors import DomainError
from questions.models import Benchmark, KeyEdition
from scoring.models import Judge, RunItem, ScoringRun
from scoring.runs import selectors as runs_selectors
from scoring.runs import services
from scoring.runs.costs import costs_of_runs
from scoring.runs.permissions import can_manage_runs, can_view_run
from scoring.runs.services.batch_mode import OPEN_BATCH
from scoring.runs.services.tunables import batch_poll_seconds
from scoring.selectors import panel_drift

RUNS_SHOWN = 50
FAILED_SHOWN = 200


# What a refused user reads (core.views.requires with runs_permissions' predicates).
ADMINS_ONLY = "Only an admin may see or start re-scoring runs."
VIEWERS_ONLY = "Only an editor or an admin may watch a re-scoring run."


def runs_queryset():
    """Runs with what the list shows, in a fixed number of queries."""
    return ScoringRun.objects.select_related("benchmark", "edition", "created_by").prefetch_related(
        Prefetch("judges", queryset=Judge.objects.only("id", "judge_id").order_by("judge_id"))
    )


def timing(run: ScoringRun) -> dict:
    """Return rate (pairs/s) and ETA (s) of a running run, from its counters and start time."""
    if run.status != ScoringRun.Status.RUNNING or not run.started_at or not run.done:
        return {"rate": None, "eta": None}
    elapsed = max((timezone.now() - run.started_at).total_seconds(), 0.001)
    rate = run.done / elapsed
    return {"rate": rate, "eta": max(0, run.needed - run.done) / rate if rate else None}


def _decorate(run: ScoringRun) -> ScoringRun:
    run.is_active = run.status in services.ACTIVE_STATUSES
    run.is_stopped = run.status == ScoringRun.Status.STOPPED
    run.percent = round(100 * run.progress, 1)
    run.stall = runs_selectors.run_stall(run) if run.is_active else None
    run.resends = runs_selectors.run_resends(run)
    # no rate or time left while nothing moves: an ETA would be made up
    run.timing = timing(run) if run.stall is None else {"rate": None, "eta": None}
    return run


def _with_finish(run: ScoringRun) -> ScoringRun:
    """Add `finish` to a run stopped at its budget: what finishing it would cost and the
    caps that would finish it, as written at the stop (scoring.runs.budget.last_finish_offer;
    None otherwise)."""
    from scoring.runs.budget import last_finish_offer

    run.finish = last_finish_offer(run) if run.is_stopped else None
    return run


@require_GET
@requires(can_manage_runs, ADMINS_ONLY)
def runs(request: HttpRequest) -> HttpResponse:
    """List recent runs (live progress) and the editions an admin can re-score or audit."""
    recent = [_decorate(r) for r in runs_queryset()[:RUNS_SHOWN]]
    spent = costs_of_runs([r.pk for r in recent])
    for r in recent:
        r.spent = spent.get(r.pk)
    context = {"runs": recent, "any_active": any(r.is_active for r in recent)}
    if wants_fragment(request):
        return vary_on_htmx(render(request, "scoring/runs/_table.html", context))
    editions = KeyEdition.objects.select_related("benchmark").order_by(
        "benchmark__name", "created_at", "id"
    )
    context["editions"] = editions
    context["benchmarks"] = list(Benchmark.objects.order_by("name"))
    context["panel_drift"] = panel_drift(context["benchmarks"]).items()
    return vary_on_htmx(render(request, "scoring/runs/index.html", context))


@require_POST
@requires(can_manage_runs, ADMINS_ONLY)
def run_create(request: HttpRequest) -> HttpResponse:
    """Start a re-scoring (kind=grade) or key-audit (kind=audit) run of one edition, live
    or (mode=batch, re-scoring only) through the vendors' batch APIs.

    The run is enqueued after commit; the admin lands on its page.
    """
    edition = get_object_or_404(
        KeyEdition.objects.select_related("benchmark"), pk=request.POST.get("edition")
    )
    kind = request.POST.get("kind") or ScoringRun.Kind.GRADE
    if kind not in ScoringRun.Kind.values:
        messages.error(request, f"Unknown run kind {kind!r}.")
        return done(request, reverse("scoring:runs"))
    mode = request.POST.get("mode") or ScoringRun.Mode.LIVE
    role = Judge.Role.AUDITOR if kind == ScoringRun.Kind.AUDIT else Judge.Role.JUDGE
    judges, _ = services.active_graders(edition, role=role)
    try:
        run = services.scoring_run_create(
            edition=edition,
            judges=judges,
            kind=kind,
            user=request.user,
            budget_cost=request.POST.get("budget_cost", "").strip() or None,
            budget_tokens=request.POST.get("budget_tokens", "").strip() or None,
            mode=mode,
        )
    except DomainError as exc:
        messages.error(request, str(exc))
        return done(request, reverse("scoring:runs"))
    if run.needed:
        text = f"{run.needed} pair{pluralize(run.needed)} to grade, {run.reused} reused."
    else:
        text = f"nothing lacks a grade; all {run.reused} reused."
    messages.success(request, f"Run {run.pk} for {edition.benchmark.name} / {edition.name}: {text}")
    return done(request, reverse("scoring:run-detail", kwargs={"pk": run.pk}))


@require_GET
@requires(can_manage_runs, ADMINS_ONLY)
def run_estimate(request: HttpRequest) -> HttpResponse:
    """Return the estimate of the run the Start buttons would create (edition pk, kind):
    an htmx fragment of the Runs page, loaded as each edition's row is shown; a page of its
    own without htmx. Creates nothing and calls no judge (scoring.runs.estimate)."""
    from scoring.runs.estimate import estimate_run, estimate_summary

    edition_id = request.GET.get("edition", "")
    if not edition_id.isdigit():
        return bad_request_page(
            request, "Give the id of the key edition in the address, e.g. ?edition=3&kind=grade."
        )
    edition = get_object_or_404(KeyEdition.objects.select_related("benchmark"), pk=edition_id)
    kind = request.GET.get("kind") or ScoringRun.Kind.GRADE
    if kind not in ScoringRun.Kind.values:
        return bad_request_page(request, f"Unknown run kind {kind!r}: grade or audit.")
    role = Judge.Role.AUDITOR if kind == ScoringRun.Kind.AUDIT else Judge.Role.JUDGE
    # every judge of the role: the estimate leaves out those that cannot grade, saying why
    estimate = estimate_run(
        edition=edition, judges=list(services.benchmark_graders(edition, role=role)), kind=kind
    )
    context = {
        "estimate": estimate,
        "summary": estimate_summary(estimate),
        "edition": edition,
        "kind": kind,
        "kind_label": ScoringRun.Kind(kind).label,
    }
    template = (
        "scoring/runs/_estimate.html" if wants_fragment(request) else "scoring/runs/estimate.html"
    )
    return vary_on_htmx(render(request, template, context))


@require_GET
@requires(can_view_run, VIEWERS_ONLY)
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Show one run: progress, counters, ledger summary and its failed pairs. Editors see it
    read-only (no Resume or Cancel, no link to the admin's list of runs)."""
    run = _with_finish(_decorate(get_object_or_404(runs_queryset(), pk=pk)))
    if wants_fragment(request):
        return vary_on_htmx(render(request, "scoring/runs/_progress.html", {"run": run}))
    failed = (
        RunItem.objects.filter(run=run, state=RunItem.State.FAILED)
        .select_related("judge", "response__model", "response__question", "key_entry__question")
        .order_by("id")[:FAILED_SHOWN]
    )
    held = RunItem.objects.filter(
        run=run, state=RunItem.State.PENDING, lease_until__gt=timezone.now()
    )
    in_batches = held.filter(holder__startswith="batch:").count()
    pending_held = held.count() - in_batches
    context = {
        "run": run,
        "ledger": runs_selectors.ledger_summary(run),
        "costs": runs_selectors.run_costs(run),
        "failed_items": failed,
        "pending_held": pending_held,
        "pending_in_batches": in_batches,
        "batches": runs_selectors.run_batches(run),
        "batch_retry": settings.SNAGLIST_BATCH_FAILED_RETRY,
        "notes": [line for line in run.error.splitlines() if line],
        "can_manage": can_manage_runs(request.user),
    }
    return vary_on_htmx(render(request, "scoring/runs/detail.html", context))


@require_GET
@requires(can_view_run, VIEWERS_ONLY)
def run_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """Return the progress fragment of one run (polled by htmx while the run is active)."""
    run = _with_finish(_decorate(get_object_or_404(runs_queryset(), pk=pk)))
    # The run page asks for its Resume/Cancel buttons too, so they go when the run ends
    # (an admin's only: an editor watches).
    show_actions = request.GET.get("actions") == "1" and can_manage_runs(request.user)
    response = render(
        request, "scoring/runs/_progress.html", {"run": run, "show_actions": show_actions}
    )
    return response


@require_POST
@requires(can_manage_runs, ADMINS_ONLY)
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel an active run (pairs already graded are kept)."""
    run = get_object_or_404(ScoringRun, pk=pk)
    try:
        services.scoring_run_cancel(run=run, user=request.user)
        out = run.batches.filter(status__in=OPEN_BATCH).count()
        messages.success(
            request,
            f"Run {run.pk} cancelled."
            + (
                f" Its {out} vendor batch{pluralize(out, 'es')} still out will be cancelled at"
                f" the vendor at the next poll (every {batch_poll_seconds():g} s)."
                if out
                else ""
            ),
        )
    except DomainError as exc:
        messages.error(request, str(exc))
    return _back_to(request, run)


@require_POST
@requires(can_manage_runs, ADMINS_ONLY)
def run_resume(request: HttpRequest, pk: int) -> HttpResponse:
    """Send an unfinished run's pending pairs again (after a worker was lost)."""
    run = get_object_or_404(ScoringRun, pk=pk)
    try:
        services.scoring_run_resume(
            run=run,
            user=request.user,
            budget_cost=request.POST.get("budget_cost", "").strip() or None,
            budget_tokens=request.POST.get("budget_tokens", "").strip() or None,
        )
        messages.success(request, f"Run {run.pk} resumed.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return _back_to(request, run)


def _back_to(request: HttpRequest, run: ScoringRun) -> HttpResponse:
    return done(request, reverse("scoring:run-detail", kwargs={"pk": run.pk}))
