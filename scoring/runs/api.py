"""Runs API (admins): list, detail and create re-scoring / key-audit runs; cancel; resume.

Serializers validate input; services write. Same permission rule as the pages.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from questions.errors import DomainError
from scoring.models import Judge, ScoringRun
from scoring.runs import selectors as runs_selectors
from scoring.runs import services
from scoring.runs.permissions import CanManageRuns
from scoring.runs.views import runs_queryset


class LedgerSerializer(serializers.Serializer):
    calls = serializers.IntegerField()
    ok = serializers.IntegerField()
    retries = serializers.IntegerField(
        help_text="Live calls that found the judge unavailable and were asked again."
    )
    batch_no_reply = serializers.IntegerField(
        help_text="Requests a vendor batch brought no reply for (expired, cancelled, errored, "
        "or the batch failed): not billed."
    )
    batch_not_sent_again = serializers.IntegerField(
        help_text="Of batch_no_reply, those not sent again because the run was cancelled."
    )
    failed = serializers.IntegerField()
    in_flight_at_kill = serializers.IntegerField()
    in_flight = serializers.IntegerField()
    paid_twice = serializers.IntegerField()
    edition_paid_twice = serializers.IntegerField()
    repeated = serializers.IntegerField()


class JudgeCostSerializer(serializers.Serializer):
    judge = serializers.CharField()
    currency = serializers.CharField(help_text="The currency of the judge's prices.")
    calls = serializers.IntegerField(help_text="Paid calls: answered (their reply recorded).")
    outcome_unknown = serializers.IntegerField(
        help_text="Calls sent whose outcome is unknown (in flight, or in flight at a kill): "
        "not counted as paid."
    )
    unknown_usage = serializers.IntegerField(help_text="Billed calls that reported no usage.")
    input_tokens = serializers.IntegerField(allow_null=True, help_text="null: unknown")
    cached_tokens = serializers.IntegerField(allow_null=True, help_text="null: unknown")
    output_tokens = serializers.IntegerField(allow_null=True, help_text="null: unknown")
    cost = serializers.CharField(
        allow_null=True, help_text="Decimal string; null when a needed price is empty."
    )


class CostSerializer(serializers.Serializer):
    judges = JudgeCostSerializer(many=True)
    calls = serializers.IntegerField()
    outcome_unknown = serializers.IntegerField()
    unknown_usage = serializers.IntegerField()
    input_tokens = serializers.IntegerField(allow_null=True, help_text="null: unknown")
    cached_tokens = serializers.IntegerField(allow_null=True, help_text="null: unknown")
    output_tokens = serializers.IntegerField(allow_null=True, help_text="null: unknown")
    cost = serializers.CharField(allow_null=True)
    currency = serializers.CharField()
    notes = serializers.ListField(child=serializers.CharField())


class RunCostsSerializer(serializers.Serializer):
    run = CostSerializer()
    edition = CostSerializer()
    paid_twice = CostSerializer()
    edition_paid_twice = CostSerializer()


class RunSerializer(serializers.ModelSerializer):
    """A run with the cli.md counters: needed, done, graded, reused, failed, unparsed."""

    benchmark = serializers.SlugRelatedField(slug_field="name", read_only=True)
    edition = serializers.SlugRelatedField(slug_field="name", read_only=True)
    judges = serializers.SlugRelatedField(slug_field="judge_id", many=True, read_only=True)
    progress = serializers.FloatField(read_only=True)

    class Meta:
        model = ScoringRun
        fields = [
            "id",
            "benchmark",
            "edition",
            "kind",
            "mode",
            "status",
            "judges",
            "needed",
            "done",
            "graded",
            "reused",
            "failed",
            "unparsed",
            "progress",
            "error",
            "budget_cost",
            "budget_currency",
            "budget_tokens",
            "on_complete",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class JudgeBatchSerializer(serializers.Serializer):
    """One vendor batch of a batch-mode run (scoring.models.JudgeBatch)."""

    id = serializers.IntegerField()
    judge = serializers.CharField(source="judge.judge_id")
    vendor = serializers.CharField()
    vendor_batch_id = serializers.CharField()
    status = serializers.CharField()
    vendor_status = serializers.CharField()
    requests = serializers.IntegerField()
    counts = serializers.DictField(child=serializers.IntegerField())
    submitted_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True)
    detail = serializers.CharField()


class RunDetailSerializer(RunSerializer):
    ledger = serializers.SerializerMethodField()
    costs = serializers.SerializerMethodField()
    batches = serializers.SerializerMethodField()

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "ledger", "costs", "batches"]
        read_only_fields = fields

    @extend_schema_field(JudgeBatchSerializer(many=True))
    def get_batches(self, run: ScoringRun) -> list:
        return JudgeBatchSerializer(runs_selectors.run_batches(run), many=True).data

    @extend_schema(responses=LedgerSerializer)
    def get_ledger(self, run: ScoringRun) -> dict:
        return runs_selectors.ledger_summary(run)

    @extend_schema_field(RunCostsSerializer)
    def get_costs(self, run: ScoringRun) -> dict:
        return runs_selectors.run_costs(run)


class RunCreateSerializer(serializers.Serializer):
    """Input of a new run: benchmark and edition names, kind, mode (live | batch: through
    the vendors' batch APIs), optional judge ids."""

    benchmark = serializers.CharField(required=False, allow_blank=True)
    edition = serializers.CharField(required=False, allow_blank=True)
    kind = serializers.ChoiceField(choices=ScoringRun.Kind.choices, default=ScoringRun.Kind.GRADE)
    mode = serializers.ChoiceField(choices=ScoringRun.Mode.choices, default=ScoringRun.Mode.LIVE)
    judges = serializers.ListField(child=serializers.CharField(), required=False)
    budget_cost = serializers.CharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        help_text="Cost cap in the judges' price currency (decimal string); none: no cap.",
    )
    budget_tokens = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, help_text="Cap on input + output tokens."
    )

    def validate(self, attrs: dict) -> dict:
        from questions.selectors import get_benchmark, get_edition

        try:
            benchmark = get_benchmark(attrs.get("benchmark") or None)
            edition = get_edition(benchmark, attrs.get("edition") or None)
        except DomainError as exc:
            raise serializers.ValidationError(str(exc)) from exc
        role = Judge.Role.AUDITOR if attrs["kind"] == ScoringRun.Kind.AUDIT else Judge.Role.JUDGE
        wanted = attrs.get("judges")
        if wanted:
            found = {
                j.judge_id: j
                for j in Judge.objects.filter(benchmark=benchmark, judge_id__in=wanted)
            }
            missing = [w for w in wanted if w not in found]
            if missing:
                raise serializers.ValidationError(
                    {"judges": f"unknown judge(s): {', '.join(missing)}"}
                )
            judges = [found[w] for w in wanted]
        else:
            judges, _ = services.active_graders(edition, role=role)
        attrs["edition_obj"], attrs["judge_objs"] = edition, judges
        return attrs


