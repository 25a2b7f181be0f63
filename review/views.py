"""Review pages (htmx): thin views — access check, service, redirect or partial.

Domain errors become HTTP: NotAllowedError 403, ConflictError 409 (with what changed),
InvalidInputError 422 (the form again, errors next to fields). htmx requests get the
form fragment; review.js lets htmx swap 409/422 responses.
"""

from __future__ import annotations

import functools
from functools import wraps

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.template.backends.utils import csrf_input
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST

from core.actions import Action
from core.htmx import vary_on_htmx, wants_fragment
from core.views import done, forbidden, requires
from questions.models import Benchmark, Question
from review import page_cache, permissions, queue_rows, selectors, services
from review.cited_passages import proposal_passages
from review.errors import (
    ConflictError,
    DomainError,
    HeldElsewhereError,
    InvalidInputError,
    InvalidTransitionError,
    NotAllowedError,
)
from review.filters import AuditLogFilter, QueueFilters
from review.forms import (
    CitationCheckForm,
    DecidePanelForm,
    DecisionForm,
    OutcomeForm,
    ReassignForm,
    ReportProblemForm,
    add_service_errors,
)
from review.impact import attach_proposal_impacts, open_drafts
from review.model_rows import model_row_values, model_rows
from review.models import Proposal, ReaderReport, ReviewItem, Source
from review.view_helpers import query_without_page

PAGE_SIZE = 50


def _conflict(request: HttpRequest, exc: ConflictError, item: ReviewItem) -> HttpResponse:
    return render(
        request,
        "review/_conflict.html" if wants_fragment(request) else "review/error.html",
        {"title": "This item changed", "message": str(exc), "conflict": exc, "item": item},
        status=409,
    )


def _item_url(item) -> str:
    return reverse("review:item", args=[item.pk])


# ------------------------------------------------------------------ queue


# Stands for the request's CSRF field in a cached queue table; "<" is escaped in any
# rendered value, so no row's text can hold it.
_CSRF_MARK = "<csrf-field-of-this-request>"


def _queue_table(rows: list[dict], csrf_field: str) -> str:
    """The queue's table of `rows` (review.queue_rows), rendered once per set of row values
    (review.page_cache.rendered) and given this request's CSRF field."""
    html = page_cache.rendered(
        "queue-table",
        rows,
        lambda: render_to_string(
            "review/_queue_table.html", {"rows": rows, "csrf_field": mark_safe(_CSRF_MARK)}
        ),
    )
    return mark_safe(html.replace(_CSRF_MARK, csrf_field))  # noqa: S308 (our own template)


def _queue_filters(filters: QueueFilters, choices: dict) -> str:
    """The queue's filter form for `filters` and `choices` (selectors.filter_choices),
    rendered once per set of both (review.page_cache.rendered): the same for every user."""
    context = {
        "filters": filters,
        "choices": choices,
        "statuses": ReviewItem.Status.choices,
        "sources": Source.choices,
    }
    if filters.q:  # free text: one fragment per search would only fill the cache
        return mark_safe(render_to_string("review/_queue_filters.html", context))  # noqa: S308
    labels = [(v, str(label)) for v, label in (*context["statuses"], *context["sources"])]
    values = (sorted(filters.__dict__.items()), choices, labels)
    html = page_cache.rendered(
        "queue-filters", values, lambda: render_to_string("review/_queue_filters.html", context)
    )
    return mark_safe(html)  # noqa: S308 (our own template, its values escaped)


