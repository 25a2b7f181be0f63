"""The review's progress page (issue 31 item 3): editors and admins, read-only."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET

from core.views import requires
from questions.models import Benchmark
from review import permissions
from review.progress import PACE_DAYS, review_progress


@require_GET
@requires(permissions.can_view_progress)
def progress_index(request: HttpRequest) -> HttpResponse:
    """The benchmarks with review items; the only one's progress page directly."""
    benchmarks = list(Benchmark.objects.filter(review_items__isnull=False).distinct())
    if len(benchmarks) == 1:
        return redirect("review:progress", benchmark=benchmarks[0].name)
    return render(request, "review/progress_index.html", {"benchmarks": benchmarks})


@require_GET
@requires(permissions.can_view_progress)
def progress(request: HttpRequest, benchmark: str) -> HttpResponse:
    """Per reviewer and per source figures, and the forecast (review.progress)."""
    bench = get_object_or_404(Benchmark, name=benchmark)
    figures = review_progress(bench)
    others = Benchmark.objects.filter(review_items__isnull=False).exclude(pk=bench.pk).distinct()
    return render(
        request,
        "review/progress.html",
        {
            "benchmark": bench,
            "progress": figures,
            "detectors": [r for r in figures.detectors if r["raised"]],
            "pace_days": PACE_DAYS,
            "others": list(others),
        },
    )
