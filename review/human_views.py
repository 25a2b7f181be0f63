"""The blind grading pages (issue 31 item 2): people grade sampled responses on the judges'
scale without seeing any judge's grade.

One screen per response, as the review item page: the question, the key answer and its
cited passage, the model's response, and a grade with an optional note; keyboard first
(static/js/human.js and the data-key shortcuts of static/js/snaglist.js). What the page
never shows: a judge's grade, rationale or flag, the stratum the response was drawn
from (it would say whether the judges disagreed), or another person's grade. The writes
are scoring.board.human's services.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.roles import Role, has_role
from core.views import requires
from judges.prompts import describe_scale
from questions.errors import DomainError, NotFoundError
from questions.models import Benchmark
from review import permissions, selectors
from review.cited_passages import successor_passage
from scoring.board.human import (
    DEFAULT_SIZE,
    get_item,
    human_grade_record,
    human_sample_draw,
    next_item,
    sample_progress,
)
from scoring.human_models import HumanGrade, HumanSample


def _sample(pk: int) -> HumanSample:
    return get_object_or_404(HumanSample.objects.select_related("benchmark", "edition"), pk=pk)


@require_GET
@requires(permissions.can_view_queue)
def human_index(request: HttpRequest) -> HttpResponse:
    """List the samples with their progress; editors also see the form to draw one."""
    samples = HumanSample.objects.select_related("benchmark", "edition").order_by(
        "benchmark__name", "-created_at"
    )
    rows = [{"sample": s, **sample_progress(s, request.user)} for s in samples]
    return render(
        request,
        "review/human_index.html",
        {
            "rows": rows,
            "benchmarks": Benchmark.objects.order_by("name"),
            "can_draw": has_role(request.user, Role.EDITOR),
            "default_size": DEFAULT_SIZE,
        },
    )


@require_POST
@requires(permissions.can_decide)
def human_sample_create(request: HttpRequest) -> HttpResponse:
    """Draw a sample (editors): benchmark, size, seed from the form; errors as messages."""
    benchmark = Benchmark.objects.filter(name=request.POST.get("benchmark", "")).first()
    if benchmark is None:
        messages.error(request, "Choose a benchmark to draw the sample from.")
        return redirect("review:human-index")
    try:
        size = int(request.POST.get("size") or DEFAULT_SIZE)
        seed = int(request.POST.get("seed") or 0)
        share = float(request.POST.get("disagree_share") or 0.5)
    except ValueError:
        messages.error(request, "Size and seed must be whole numbers, the share a fraction.")
        return redirect("review:human-index")
    try:
        sample = human_sample_draw(
            benchmark, actor=request.user, size=size, seed=seed, disagree_share=share
        )
    except (DomainError, ValueError) as exc:
        messages.error(request, str(exc))
        return redirect("review:human-index")
    messages.success(request, f"Drew sample {sample.name}: {sample.size} responses to grade blind.")
    return redirect("review:human-index")


@require_GET
@requires(permissions.can_view_queue)
def human_next(request: HttpRequest, sample_id: int) -> HttpResponse:
    """Go to the first response of the sample this person has not graded."""
    sample = _sample(sample_id)
    item = next_item(sample, request.user)
    if item is None:
        messages.success(request, f"You have graded every response of sample {sample.name}.")
        return redirect("review:human-index")
    return redirect("review:human-grade", sample_id=sample.pk, position=item.position)


@require_http_methods(["GET", "POST"])
@requires(permissions.can_view_queue)
def human_grade(request: HttpRequest, sample_id: int, position: int) -> HttpResponse:
    """Show one sampled response blind (GET) or record this person's grade of it (POST)."""
    sample = _sample(sample_id)
    try:
        item = get_item(sample, position)
    except NotFoundError as exc:
        raise Http404(str(exc)) from exc
    scale = list(sample.benchmark.grade_scale or [0, 1, 2])
    mine = HumanGrade.objects.filter(item=item, reviewer=request.user).first()
    error = ""
    if request.method == "POST":
        try:
            grade = int(request.POST.get("grade", ""))
            human_grade_record(
                item, reviewer=request.user, grade=grade, note=request.POST.get("note", "").strip()
            )
        except ValueError:
            error = f"Choose a grade: one of {', '.join(str(g) for g in scale)}."
        except DomainError as exc:
            error = str(exc)
        else:
            return redirect("review:human-next", sample_id=sample.pk)
    entry = item.key_entry
    ctx = {
        "sample": sample,
        "item": item,
        "question": item.response.question,
        "response": item.response,
        "entry": entry,
        "edition": entry.edition,
        "passage": selectors.passage_for_entry(entry),
        "successor": successor_passage(entry),
        "scale": scale,
        # The scale's meaning in the judges' own words (the prompt's $scale_meaning).
        "scale_meaning": describe_scale(scale).strip(),
        "mine": mine,
        "error": error,
        "progress": sample_progress(sample, request.user),
        "prev_url": _neighbour(sample, position - 1),
        "next_url": _neighbour(sample, position + 1),
        "page_kind": "human",
    }
    return render(request, "review/human_grade.html", ctx, status=422 if error else 200)


def _neighbour(sample: HumanSample, position: int) -> str:
    if 1 <= position <= sample.size:
        return reverse("review:human-grade", kwargs={"sample_id": sample.pk, "position": position})
    return ""