@require_GET
@requires(permissions.can_view_queue)
def queue(request: HttpRequest) -> HttpResponse:
    """List review items by priority with filters, counts per status and pagination."""
    filters = QueueFilters.from_params(request.GET)
    counts = selectors.status_counts(filters, user=request.user)
    qs = queue_rows.queue_row_values(selectors.queue_items(filters, user=request.user))
    paginator = Paginator(qs, PAGE_SIZE)
    # the counts query already told: no COUNT(*) of its own
    paginator.count = queue_rows.page_count_from_status_counts(filters, counts)
    page = paginator.get_page(request.GET.get("page"))
    can_claim = permissions.can_claim(request.user)
    values = queue_rows.page_values(filters, page)
    rows = queue_rows.queue_rows(values, now=selectors.now(), can_claim=can_claim)
    # one CSRF field for every row's Claim form, not a {% csrf_token %} per row
    csrf_field = csrf_input(request)
    context = {
        "filters": filters,
        "page": page,
        "rows": rows,
        "table": _queue_table(rows, csrf_field),
        "counts": counts,
        "statuses": ReviewItem.Status.choices,
        "sources": Source.choices,
        "query": query_without_page(request),
        "can_claim": can_claim,
        "csrf_field": csrf_field,
    }
    if wants_fragment(request):
        return vary_on_htmx(render(request, "review/_queue_results.html", context))
    context["filters_form"] = _queue_filters(filters, selectors.filter_choices())
    return vary_on_htmx(render(request, "review/queue.html", context))


@require_POST
@requires(permissions.can_claim)
def queue_next(request: HttpRequest) -> HttpResponse:
    """Claim the highest-priority claimable item (of the filtered benchmark/source) and open it."""
    benchmark = None
    if request.POST.get("benchmark"):
        benchmark = Benchmark.objects.filter(name=request.POST["benchmark"]).first()
    item = services.review_item_claim_next(
        user=request.user, benchmark=benchmark, source=request.POST.get("source", "")
    )
    if item is None:
        messages.info(request, "Nothing left to claim in the queue.")
        return done(request, reverse("review:queue"))
    messages.success(request, f"You claimed {item.question.question_id}.")
    return done(request, _item_url(item))


# ------------------------------------------------------------------ the review page


def _models_table(item: ReviewItem, key: page_cache.KeyPart) -> dict:
    """The models' responses and grades for item.html, built only when its cached fragment
    is missing: `models_key` digests every value the fragments show (responses, grades, the
    panel, the scale, the editions' names), so a changed grade or response is a new key; the
    other names are callables the template calls on a miss only (two queries on a hit)."""
    values = model_row_values(item.question, key.entry)
    judges_and_panel = key.judges_and_panel
    bench = item.benchmark
    models_key = values.digest(
        judges_and_panel,
        bench.grade_min,
        bench.grade_scale,
        key.edition.name if key.edition else "",
        key.entry.edition.name if key.entry else "",
    )
    built = functools.cache(
        lambda: model_rows(
            item.question, key.entry, bench, judges_and_panel=judges_and_panel, values=values
        )
    )

    def rows():
        return built()[1]

    return {
        "models_key": models_key,
        "judges": lambda: built()[0],
        "rows": rows,
        "n_against": lambda: sum(1 for r in rows() if r.agreed == bench.grade_min),
        "n_agreed": lambda: sum(1 for r in rows() if r.agreed is not None),
        "flagged_rows": lambda: [r for r in rows() if r.flags],
    }


def _lazy(build):
    """Return `build` memoised: a template calls a callable context value when it first
    resolves it (every later lookup gets the same object), a page that never shows it
    never builds it."""
    return functools.cache(build)


def _contradictions() -> dict:
    """{reason: {field, answer, text}}: the decision panel's warnings (review.js)."""
    return {
        reason: {
            "field": field,
            "answer": answer,
            "text": services.check_contradictions(reason, {field: answer})[0],
        }
        for reason, (field, answer, _words) in services.CONTRADICTIONS.items()
    }


