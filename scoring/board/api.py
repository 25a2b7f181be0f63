"""Scoring API: leaderboard, agreement and methodology report of a key edition.

Read-only endpoints under /api/scoring/<benchmark>/...; the documents are the same JSON
as the `leaderboard`, `agreement` and `report` commands (cli.md). Query parameters are
validated by serializers; response serializers describe the shapes for the OpenAPI
schema (drf-spectacular), which is generated, never hand-written. Authentication: any
signed-in user (session or token); anonymous requests get 401/403.
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from questions.errors import DomainError, NotFoundError
from questions.models import Benchmark
from questions.selectors import get_edition
from scoring.board.human import human_figures
from scoring.board.report import build_report
from scoring.selectors import BANDINGS, board_for_edition, load_edition_grades


# ----------------------------------------------------------------------------- input
class LeaderboardQuery(serializers.Serializer):
    edition = serializers.CharField(
        required=False, help_text="Key edition (default: latest published)."
    )
    band_gap = serializers.FloatField(required=False, min_value=0, max_value=100)
    bootstrap = serializers.IntegerField(required=False, min_value=0, max_value=10_000)
    seed = serializers.IntegerField(required=False, min_value=0)
    banding = serializers.ChoiceField(choices=BANDINGS, required=False, default="gap")
    judges = serializers.CharField(required=False, help_text="Comma-separated judge ids.")


class AgreementQuery(serializers.Serializer):
    edition = serializers.CharField(required=False)
    judges = serializers.CharField(required=False)


class ReportQuery(serializers.Serializer):
    edition = serializers.CharField(required=False)
    compare = serializers.CharField(required=False, help_text="Comparison key edition.")
    judges = serializers.CharField(required=False)


# ----------------------------------------------------------------------------- output
class CategoryScoreSerializer(serializers.Serializer):
    category = serializers.CharField(allow_null=True)
    score = serializers.FloatField(allow_null=True, help_text="Percent 0-100.")
    n_counted = serializers.IntegerField()
    n_excluded_disagreement = serializers.IntegerField()
    n_unparsed = serializers.IntegerField()
    n_missing_grade = serializers.IntegerField()


class ModelScoreSerializer(serializers.Serializer):
    model_id = serializers.CharField()
    score = serializers.FloatField(allow_null=True, help_text="Percent 0-100.")
    n_counted = serializers.IntegerField()
    n_excluded_disagreement = serializers.IntegerField()
    n_unparsed = serializers.IntegerField()
    n_missing_grade = serializers.IntegerField()
    ci_low = serializers.FloatField(allow_null=True, help_text="95% interval, percent.")
    ci_high = serializers.FloatField(allow_null=True)
    ci_method = serializers.CharField(allow_null=True, help_text="bootstrap or wilson.")
    band = serializers.IntegerField(allow_null=True, help_text="1 is the best band.")
    rank = serializers.CharField(allow_null=True, help_text='"=N" for ties.')
    rank_number = serializers.IntegerField(allow_null=True)
    agreement_rate = serializers.FloatField(allow_null=True, help_text="Fraction 0-1.")
    categories = CategoryScoreSerializer(many=True)


class MissingByQuestionSerializer(serializers.Serializer):
    question_id = serializers.CharField()
    n_missing_grade = serializers.IntegerField()


class PanelMemberSerializer(serializers.Serializer):
    judge = serializers.CharField()
    prompt_version = serializers.CharField()


JUDGE_SET_HELP = (
    "panel: the benchmark's judge panel (the published figures); requested: other judges "
    "asked for with `judges`; active: no panel is set, every active judge."
)


class LeaderboardSerializer(serializers.Serializer):
    benchmark = serializers.CharField()
    edition = serializers.CharField()
    judges = serializers.ListField(child=serializers.CharField())
    panel = PanelMemberSerializer(many=True, help_text="The judges the figures are for.")
    judge_set = serializers.ChoiceField(
        choices=["panel", "requested", "active"], help_text=JUDGE_SET_HELP
    )
    band_gap = serializers.FloatField(help_text="Percentage points.")
    banding = serializers.ChoiceField(choices=BANDINGS)
    agreement_rate = serializers.FloatField(allow_null=True, help_text="Fraction 0-1.")
    n_bands = serializers.IntegerField()
    n_bootstrap = serializers.IntegerField()
    seed = serializers.IntegerField(allow_null=True)
    questions_total = serializers.IntegerField()
    questions_scored = serializers.IntegerField()
    excluded_by_audit = serializers.IntegerField()
    removed_by_review = serializers.IntegerField()
    responses_total = serializers.IntegerField(required=False)
    responses_counted = serializers.IntegerField(required=False)
    responses_excluded_disagreement = serializers.IntegerField(required=False)
    responses_unparsed = serializers.IntegerField(required=False)
    responses_missing_grade = serializers.IntegerField(
        help_text="Responses of scored questions lacking a grade from a judge of the set."
    )
    complete = serializers.BooleanField(help_text="False when responses_missing_grade > 0.")
    missing_grade_by_question = MissingByQuestionSerializer(many=True)
    notes = serializers.ListField(child=serializers.CharField())
    stale = serializers.BooleanField(
        help_text="True while the edition's newest re-scoring run owes grades these figures "
        "count (unfinished, or failed, cancelled or stopped at its budget with such pairs "
        "still lacking a grade); never true beside complete."
    )
    stale_reason = serializers.CharField(allow_null=True, help_text="Why, when stale.")
    stale_run_status = serializers.CharField(
        allow_null=True, help_text="The status of the run that owes the grades, when stale."
    )
    figures_state = serializers.ChoiceField(
        choices=["complete", "re-scoring", "incomplete"],
        help_text="The one state of the figures: complete, being re-scored, or incomplete.",
    )
    figures_state_words = serializers.CharField(help_text="That state in a sentence.")
    models = ModelScoreSerializer(many=True)


class ModelAgreementSerializer(serializers.Serializer):
    model_id = serializers.CharField()
    n = serializers.IntegerField()
    n_missing = serializers.IntegerField()
    exact_agreement = serializers.FloatField(allow_null=True)
    cohen_kappa = serializers.FloatField(allow_null=True)
    cohen_kappa_quadratic = serializers.FloatField(allow_null=True)
    krippendorff_alpha_ordinal = serializers.FloatField(allow_null=True)
    confusion = serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()))
    notes = serializers.ListField(child=serializers.CharField())


class PairAgreementSerializer(serializers.Serializer):
    judges = serializers.ListField(child=serializers.CharField(), min_length=2, max_length=2)
    per_model = ModelAgreementSerializer(
        many=True, help_text="The same statistics over each model's responses alone."
    )
    n = serializers.IntegerField(help_text="Responses with a grade from both judges.")
    n_missing = serializers.IntegerField(help_text="Responses dropped: a grade null or missing.")
    exact_agreement = serializers.FloatField(allow_null=True)
    cohen_kappa = serializers.FloatField(allow_null=True)
    cohen_kappa_quadratic = serializers.FloatField(allow_null=True)
    krippendorff_alpha_ordinal = serializers.FloatField(allow_null=True)
    confusion = serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()))
    notes = serializers.ListField(child=serializers.CharField())


class AgreementSerializer(serializers.Serializer):
    benchmark = serializers.CharField()
    edition = serializers.CharField()
    judges = serializers.ListField(child=serializers.CharField())
    panel = PanelMemberSerializer(many=True, help_text="The judges the figures are for.")
    judge_set = serializers.ChoiceField(
        choices=["panel", "requested", "active"], help_text=JUDGE_SET_HELP
    )
    scale = serializers.ListField(child=serializers.IntegerField(), required=False)
    pairs = PairAgreementSerializer(many=True)
    notes = serializers.ListField(child=serializers.CharField())


class GradeChangeSerializer(serializers.Serializer):
    question_id = serializers.CharField()
    up = serializers.IntegerField()
    down = serializers.IntegerField()
    same = serializers.IntegerField()
    not_comparable = serializers.IntegerField()
    newly_counted = serializers.IntegerField()
    no_longer_counted = serializers.IntegerField()
    neither_counted = serializers.IntegerField()
    reason = serializers.CharField(required=False)
    re_graded = serializers.BooleanField(
        help_text="False when responses lack a grade against the corrected entry: the "
        "counts are then not a finding."
    )
    n_missing_grade = serializers.IntegerField()


class ProvenanceSerializer(serializers.Serializer):
    edition = serializers.CharField()
    judges = serializers.ListField(child=serializers.CharField(), required=False)
    auditors = serializers.ListField(child=serializers.CharField(), required=False)
    data = serializers.CharField()


class ReportSerializer(serializers.Serializer):
    benchmark = serializers.CharField()
    edition = serializers.CharField()
    compare_edition = serializers.CharField(allow_null=True)
    judges = serializers.ListField(child=serializers.CharField())
    panel = PanelMemberSerializer(many=True, help_text="The judges the figures are for.")
    judge_set = serializers.ChoiceField(
        choices=["panel", "requested", "active"], help_text=JUDGE_SET_HELP
    )
    auditors = serializers.ListField(child=serializers.CharField())
    questions_total = serializers.IntegerField()
    questions_scored = serializers.IntegerField()
    excluded_by_audit = serializers.IntegerField()
    removed_by_review = serializers.IntegerField()
    corrected = serializers.IntegerField()
    single_auditor_flags = serializers.IntegerField()
    judge_flagged = serializers.IntegerField()
    judge_flags_standing = serializers.IntegerField()
    auditor_agreement_rate = serializers.FloatField(allow_null=True)
    responses_total = serializers.IntegerField()
    responses_counted = serializers.IntegerField()
    responses_excluded_disagreement = serializers.IntegerField()
    responses_unparsed = serializers.IntegerField()
    responses_missing_grade = serializers.IntegerField()
    complete = serializers.BooleanField()
    missing_grade_by_question = MissingByQuestionSerializer(many=True)
    agreement_rate = serializers.FloatField(allow_null=True)
    n_models = serializers.IntegerField()
    n_bands = serializers.IntegerField()
    top3_unchanged = serializers.BooleanField(allow_null=True)
    bottom5_unchanged = serializers.BooleanField(allow_null=True)
    kendall_tau = serializers.FloatField(allow_null=True)
    grade_changes = GradeChangeSerializer(many=True)
    provenance = serializers.DictField(child=ProvenanceSerializer())
    judge_diagnostics = serializers.ListField(
        child=serializers.DictField(),
        help_text="Per judge: length_grade {n, spearman, ci_low, ci_high, cannot_compute} "
        "and own_vendor {vendor, own_vendor_models, n_own, n_other, own_vendor_difference, "
        "other_vendor_difference, excess, cannot_compute}.",
    )
    notes = serializers.ListField(child=serializers.CharField())


# ----------------------------------------------------------------------------- views
BENCHMARK_PARAM = OpenApiParameter(
    "benchmark", str, OpenApiParameter.PATH, description="Benchmark name (bundle manifest)."
)


def _judges(value: str | None) -> list[str] | None:
    return [j for j in (value or "").split(",") if j] or None


def _edition(benchmark_name: str, edition_name: str | None):
    try:
        benchmark = Benchmark.objects.get(name=benchmark_name)
    except Benchmark.DoesNotExist:
        raise NotFound(f"no benchmark named {benchmark_name!r}") from None
    try:
        return get_edition(benchmark, edition_name)
    except NotFoundError as exc:
        raise NotFound(str(exc)) from exc


def _query(serializer_class, request: Request) -> dict:
    query = serializer_class(data=request.query_params)
    query.is_valid(raise_exception=True)
    return query.validated_data


class LeaderboardApi(APIView):
    @extend_schema(
        operation_id="scoring_leaderboard",
        summary="Leaderboard of a key edition: scores, 95% intervals, ranks and bands.",
        parameters=[BENCHMARK_PARAM, LeaderboardQuery],
        responses={200: LeaderboardSerializer},
    )
    def get(self, request: Request, benchmark: str) -> Response:
        q = _query(LeaderboardQuery, request)
        edition = _edition(benchmark, q.get("edition"))
        try:
            result = board_for_edition(
                edition,
                judge_ids=_judges(q.get("judges")),
                band_gap=q.get("band_gap", settings.SNAGLIST_BAND_GAP),
                n_bootstrap=q.get("bootstrap"),
                seed=q.get("seed"),
                banding=q["banding"],
            )
        except DomainError as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        from scoring.board.views import leaderboard_doc

        return Response(leaderboard_doc(result, edition))


class AgreementApi(APIView):
    @extend_schema(
        operation_id="scoring_agreement",
        summary="Inter-rater statistics per judge pair for a key edition.",
        parameters=[BENCHMARK_PARAM, AgreementQuery],
        responses={200: AgreementSerializer},
    )
    def get(self, request: Request, benchmark: str) -> Response:
        q = _query(AgreementQuery, request)
        edition = _edition(benchmark, q.get("edition"))
        try:
            result = board_for_edition(edition, judge_ids=_judges(q.get("judges")))
            doc = result.agreement_dict()
            # Judges against people (issue 31 item 2), as `agreement --format json`.
            data = load_edition_grades(edition, judge_ids=_judges(q.get("judges")))
            doc["human_agreement"] = human_figures(edition, data)
        except DomainError as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        return Response(doc)


class ReportApi(APIView):
    @extend_schema(
        operation_id="scoring_report",
        summary="The methodology report of a key edition, optionally against another.",
        parameters=[BENCHMARK_PARAM, ReportQuery],
        responses={200: ReportSerializer},
    )
    def get(self, request: Request, benchmark: str) -> Response:
        q = _query(ReportQuery, request)
        edition = _edition(benchmark, q.get("edition"))
        compare = _edition(benchmark, q["compare"]) if q.get("compare") else None
        try:
            doc = build_report(edition, compare=compare, judge_ids=_judges(q.get("judges")))
        except DomainError as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        return Response(doc)
