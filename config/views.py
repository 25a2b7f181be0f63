"""Site-wide pages: the overview and the health check."""

from __future__ import annotations

from django.db.models import Count
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from questions.models import Benchmark
from questions.selectors import latest_published_edition, scored_entries


def _link(label: str, name: str, **kwargs) -> dict:
    return {"label": label, "url": reverse(name, kwargs=kwargs or None)}


def home(request: HttpRequest) -> HttpResponse:
    """Show each benchmark with its headline counts and links to its pages."""
    benchmarks = list(
        Benchmark.objects.annotate(
            n_questions=Count("questions", distinct=True),
            n_models=Count("models", distinct=True),
            n_editions=Count("editions", distinct=True),
        )
    )
    from questions.models import Response

    counts = dict(
        Response.objects.values_list("question__benchmark")
        .annotate(n=Count("id"))
        .values_list("question__benchmark", "n")
    )
    for b in benchmarks:
        b.n_responses = counts.get(b.pk, 0)
        # Scored depends on the key edition (removals, exclusions by audit): the latest one.
        b.scored_edition = latest_published_edition(b)
        if b.scored_edition is not None:
            b.n_scored = len(scored_entries(b.scored_edition))
        queue = _link("Review queue", "review:queue")
        queue["url"] += f"?benchmark={b.name}"
        b.links = [
            queue,
            _link("Leaderboard", "scoring:leaderboard", benchmark=b.name),
            _link("Methodology report", "scoring:report", benchmark=b.name),
            _link("Key editions", "review:editions", benchmark=b.name),
        ]
    return render(request, "core/home.html", {"benchmarks": benchmarks})


def healthz(request: HttpRequest) -> JsonResponse:
    """Answer 200 with {"status": "ok"} when the database answers (for load balancers)."""
    Benchmark.objects.exists()
    return JsonResponse({"status": "ok"})