def _item_context(request: HttpRequest, item: ReviewItem, **forms) -> dict:
    # the key entry, its passages and the panel: kept between requests (review.page_cache)
    key = page_cache.key_part(item.question, item.benchmark)
    edition, entry = key.edition, key.entry
    models = _models_table(item, key)
    prev_id, next_id = selectors.neighbour_item_ids(item)
    user = request.user
    holds = permissions.holds_claim(user, item)
    pending = next((p for p in item.proposals.all() if p.is_pending()), None)
    # A rejected proposal sends the item back to its reviewer: say so at the top while the
    # item is still open or claimed and nothing newer is pending.
    latest = max(item.proposals.all(), key=lambda p: (p.created_at, p.pk), default=None)
    rejected = (
        latest
        if latest is not None
        and latest.status == Proposal.Status.REJECTED
        and pending is None
        and item.status in (ReviewItem.Status.OPEN, ReviewItem.Status.CLAIMED)
        else None
    )

    def outcome_initial() -> dict:
        initial = {"version": item.version}
        if entry is not None:
            initial.update(
                answer=entry.answer,
                citation_doc_id=entry.citation_doc_id,
                citation_locator=entry.citation_locator,
                citation_quote=entry.citation_quote,
            )
        return initial

    return {
        "item": item,
        "question": item.question,
        "edition": edition,
        "entry": entry,
        "exclusion": getattr(entry, "exclusion", None),  # read with the entry
        "passage": key.passage,
        "successor": key.successor,
        "verdicts": selectors.audit_verdicts(entry),
        **models,
        "prev_id": prev_id,
        "next_id": next_id,
        "holds": holds,
        "can_claim": permissions.can_claim(user, item) and not holds,
        "can_release": permissions.can_release(user, item),
        "can_reassign": permissions.can_reassign(user)
        and item.status in (ReviewItem.Status.OPEN, ReviewItem.Status.CLAIMED),
        "pending": pending,
        "rejected": rejected,
        # The forms and the decision panel's data are built when the template first asks
        # for them (_lazy): a reviewer who does not hold the item sees no form but the
        # claim box's, and building three unused forms cost about a tenth of the page.
        "check_form": forms.get("check_form")
        or _lazy(lambda: CitationCheckForm(initial={"version": item.version})),
        "outcome_form": forms.get("outcome_form")
        or _lazy(lambda: OutcomeForm(initial=outcome_initial())),
        "decide_form": forms.get("decide_form")
        or _lazy(lambda: DecidePanelForm(initial={**outcome_initial(), "advance": True})),
        "reassign_form": _lazy(lambda: ReassignForm(initial={"version": item.version})),
        # what a confirmation would go against before any check (the panel asks why)
        "standing": _lazy(lambda: services.standing_evidence(item, None)),
        "overrides": [p for p in item.proposals.all() if p.override_reason],
        # the panel warns before saving a reason its own check contradicts (review.js)
        "contradictions": _lazy(_contradictions),
        "assignees": _lazy(
            lambda: selectors.reviewer_usernames() if permissions.can_reassign(user) else []
        ),
        "history": selectors.item_history(item),
        "checks": list(item.checks.all()),
        "now": selectors.now(),
        "can_mark_spam": permissions.can_mark_spam(user),
        "can_see_reporter_email": permissions.can_see_reporter_email(user),
    }


def _get_item(item_id: int) -> ReviewItem:
    try:
        return selectors.item_detail(item_id)
    except ReviewItem.DoesNotExist:
        raise Http404("No such review item") from None


@require_GET
@requires(permissions.can_view_queue)
def item_detail(request: HttpRequest, item_id: int) -> HttpResponse:
    """Show everything needed to decide on one review item."""
    item = _get_item(item_id)
    return render(request, "review/item.html", _item_context(request, item))


def _safe_next(request: HttpRequest) -> str:
    """Return the POSTed `next` when it stays on this site, else "" (no open redirect)."""
    target = request.POST.get("next", "")
    allowed = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return target if allowed else ""


def _item_action(action):
    """Run a claim-type action from a plain form; domain errors become messages or 403/409."""

    @wraps(action)
    def view(request: HttpRequest, item_id: int) -> HttpResponse:
        item = _get_item(item_id)
        try:
            message = action(request, item)
        except HeldElsewhereError as exc:
            return forbidden(request, str(exc), status=409)
        except NotAllowedError as exc:
            return forbidden(request, str(exc))
        except ConflictError as exc:
            return _conflict(request, exc, item)
        except InvalidInputError as exc:
            messages.error(request, str(exc))
        except InvalidTransitionError as exc:
            messages.error(request, str(exc))
        else:
            if message:
                messages.success(request, message)
        return done(request, _safe_next(request) or _item_url(item))

    return require_POST(requires(permissions.can_view_queue)(view))


