"""Candidate panel pages and API (issue 31 item 1): editors and admins see a candidate
panel's figures beside the judge panel's; admins define it, re-score for it and adopt it.

Thin views: access check -> `scoring.board.candidate.candidate_preview` (reads) or
`scoring.runs.services.candidate` (writes, audit-logged) -> render or redirect. Nothing here is
public: anonymous users and reviewers get 403 (the public and signed-in boards read only
the judge panel until an admin adopts the candidate).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.roles import Role, has_role
from core.views import done, requires
from questions.errors import DomainError
from questions.models import Benchmark, KeyEdition
from questions.selectors import latest_published_edition
from scoring.board.candidate import candidate_preview
from scoring.models import Judge
from scoring.runs.permissions import can_manage_runs
from scoring.runs.services.candidate import (
    candidate_adopt,
    candidate_clear,
    candidate_rescore,
    candidate_set,
    candidate_state,
)
from scoring.runs.services.panel import panel_state, parse_panel_spec

VIEWERS_ONLY = "Only an editor or an admin may see a candidate panel."
ADMINS_ONLY = "Only an admin may change or adopt a candidate panel."


def can_view_candidate(user) -> bool:
    """Return True when `user` may see a candidate panel's figures (an editor or admin)."""
    return has_role(user, Role.EDITOR)


class CanViewCandidate(BasePermission):
    """DRF permission: the same rule as the pages (403 for anyone else)."""

    message = VIEWERS_ONLY

    def has_permission(self, request, view) -> bool:
        return can_view_candidate(request.user)


def _edition(benchmark: Benchmark, name: str | None) -> KeyEdition:
    editions = KeyEdition.objects.filter(benchmark=benchmark)
    if name:
        return get_object_or_404(editions, name=name)
    edition = latest_published_edition(benchmark) or editions.order_by("-created_at").first()
    if edition is None:
        raise PermissionDenied("this benchmark has no key edition")
    return edition


@require_GET
@requires(can_view_candidate, VIEWERS_ONLY)
def candidate_index(request: HttpRequest) -> HttpResponse:
    """List the benchmarks with their candidate panels, or go straight to the only one."""
    benchmarks = list(Benchmark.objects.order_by("name"))
    if len(benchmarks) == 1:
        return redirect("scoring:candidate", benchmark=benchmarks[0].name)
    items = [
        {"name": b.name, "url": reverse("scoring:candidate", args=[b.name])} for b in benchmarks
    ]
    return render(
        request,
        "scoring/board/benchmark_index.html",
        {"benchmarks": items, "page_title": "Candidate panel"},
    )


def _rows(preview: dict[str, Any]) -> list[dict[str, Any]]:
    """The side-by-side table: one row per model, published then candidate figures."""
    pub = {m["model_id"]: m for m in preview["published"]["leaderboard"]["models"]}
    cand = {m["model_id"]: m for m in preview["candidate"]["leaderboard"]["models"]}
    rows = []
    for move in preview["comparison"]["models"]:
        mid = move["model_id"]
        rank_move = move["rank_move"]
        rows.append(
            {
                **move,
                "published": pub.get(mid),
                "candidate": cand.get(mid),
                "moved": mid in preview["models_moved"],
                "arrow": "" if not rank_move else "▲" if rank_move > 0 else "▼",
                "places": abs(rank_move or 0),
            }
        )
    return rows