class RunListCreate(generics.ListAPIView):
    """List runs (newest first), or start one (POST)."""

    permission_classes = [CanManageRuns]
    serializer_class = RunSerializer

    def get_queryset(self):
        return runs_queryset()

    @extend_schema(request=RunCreateSerializer, responses={201: RunSerializer})
    def post(self, request, *args, **kwargs):
        data = RunCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            run = services.scoring_run_create(
                edition=data.validated_data["edition_obj"],
                judges=data.validated_data["judge_objs"],
                kind=data.validated_data["kind"],
                mode=data.validated_data["mode"],
                user=request.user,
                budget_cost=data.validated_data.get("budget_cost"),
                budget_tokens=data.validated_data.get("budget_tokens"),
            )
        except DomainError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        run.refresh_from_db()
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)


class JudgeEstimateSerializer(serializers.Serializer):
    judge = serializers.CharField()
    pairs = serializers.IntegerField()
    calls = serializers.IntegerField()
    tokens_in = serializers.IntegerField(help_text="Input tokens, cached ones included.")
    tokens_cached = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost_live = serializers.CharField(allow_null=True, help_text="null: a price is empty.")
    cost_batch = serializers.CharField(allow_null=True, help_text="null: a price is empty.")
    currency = serializers.CharField()
    basis = serializers.CharField(help_text="How the tokens were estimated, in words.")


class RunEstimateSerializer(serializers.Serializer):
    needed = serializers.IntegerField()
    calls = serializers.IntegerField()
    tokens_in = serializers.IntegerField()
    tokens_cached = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost_live = serializers.CharField(allow_null=True)
    cost_batch = serializers.CharField(allow_null=True)
    currency = serializers.CharField()
    judges = JudgeEstimateSerializer(many=True)
    notes = serializers.ListField(child=serializers.CharField())


class RunEstimate(APIView):
    """What a run would send and cost (scoring.runs.estimate), before it is started: GET with
    benchmark, edition, kind and judges (comma-separated ids) as for POST runs/. Creates
    nothing and calls no judge."""

    permission_classes = [CanManageRuns]

    @extend_schema(request=None, responses={200: RunEstimateSerializer})
    def get(self, request):
        from scoring.runs.estimate import estimate_run

        query = request.query_params
        data = {k: query[k] for k in ("benchmark", "edition", "kind") if query.get(k)}
        if query.get("judges"):
            data["judges"] = [j.strip() for j in query["judges"].split(",") if j.strip()]
        params = RunCreateSerializer(data=data)
        params.is_valid(raise_exception=True)
        estimate = estimate_run(
            edition=params.validated_data["edition_obj"],
            judges=params.validated_data["judge_objs"],
            kind=params.validated_data["kind"],
        )
        return Response(estimate.as_json())


class RunDetail(generics.RetrieveAPIView):
    """One run with its judge-call ledger summary."""

    permission_classes = [CanManageRuns]
    serializer_class = RunDetailSerializer

    def get_queryset(self):
        return runs_queryset()


class _RunAction(APIView):
    permission_classes = [CanManageRuns]
    run_action = staticmethod(services.scoring_run_cancel)

    @extend_schema(request=None, responses={200: RunSerializer})
    def post(self, request, pk: int):
        run = get_object_or_404(ScoringRun, pk=pk)
        try:
            type(self).run_action(run=run, user=request.user)
        except DomainError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        run.refresh_from_db()
        return Response(RunSerializer(run).data)


class RunCancel(_RunAction):
    """Cancel an active run."""

    run_action = staticmethod(services.scoring_run_cancel)


class RunResumeSerializer(serializers.Serializer):
    budget_cost = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    budget_tokens = serializers.IntegerField(required=False, allow_null=True, min_value=0)


class RunResume(APIView):
    """Send an unfinished run's pending pairs again; a run stopped at its budget too, with
    budget_cost / budget_tokens raised (409 with the reason when it would stop at once)."""

    permission_classes = [CanManageRuns]

    @extend_schema(request=RunResumeSerializer, responses={200: RunSerializer})
    def post(self, request, pk: int):
        run = get_object_or_404(ScoringRun, pk=pk)
        data = RunResumeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            run = services.scoring_run_resume(run=run, user=request.user, **data.validated_data)
        except DomainError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        run.refresh_from_db()
        return Response(RunSerializer(run).data)