@_item_action
def item_claim(request, item):
    services.review_item_claim(item=item, user=request.user)
    return f"You claimed {item.question.question_id}."


@_item_action
def item_release(request, item):
    services.review_item_release(item=item, user=request.user, version=request.POST.get("version"))
    return f"{item.question.question_id} is back in the queue."


@_item_action
def item_renew(request, item):
    services.review_item_renew(item=item, user=request.user)
    return "Your claim was renewed."


@_item_action
def item_reassign(request, item):
    form = ReassignForm(request.POST)
    if not form.is_valid():
        raise InvalidInputError({k: [str(e) for e in v] for k, v in form.errors.items()})
    User = get_user_model()
    assignee = User.objects.filter(username=form.cleaned_data["assignee"], is_active=True).first()
    if assignee is None:
        raise InvalidInputError(
            {"assignee": [f"No active user {form.cleaned_data['assignee']!r}."]}
        )
    services.review_item_reassign(
        item=item, user=request.user, assignee=assignee, version=form.cleaned_data["version"]
    )
    return f"{item.question.question_id} is now with {assignee.get_username()}."


def _form_post(request, item_id, form_class, template, form_key, run):
    """Validate, call the service; on errors return the form (fragment for htmx) with 422."""
    item = _get_item(item_id)
    form = form_class(request.POST)
    try:
        if form.is_valid():
            message = run(item, form.cleaned_data)
            messages.success(request, message)
            return done(request, _item_url(item))
    except HeldElsewhereError as exc:
        return forbidden(request, str(exc), status=409)
    except NotAllowedError as exc:
        return forbidden(request, str(exc))
    except ConflictError as exc:
        return _conflict(request, exc, item)
    except InvalidInputError as exc:
        add_service_errors(form, exc.errors)
    except InvalidTransitionError as exc:
        form.add_error(None, str(exc))
    context = _item_context(request, item, **{form_key: form})
    status = 422
    if wants_fragment(request):
        context["form"] = form
        return vary_on_htmx(render(request, template, context, status=status))
    return vary_on_htmx(render(request, "review/item.html", context, status=status))


@require_POST
@requires(permissions.can_view_queue)
def item_check(request: HttpRequest, item_id: int) -> HttpResponse:
    def run(item, data):
        services.citation_check_record(item=item, user=request.user, **data)
        return "Citation check recorded."

    return _form_post(
        request, item_id, CitationCheckForm, "review/_check_form.html", "check_form", run
    )


@require_POST
@requires(permissions.can_view_queue)
def item_propose(request: HttpRequest, item_id: int) -> HttpResponse:
    def run(item, data):
        proposal = services.proposal_create(item=item, user=request.user, **data)
        if not proposal.is_pending():
            return "Key confirmed: the item is closed (a confirmation needs no approval)."
        return f"{proposal.get_action_display()} sent for an editor's approval."

    return _form_post(
        request, item_id, OutcomeForm, "review/_outcome_form.html", "outcome_form", run
    )


