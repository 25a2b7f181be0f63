"""The review API (DRF): queue and items, claims, checks, proposals, decisions, editions, log.

Thin: serializers validate, services write, review.permissions decides (the same functions
as the pages). Domain errors map to HTTP: NotAllowedError 403, ConflictError 409 (with
`current_version` and `changes`), InvalidTransitionError 409, InvalidInputError 400,
NotFoundError 404.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework import permissions as drf_permissions
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from core.models import AuditLogEntry
from questions.models import Benchmark, KeyEdition, Question
from review import permissions, services
from review.errors import (
    ConflictError,
    DomainError,
    InvalidInputError,
    InvalidTransitionError,
    NotAllowedError,
    NotFoundError,
)
from review.filters import AuditLogFilter, QueueFilters
from review.models import Proposal, ReviewItem
from review.selectors import queue_items
from review.serializers import (
    AuditLogEntrySerializer,
    BulkApprovalResultSerializer,
    BulkApprovalSerializer,
    CitationCheckInputSerializer,
    CitationCheckSerializer,
    ConflictSerializer,
    DecisionSerializer,
    KeyEditionDetailSerializer,
    KeyEditionSerializer,
    NextSerializer,
    ProposalInputSerializer,
    ProposalSerializer,
    ReassignSerializer,
    ReportProblemSerializer,
    ReviewItemDetailSerializer,
    ReviewItemSerializer,
    VersionSerializer,
)


def domain_response(exc: DomainError) -> Response:
    """Translate a review domain error into an API response."""
    if isinstance(exc, NotAllowedError):
        return Response({"detail": str(exc)}, status=status.HTTP_403_FORBIDDEN)
    if isinstance(exc, ConflictError):
        return Response(
            {"detail": str(exc), "current_version": exc.current_version, "changes": exc.changes},
            status=status.HTTP_409_CONFLICT,
        )
    if isinstance(exc, InvalidInputError):
        return Response({"detail": str(exc), "errors": exc.errors}, status=400)
    if isinstance(exc, InvalidTransitionError):
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, NotFoundError):
        return Response({"detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
    return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)


def _question_of(data: dict) -> tuple[Question | None, dict | None]:
    """Return (question, None) or (None, field errors) for {"benchmark"?, "question_id"}."""
    benchmarks = Benchmark.objects.all()
    name = data.get("benchmark") or ""
    if name:
        benchmarks = benchmarks.filter(name=name)
    found = list(benchmarks.values_list("pk", "name")[:2])
    if not found:
        return None, {"benchmark": [f"No benchmark named {name!r}."]}
    if len(found) > 1:
        return None, {"benchmark": ["Several benchmarks exist: name one."]}
    question = Question.objects.filter(
        benchmark_id=found[0][0], question_id=data["question_id"]
    ).first()
    if question is None:
        return None, {
            "question_id": [f"No question {data['question_id']!r} in benchmark {found[0][1]!r}."]
        }
    return question, None


def _role(check, name: str):
    class RolePermission(drf_permissions.BasePermission):
        message = f"Your role does not allow this ({name})."

        def has_permission(self, request, view):
            return bool(check(request.user))

    RolePermission.__name__ = f"Can{name.title().replace('_', '')}"
    return RolePermission


CanViewQueue = _role(permissions.can_view_queue, "view_queue")
CanDecide = _role(permissions.can_decide, "decide")
CanViewEditions = _role(permissions.can_view_editions, "view_editions")
CanViewLog = _role(permissions.can_view_log, "view_log")

CONFLICT = OpenApiResponse(ConflictSerializer, description="Stale version or illegal transition")


class ReviewItemViewSet(viewsets.ReadOnlyModelViewSet):
    """The review queue: items by priority; claim, release, renew, reassign, checks, proposals."""

    permission_classes = [drf_permissions.IsAuthenticated, CanViewQueue]

    def filter_queryset(self, queryset):
        """Filter the list as the queue page does (review.filters.QueueFilters); 400 on a
        value outside the choices."""
        if self.action != "list":
            return queryset
        filters = QueueFilters.from_params(self.request.query_params)
        problems = filters.problems()
        if problems:
            raise ValidationError(problems)
        return queue_items(filters, user=self.request.user)

    @extend_schema(
        parameters=[
            OpenApiParameter(name, str, required=False)
            for name in QueueFilters.__dataclass_fields__
        ],
        description=QueueFilters.__doc__,
    )
    def list(self, request: Request, *args, **kwargs) -> Response:
        return super().list(request, *args, **kwargs)

    def get_queryset(self):
        qs = ReviewItem.objects.select_related(
            "benchmark", "question", "question__category", "claimed_by"
        ).order_by("-priority", "id")
        if self.action == "retrieve":
            qs = qs.prefetch_related(
                "evidence",
                "checks__reviewer",
                Prefetch(
                    "proposals",
                    queryset=Proposal.objects.select_related(
                        "author",
                        "decided_by",
                        "base_entry__edition",
                        "item__question",
                        "item__benchmark",
                    ),
                ),
            )
        return qs

    def get_serializer_class(self):
        return ReviewItemDetailSerializer if self.action == "retrieve" else ReviewItemSerializer

    @extend_schema(
        request=ReportProblemSerializer,
        responses={201: ReviewItemDetailSerializer, 200: ReviewItemDetailSerializer},
    )
    def create(self, request: Request) -> Response:
        """Raise an item by hand (source `manual`; a reviewer): 201 new, 200 note added.

        `benchmark` may be left out when only one exists; 400 names an unknown question.
        """
        data = ReportProblemSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        question, problem = _question_of(data.validated_data)
        if problem:
            return Response(problem, status=status.HTTP_400_BAD_REQUEST)
        try:
            item, created = services.review_item_report(
                question=question, note=data.validated_data["note"], user=request.user
            )
        except DomainError as exc:
            return domain_response(exc)
        item = self.get_queryset().prefetch_related("evidence").get(pk=item.pk)
        return Response(
            ReviewItemDetailSerializer(item, context={"request": request}).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    def _item(self, pk) -> ReviewItem:
        return get_object_or_404(ReviewItem, pk=pk)

    def _done(self, item: ReviewItem, code=status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=item.pk)
        return Response(ReviewItemSerializer(fresh).data, status=code)

    @extend_schema(request=None, responses={200: ReviewItemSerializer, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def claim(self, request: Request, pk=None) -> Response:
        """Claim this item (exactly one of two concurrent claims wins; the other gets 409)."""
        try:
            item = services.review_item_claim(item=self._item(pk), user=request.user)
        except DomainError as exc:
            return domain_response(exc)
        return self._done(item)

    @extend_schema(
        request=NextSerializer,
        responses={200: ReviewItemSerializer, 204: OpenApiResponse(description="Queue empty")},
    )
    @action(detail=False, methods=["post"])
    def next(self, request: Request) -> Response:
        """Claim the highest-priority claimable item (optionally of a benchmark and source)."""
        data = NextSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        from questions.models import Benchmark

        benchmark = None
        if data.validated_data.get("benchmark"):
            benchmark = get_object_or_404(Benchmark, name=data.validated_data["benchmark"])
        try:
            item = services.review_item_claim_next(
                user=request.user, benchmark=benchmark, source=data.validated_data.get("source", "")
            )
        except DomainError as exc:
            return domain_response(exc)
        if item is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return self._done(item)

    @extend_schema(request=VersionSerializer, responses={200: ReviewItemSerializer, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk=None) -> Response:
        data = VersionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            item = services.review_item_release(
                item=self._item(pk), user=request.user, version=data.validated_data.get("version")
            )
        except DomainError as exc:
            return domain_response(exc)
        return self._done(item)

    @extend_schema(request=None, responses={200: ReviewItemSerializer})
    @action(detail=True, methods=["post"])
    def renew(self, request: Request, pk=None) -> Response:
        try:
            item = services.review_item_renew(item=self._item(pk), user=request.user)
        except DomainError as exc:
            return domain_response(exc)
        return self._done(item)

    @extend_schema(request=ReassignSerializer, responses={200: ReviewItemSerializer, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def reassign(self, request: Request, pk=None) -> Response:
        data = ReassignSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        assignee = (
            get_user_model()
            .objects.filter(username=data.validated_data["assignee"], is_active=True)
            .first()
        )
        try:
            if not permissions.can_reassign(request.user):
                raise NotAllowedError("only an editor may reassign review items")
            if assignee is None:
                raise InvalidInputError({"assignee": ["No such active user."]})
            item = services.review_item_reassign(
                item=self._item(pk),
                user=request.user,
                assignee=assignee,
                version=data.validated_data.get("version"),
            )
        except DomainError as exc:
            return domain_response(exc)
        return self._done(item)

    @extend_schema(
        request=CitationCheckInputSerializer,
        responses={201: CitationCheckSerializer, 409: CONFLICT},
    )
    @action(detail=True, methods=["post"])
    def checks(self, request: Request, pk=None) -> Response:
        """Record a citation check (the claim holder; `version` must be current)."""
        data = CitationCheckInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            check = services.citation_check_record(
                item=self._item(pk), user=request.user, **data.validated_data
            )
        except DomainError as exc:
            return domain_response(exc)
        return Response(CitationCheckSerializer(check).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=ProposalInputSerializer, responses={201: ProposalSerializer, 409: CONFLICT}
    )
    @action(detail=True, methods=["post"])
    def proposals(self, request: Request, pk=None) -> Response:
        """Propose an outcome: confirm, correct or remove (the claim holder)."""
        data = ProposalInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            proposal = services.proposal_create(
                item=self._item(pk), user=request.user, **data.validated_data
            )
        except DomainError as exc:
            return domain_response(exc)
        proposal = Proposal.objects.select_related(
            "author", "item__question", "item__benchmark", "base_entry__edition"
        ).get(pk=proposal.pk)
        return Response(ProposalSerializer(proposal).data, status=status.HTTP_201_CREATED)


class ProposalViewSet(viewsets.ReadOnlyModelViewSet):
    """Proposals and the editor's decisions (approve / reject; never one's own)."""

    serializer_class = ProposalSerializer
    permission_classes = [drf_permissions.IsAuthenticated, CanViewQueue]
    filterset_fields = ["status", "action"]

    def get_queryset(self):
        return Proposal.objects.select_related(
            "author", "decided_by", "item__question", "item__benchmark", "base_entry__edition"
        ).order_by("-created_at", "-id")

    def _decide(self, request, pk, approve: bool) -> Response:
        if not permissions.can_decide(request.user):
            return domain_response(NotAllowedError("only an editor may decide proposals"))
        data = DecisionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        proposal = get_object_or_404(Proposal, pk=pk)
        try:
            fn = services.proposal_approve if approve else services.proposal_reject
            fn(proposal=proposal, user=request.user, comment=data.validated_data["comment"])
        except DomainError as exc:
            return domain_response(exc)
        return Response(self.get_serializer(self.get_queryset().get(pk=pk)).data)

    @extend_schema(request=DecisionSerializer, responses={200: ProposalSerializer, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk=None) -> Response:
        """Approve (an editor other than the author: four-eyes)."""
        return self._decide(request, pk, approve=True)

    @extend_schema(request=BulkApprovalSerializer, responses={200: BulkApprovalResultSerializer})
    @action(detail=False, methods=["post"], url_path="bulk-approve", url_name="bulk-approve")
    def bulk_approve(self, request: Request) -> Response:
        """Approve several proposals with one comment; four-eyes and version per proposal.

        200 with {"approved": [proposals], "refused": [{"id", "question_id", "code",
        "reason"}], "summary"}: each is approved on its own (services.proposals_approve).
        """
        if not permissions.can_decide(request.user):
            return domain_response(NotAllowedError("only an editor may decide proposals"))
        data = BulkApprovalSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = services.proposals_approve(
            user=request.user,
            decisions=[(d["id"], d["version"]) for d in data.validated_data["proposals"]],
            comment=data.validated_data["comment"],
        )
        approved = self.get_queryset().filter(pk__in=[p.pk for p in result.approved])
        by_pk = {p.pk: p for p in approved}
        result.approved = [by_pk[p.pk] for p in result.approved]
        return Response(BulkApprovalResultSerializer(result).data)

    @extend_schema(request=DecisionSerializer, responses={200: ProposalSerializer, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk=None) -> Response:
        """Reject with a comment; the item goes back to its reviewer."""
        return self._decide(request, pk, approve=False)


class KeyEditionViewSet(viewsets.ReadOnlyModelViewSet):
    """Key editions with their changes from the parent; publish a draft (editor)."""

    permission_classes = [drf_permissions.IsAuthenticated, CanViewEditions]
    filterset_fields = ["status"]

    def get_queryset(self):
        qs = KeyEdition.objects.select_related("benchmark", "parent", "published_by").order_by(
            "benchmark__name", "created_at", "id"
        )
        if self.request.query_params.get("benchmark"):
            qs = qs.filter(benchmark__name=self.request.query_params["benchmark"])
        return qs

    def get_serializer_class(self):
        return KeyEditionDetailSerializer if self.action == "retrieve" else KeyEditionSerializer

    @extend_schema(request=None, responses={200: KeyEditionSerializer, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def publish(self, request: Request, pk=None) -> Response:
        """Publish the draft: it becomes immutable; re-scoring is requested after commit."""
        edition = get_object_or_404(KeyEdition, pk=pk)
        try:
            services.key_edition_publish(edition=edition, user=request.user)
        except DomainError as exc:
            return domain_response(exc)
        return Response(KeyEditionSerializer(self.get_queryset().get(pk=pk)).data)


class AuditLogViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """The append-only audit log (admins)."""

    serializer_class = AuditLogEntrySerializer
    permission_classes = [drf_permissions.IsAuthenticated, CanViewLog]
    filterset_class = AuditLogFilter
    queryset = AuditLogEntry.objects.order_by("-created_at", "-id")
