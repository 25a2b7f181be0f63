"""Key edition pages: the editions of a benchmark, one edition with its changes, its whole
answer key, and publishing it (editors). URL names stay in the `review` namespace."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.roles import Role, has_role
from core.views import done, forbidden, requires
from questions.models import Benchmark, KeyEdition
from review import permissions, selectors, services
from review.cited_passages import change_passages
from review.errors import DomainError, NotAllowedError
from review.models import Proposal
from review.view_helpers import query_without_page
from scoring.models import RescoreRequest
from scoring.runs import services as scoring_services
from scoring.runs.estimate import estimate_run, estimate_summary
from scoring.runs.permissions import can_view_run


@require_GET
@requires(permissions.can_view_editions)
def editions_index(request: HttpRequest) -> HttpResponse:
    benchmarks = list(Benchmark.objects.order_by("name"))
    if len(benchmarks) == 1:
        return redirect("review:editions", benchmark=benchmarks[0].name)
    return render(request, "review/editions_index.html", {"benchmarks": benchmarks})


@require_GET
@requires(permissions.can_view_editions)
def editions(request: HttpRequest, benchmark: str) -> HttpResponse:
    bench = get_object_or_404(Benchmark, name=benchmark)
    return render(
        request,
        "review/editions.html",
        {
            "benchmark": bench,
            "editions": selectors.editions_for_benchmark(bench),
            "can_publish": permissions.can_publish(request.user),
        },
    )


@require_GET
@requires(permissions.can_view_editions)
def edition_key(request: HttpRequest, benchmark: str, name: str) -> HttpResponse:
    """The whole answer key of one edition: each question's effective entry and status."""
    edition = get_object_or_404(
        KeyEdition.objects.select_related("benchmark"), benchmark__name=benchmark, name=name
    )
    text = request.GET.get("q", "")
    status = request.GET.get("status", "")
    if status not in dict(selectors.KEY_STATUSES):
        status = ""
    rows = selectors.key_rows(edition, text=text, status=status)
    page = Paginator(rows, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "review/edition_key.html",
        {
            "edition": edition,
            "benchmark": edition.benchmark,
            "page": page,
            "text": text,
            "status": status,
            "statuses": selectors.KEY_STATUSES,
            "query": query_without_page(request),
        },
    )


@require_GET
@requires(permissions.can_view_editions)
def edition_detail(request: HttpRequest, benchmark: str, name: str) -> HttpResponse:
    edition = get_object_or_404(
        KeyEdition.objects.select_related("benchmark", "parent", "published_by"),
        benchmark__name=benchmark,
        name=name,
    )
    changes = selectors.edition_changes(edition)
    if edition.parent_id:  # the cited passages beside each change (issue 18 item 4)
        passages = change_passages(changes, edition.benchmark_id)
        for change in changes:
            change.passages = passages[change.question.pk]
    return render(
        request,
        "review/edition.html",
        {
            "edition": edition,
            "benchmark": edition.benchmark,
            "changes": changes,
            "can_publish": permissions.can_publish(request.user) and not edition.is_published(),
            # proposals still waiting: publishing now leaves them out of this edition
            "pending_count": Proposal.objects.filter(
                status=Proposal.Status.PENDING, item__benchmark=edition.benchmark
            ).count()
            if not edition.is_published()
            else 0,
            # Admins re-score a published edition from here as well as from the runs page.
            "can_rescore": edition.is_published() and has_role(request.user, Role.ADMIN),
            "can_view_run": can_view_run(request.user),
            "rescore_request": RescoreRequest.objects.filter(edition=edition)
            .select_related("run")
            .first(),
        },
    )


@require_POST
@requires(permissions.can_publish)
def edition_publish(request: HttpRequest, benchmark: str, name: str) -> HttpResponse:
    edition = get_object_or_404(KeyEdition, benchmark__name=benchmark, name=name)
    try:
        services.key_edition_publish(edition=edition, user=request.user)
        run = edition.runs.order_by("-pk").first()
        messages.success(
            request,
            f"Key edition {edition.name} is published."
            + (
                f" Re-scoring run {run.pk} grades the responses to its corrected questions "
                f"({run.get_status_display().lower()})."
                if run is not None
                else ""
            ),
        )
    except NotAllowedError as exc:
        return forbidden(request, str(exc))
    except DomainError as exc:
        messages.error(request, str(exc))
    return done(request, reverse("review:edition", args=[benchmark, name]))


@require_GET
@requires(permissions.can_view_editions)
def edition_impact(request: HttpRequest, benchmark: str, name: str) -> HttpResponse:
    """The impact preview of a key edition (issue 18 item 4): each model's score, rank and
    band under the latest published edition and under this one, and per change the move
    due to that question alone; editors start a preview re-score of a draft from here."""
    from scoring.board.impact import draft_impact

    edition = get_object_or_404(
        KeyEdition.objects.select_related("benchmark", "parent"),
        benchmark__name=benchmark,
        name=name,
    )
    impact = draft_impact(edition)
    can_preview = (
        permissions.can_publish(request.user)
        and not edition.is_published()
        and bool(impact["changes"])
    )
    estimate = ""
    if can_preview and impact["not_graded"] and not impact["graders"].sentence:
        judges, _ = scoring_services.active_graders(edition)
        estimate = estimate_summary(estimate_run(edition=edition, judges=judges))
    return render(
        request,
        "review/edition_impact.html",
        {
            "edition": edition,
            "benchmark": edition.benchmark,
            "impact": impact,
            "can_preview": can_preview,
            "estimate_summary": estimate,
        },
    )


@require_POST
@requires(permissions.can_publish)
def edition_preview_rescore(request: HttpRequest, benchmark: str, name: str) -> HttpResponse:
    """Start a preview re-score of a draft edition (editor or admin), back to its preview."""
    edition = get_object_or_404(KeyEdition, benchmark__name=benchmark, name=name)
    try:
        run = services.draft_preview_rescore(edition=edition, user=request.user)
        messages.success(
            request,
            f"Preview re-score started (run {run.pk}): {run.needed} grade"
            f"{'' if run.needed == 1 else 's'} to buy, {run.reused} already held. "
            "Publishing later reuses these grades.",
        )
    except NotAllowedError as exc:
        return forbidden(request, str(exc))
    except DomainError as exc:
        messages.error(request, str(exc))
    return done(request, reverse("review:edition-impact", args=[benchmark, name]))