@require_POST
@requires(permissions.can_view_queue)
def item_decide(request: HttpRequest, item_id: int) -> HttpResponse:
    """The decision panel's one submit: check and outcome together, then the next item.

    Success: 303 (an htmx client redirect) to the next claimable item of the benchmark,
    claimed for the user, when `advance` is ticked and one is left; else back to this item.
    A refused form comes back (fragment for htmx) with 422 and the errors by their fields.
    """
    item = _get_item(item_id)
    form = DecidePanelForm(request.POST)
    try:
        if form.is_valid():
            _check, proposal = services.item_decide(
                item=item,
                user=request.user,
                version=form.cleaned_data["version"],
                check=form.check_data(),
                outcome=form.outcome_data(),
            )
            qid = item.question.question_id
            if proposal.is_pending():
                messages.success(
                    request,
                    f"{qid}: check recorded; {proposal.get_action_display().lower()} "
                    "sent for an editor's approval.",
                )
            else:
                messages.success(request, f"{qid}: check recorded; the key is confirmed.")
            if form.cleaned_data["advance"]:
                nxt = services.review_item_claim_next(user=request.user, benchmark=item.benchmark)
                if nxt is None:
                    messages.info(request, "Nothing left to claim in the queue.")
                    return done(request, reverse("review:queue"))
                return done(request, _item_url(nxt))
            return done(request, _item_url(item))
    except HeldElsewhereError as exc:
        return _refused_panel(request, item, form, str(exc), status=409)
    except NotAllowedError as exc:
        return _refused_panel(request, item, form, str(exc), status=403)
    except ConflictError as exc:
        return _refused_panel(request, item, form, str(exc), status=409, conflict=exc)
    except InvalidInputError as exc:
        add_service_errors(form, exc.errors)
    except InvalidTransitionError as exc:
        form.add_error(None, str(exc))
    context = _item_context(request, item, decide_form=form)
    if wants_fragment(request):
        return vary_on_htmx(render(request, "review/_decision_panel.html", context, status=422))
    return vary_on_htmx(render(request, "review/item.html", context, status=422))


def _refused_panel(
    request: HttpRequest,
    item: ReviewItem,
    form: DecidePanelForm,
    message: str,
    *,
    status: int,
    conflict: ConflictError | None = None,
) -> HttpResponse:
    """A save refused because the item changed hands or moved on (403/409, issue 18 item 5).

    The panel comes back with what was typed, disabled (nothing can be sent from the stale
    form), and the reason with a link to reload the item; for htmx only the panel is
    swapped, otherwise the whole page is shown.
    """
    item = _get_item(item.pk)  # as it is now
    context = _item_context(request, item, decide_form=form)
    context["refused"] = {"message": message, "conflict": conflict}
    template = "review/_decision_panel.html" if wants_fragment(request) else "review/item.html"
    return vary_on_htmx(render(request, template, context, status=status))


# ------------------------------------------------------------------ approvals


@require_GET
@requires(permissions.can_decide)
def approvals(request: HttpRequest) -> HttpResponse:
    """List pending proposals with old vs new answer and citation."""
    benchmark = request.GET.get("benchmark", "")
    proposals = list(selectors.pending_proposals(benchmark))
    evidence = selectors.proposals_evidence(proposals)
    passages = proposal_passages(proposals)
    for p in proposals:
        p.can_decide = permissions.can_approve(request.user, p)
        p.evidence = evidence[p.pk]
        p.passages = passages[p.pk]
        checks = p.evidence.checks or [None]
        p.contradictions = services.check_contradictions(p.reason, checks[0])
    attach_proposal_impacts(proposals)
    return render(
        request,
        "review/approvals.html",
        {
            "proposals": proposals,
            "benchmark": benchmark,
            "form": DecisionForm(),
            "drafts": open_drafts(benchmark),
        },
    )


def _decide(request: HttpRequest, proposal_id: int, approve: bool) -> HttpResponse:
    proposal = get_object_or_404(Proposal, pk=proposal_id)
    form = DecisionForm(request.POST)
    form.is_valid()
    comment = form.cleaned_data.get("comment", "")
    try:
        if approve:
            services.proposal_approve(proposal=proposal, user=request.user, comment=comment)
            messages.success(request, "Proposal approved.")
        else:
            services.proposal_reject(proposal=proposal, user=request.user, comment=comment)
            messages.success(request, "Proposal rejected: the item is back with its reviewer.")
    except NotAllowedError as exc:
        return forbidden(request, str(exc))
    except InvalidInputError as exc:
        messages.error(request, str(exc))
    except DomainError as exc:
        messages.error(request, str(exc))
    return done(request, reverse("review:approvals"))