@require_GET
@requires(can_view_candidate, VIEWERS_ONLY)
def candidate_page(request: HttpRequest, benchmark: str) -> HttpResponse:
    """Show the candidate panel beside the judge panel for one key edition (editors and
    admins), with the admin's forms: define, re-score (estimate and budget), adopt."""
    bench = get_object_or_404(Benchmark, name=benchmark)
    edition = _edition(bench, request.GET.get("edition"))
    preview = candidate_preview(edition)
    judges = list(Judge.objects.filter(benchmark=bench, role=Judge.Role.JUDGE).order_by("judge_id"))
    ctx = {
        "benchmark": bench,
        "edition": edition,
        "editions": KeyEdition.objects.filter(benchmark=bench).order_by("created_at", "id"),
        "preview": preview,
        "rows": _rows(preview) if preview else [],
        "panel": panel_state(bench),
        "candidate": candidate_state(bench),
        "judges": judges,
        "spec": ",".join(f"{m['judge']}@{m['prompt_version']}" for m in candidate_state(bench))
        or ",".join(f"{j.judge_id}@{j.prompt_version}" for j in judges if j.active),
        "can_manage": can_manage_runs(request.user),
        "api_url": reverse("scoring:api-candidate", args=[bench.name]) + f"?edition={edition.name}",
    }
    return render(request, "scoring/board/candidate.html", ctx)


@require_POST
@requires(can_manage_runs, ADMINS_ONLY)
def candidate_action(request: HttpRequest, benchmark: str) -> HttpResponse:
    """Do one admin action on the candidate panel (`action`: set, clear, rescore, adopt);
    each is audit-logged by its service; back to the page with a message."""
    bench = get_object_or_404(Benchmark, name=benchmark)
    edition = _edition(bench, request.POST.get("edition"))
    action = request.POST.get("action", "")
    back = reverse("scoring:candidate", args=[bench.name]) + f"?edition={edition.name}"
    try:
        if action == "set":
            members = parse_panel_spec(request.POST.get("spec", ""))
            candidate_set(benchmark=bench, members=members, actor=request.user)
            messages.success(request, "Candidate panel set. No published figure has changed.")
        elif action == "clear":
            candidate_clear(benchmark=bench, actor=request.user)
            messages.success(request, "Candidate panel discarded.")
        elif action == "rescore":
            run = candidate_rescore(
                edition=edition,
                user=request.user,
                budget_cost=request.POST.get("budget_cost", "").strip() or None,
                budget_tokens=request.POST.get("budget_tokens", "").strip() or None,
            )
            messages.success(
                request,
                f"Run {run.pk} grades for the candidate: {run.needed} "
                f"pair{pluralize(run.needed)} to grade, {run.reused} reused.",
            )
            return done(request, reverse("scoring:run-detail", args=[run.pk]))
        elif action == "adopt":
            after = candidate_adopt(benchmark=bench, actor=request.user)
            names = ", ".join(f"{m['judge']}@{m['prompt_version']}" for m in after)
            messages.success(
                request,
                f"Adopted: the judge panel is now {names}. The leaderboard, report and public "
                "site use it; the change is in the audit log.",
            )
        else:
            messages.error(request, f"Unknown action {action!r}.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return done(request, back)


class CandidateApi(APIView):
    """GET the candidate panel beside the judge panel (`scoring.board.candidate.candidate_preview`)
    for `?edition=NAME` (default: the latest published); editors and admins only; 404 when
    the benchmark has no candidate panel."""

    permission_classes = [CanViewCandidate]

    @extend_schema(
        operation_id="scoring_candidate",
        summary="The candidate panel's board beside the judge panel's, and what adopting it changes.",
        parameters=[
            OpenApiParameter(
                "edition", str, description="Key edition name (default: latest published)"
            )
        ],
        responses={200: OpenApiTypes.OBJECT, 404: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, benchmark: str) -> Response:
        bench = Benchmark.objects.filter(name=benchmark).first()
        if bench is None:
            raise NotFound(f"no benchmark named {benchmark!r}")
        name = request.query_params.get("edition")
        edition = (
            KeyEdition.objects.filter(benchmark=bench, name=name).first()
            if name
            else latest_published_edition(bench)
        )
        if edition is None:
            raise NotFound(f"no key edition {name!r}" if name else "no published key edition")
        preview = candidate_preview(edition)
        if preview is None:
            raise NotFound(f"benchmark {bench.name!r} has no candidate panel")
        return Response(preview)