@require_POST
@requires(permissions.can_decide)
def proposal_approve(request: HttpRequest, proposal_id: int) -> HttpResponse:
    return _decide(request, proposal_id, approve=True)


@require_POST
@requires(permissions.can_decide)
def proposal_reject(request: HttpRequest, proposal_id: int) -> HttpResponse:
    return _decide(request, proposal_id, approve=False)


# ------------------------------------------------------------------ key editions


# ------------------------------------------------------------------ audit log


@requires(permissions.can_report_problem)
def report_problem(request: HttpRequest, benchmark: str) -> HttpResponse:
    """ "Report a problem": raise a review item by hand with a note (GET the form, POST it).

    ?question=ID fills the question id (the key page's rows link here with it).
    """
    if request.method not in ("GET", "POST"):
        return HttpResponse(status=405, headers={"Allow": "GET, POST"})
    bench = get_object_or_404(Benchmark, name=benchmark)
    if request.method == "GET":
        form = ReportProblemForm(initial={"question_id": request.GET.get("question", "")})
    else:
        form = ReportProblemForm(request.POST)
        if form.is_valid():
            qid = form.cleaned_data["question_id"].strip()
            question = Question.objects.filter(benchmark=bench, question_id=qid).first()
            if question is None:
                form.add_error("question_id", f"No question {qid} in {bench.name}.")
            else:
                try:
                    item, created = services.review_item_report(
                        question=question, note=form.cleaned_data["note"], user=request.user
                    )
                except InvalidInputError as exc:
                    for field, errors in exc.errors.items():
                        form.add_error(field if field in form.fields else None, errors)
                else:
                    messages.success(
                        request,
                        f"{qid} is in the review queue"
                        + ("." if created else ": your note was added to its open item."),
                    )
                    return done(request, _item_url(item))
    status = 422 if request.method == "POST" else 200  # the form again, errors by the fields
    return vary_on_htmx(
        render(
            request,
            "review/report_problem.html",
            {"benchmark": bench, "form": form},
            status=status,
        )
    )


@require_GET
@requires(permissions.can_view_log)
def log(request: HttpRequest) -> HttpResponse:
    """The audit log, newest first, filterable by actor, action, target and date."""
    log_filter = AuditLogFilter(request.GET)
    page = Paginator(log_filter.qs, 100).get_page(request.GET.get("page"))
    bad_dates = [
        f"{label} {request.GET.get(name)!r}"
        for name, label in (("date_from", "From"), ("date_to", "To"))
        if name in log_filter.errors
    ]
    bad_action = request.GET.get("action") if "action" in log_filter.errors else None
    return render(
        request,
        "review/log.html",
        {
            "page": page,
            "params": request.GET,
            "bad_dates": bad_dates,
            "bad_action": bad_action,
            "actions": Action.choices,
            "query": query_without_page(request),
        },
    )


@require_GET
def scorecard(request: HttpRequest, benchmark: str) -> HttpResponse:
    """Show the detector scorecard (review.scorecard); a partial for htmx, public like the report."""
    from review.scorecard import detector_scorecard

    bench = get_object_or_404(Benchmark, name=benchmark)
    ctx = {"benchmark": bench, "card": detector_scorecard(bench)}
    template = "review/_scorecard.html" if wants_fragment(request) else "review/scorecard.html"
    return vary_on_htmx(render(request, template, ctx))


@require_POST
@requires(permissions.can_mark_spam)
def reader_report_spam(request: HttpRequest, report_id: int) -> HttpResponse:
    """Mark a reader's report (issue 22) as spam, then back to its item."""
    report = get_object_or_404(ReaderReport.objects.select_related("item"), pk=report_id)
    try:
        services.reader_report_mark_spam(report=report, user=request.user)
    except InvalidTransitionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Report {report.pk} is marked as spam.")
    return done(request, _item_url(report.item))
