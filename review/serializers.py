"""DRF serializers of the review API: output shapes, and input validation (services write)."""

from __future__ import annotations

from rest_framework import serializers

from core.models import AuditLogEntry
from questions.models import KeyEdition, KeyEntry
from review.models import CitationCheck, Evidence, Proposal, ReviewItem


class EvidenceSerializer(serializers.ModelSerializer):
    class Meta:
        model = Evidence
        fields = ["id", "kind", "detail", "created_at"]


class CitationCheckSerializer(serializers.ModelSerializer):
    reviewer = serializers.CharField(source="reviewer.username", read_only=True)

    class Meta:
        model = CitationCheck
        fields = [
            "id",
            "reviewer",
            "locator_exists",
            "supports",
            "edition_in_force",
            "amended",
            "note",
            "source_url",
            "created_at",
        ]


class KeyEntrySerializer(serializers.ModelSerializer):
    edition = serializers.CharField(source="edition.name", read_only=True)

    class Meta:
        model = KeyEntry
        fields = [
            "id",
            "edition",
            "answer",
            "citation_doc_id",
            "citation_locator",
            "citation_quote",
            "has_citation",
            "removed",
            "reason",
            "note",
        ]


class ProposalSerializer(serializers.ModelSerializer):
    author = serializers.CharField(source="author.username", read_only=True)
    decided_by = serializers.CharField(source="decided_by.username", read_only=True, default=None)
    question_id = serializers.CharField(source="item.question.question_id", read_only=True)
    benchmark = serializers.CharField(source="item.benchmark.name", read_only=True)
    base_entry = KeyEntrySerializer(read_only=True)

    class Meta:
        model = Proposal
        fields = [
            "id",
            "item",
            "benchmark",
            "question_id",
            "author",
            "action",
            "answer",
            "citation_doc_id",
            "citation_locator",
            "citation_quote",
            "reason",
            "note",
            "status",
            "decided_by",
            "decided_at",
            "decision_comment",
            "key_entry",
            "base_entry",
            "created_at",
        ]


class ReviewItemSerializer(serializers.ModelSerializer):
    benchmark = serializers.CharField(source="benchmark.name", read_only=True)
    question_id = serializers.CharField(source="question.question_id", read_only=True)
    question_text = serializers.CharField(source="question.text", read_only=True)
    category = serializers.CharField(source="question.category.category_id", default=None)
    claimed_by = serializers.CharField(source="claimed_by.username", default=None, read_only=True)

    class Meta:
        model = ReviewItem
        fields = [
            "id",
            "benchmark",
            "question_id",
            "question_text",
            "category",
            "source",
            "sources",
            "priority",
            "reasons",
            "status",
            "claimed_by",
            "claimed_at",
            "claim_expires_at",
            "version",
            "created_at",
            "updated_at",
            "closed_at",
        ]


class ReviewItemDetailSerializer(ReviewItemSerializer):
    evidence = EvidenceSerializer(many=True, read_only=True)
    checks = CitationCheckSerializer(many=True, read_only=True)
    proposals = ProposalSerializer(many=True, read_only=True)

    class Meta(ReviewItemSerializer.Meta):
        fields = [*ReviewItemSerializer.Meta.fields, "evidence", "checks", "proposals"]


class VersionSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=1, required=False, allow_null=True)


class ReassignSerializer(VersionSerializer):
    assignee = serializers.CharField(max_length=150)


class NextSerializer(serializers.Serializer):
    benchmark = serializers.CharField(required=False, allow_blank=True)
    source = serializers.CharField(required=False, allow_blank=True)


class CitationCheckInputSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=1)
    locator_exists = serializers.ChoiceField(choices=CitationCheck.YesNo.choices)
    supports = serializers.ChoiceField(choices=CitationCheck.Supports.choices)
    edition_in_force = serializers.ChoiceField(choices=CitationCheck.InForce.choices)
    amended = serializers.ChoiceField(choices=CitationCheck.Amended.choices)
    note = serializers.CharField(required=False, allow_blank=True, default="")
    source_url = serializers.URLField(required=False, allow_blank=True, default="")


class ProposalInputSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=1)
    action = serializers.ChoiceField(choices=Proposal.Action.choices)
    reason = serializers.ChoiceField(
        choices=KeyEntry.Reason.choices, required=False, allow_blank=True, default=""
    )
    answer = serializers.CharField(required=False, allow_blank=True, default="")
    citation_doc_id = serializers.CharField(required=False, allow_blank=True, default="")
    citation_locator = serializers.CharField(required=False, allow_blank=True, default="")
    citation_quote = serializers.CharField(required=False, allow_blank=True, default="")
    note = serializers.CharField(required=False, allow_blank=True, default="")
    override_reason = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="One line: why a confirmation stands over evidence against the key.",
    )


class DecisionSerializer(serializers.Serializer):
    comment = serializers.CharField(required=False, allow_blank=True, default="")


class BulkApprovalItemSerializer(serializers.Serializer):
    id = serializers.IntegerField(min_value=1)
    version = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None)


class BulkApprovalSerializer(serializers.Serializer):
    """Several proposals to approve with one comment: [{"id", "version"?}] (issue 18)."""

    proposals = BulkApprovalItemSerializer(many=True, allow_empty=False, max_length=500)
    comment = serializers.CharField(required=False, allow_blank=True, default="")


class RefusalSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="proposal_id")
    question_id = serializers.CharField(source="label")
    code = serializers.CharField()
    reason = serializers.CharField()


class BulkApprovalResultSerializer(serializers.Serializer):
    approved = ProposalSerializer(many=True)
    refused = RefusalSerializer(many=True)
    summary = serializers.CharField()


class KeyEditionSerializer(serializers.ModelSerializer):
    benchmark = serializers.CharField(source="benchmark.name", read_only=True)
    parent = serializers.CharField(source="parent.name", default=None, read_only=True)
    published_by = serializers.CharField(
        source="published_by.username", default=None, read_only=True
    )

    class Meta:
        model = KeyEdition
        fields = [
            "id",
            "benchmark",
            "name",
            "parent",
            "status",
            "note",
            "created_at",
            "published_at",
            "published_by",
        ]


class EditionChangeSerializer(serializers.Serializer):
    question_id = serializers.CharField(source="question.question_id")
    old = KeyEntrySerializer(allow_null=True)
    new = KeyEntrySerializer()
    proposed_by = serializers.CharField(source="proposal.author.username", default=None)
    approved_by = serializers.CharField(source="proposal.decided_by.username", default=None)


class KeyEditionDetailSerializer(KeyEditionSerializer):
    changes = serializers.SerializerMethodField()

    class Meta(KeyEditionSerializer.Meta):
        fields = [*KeyEditionSerializer.Meta.fields, "changes"]

    def get_changes(self, edition) -> list[dict]:
        from review.selectors import edition_changes

        if edition.parent_id is None:
            return []
        return EditionChangeSerializer(edition_changes(edition), many=True).data


class AuditLogEntrySerializer(serializers.ModelSerializer):
    action_label = serializers.CharField(read_only=True, help_text="core.actions.Action label.")

    class Meta:
        model = AuditLogEntry
        fields = [
            "id",
            "actor_label",
            "action",
            "action_label",
            "target_type",
            "target_id",
            "target_label",
            "benchmark_name",
            "before",
            "after",
            "created_at",
        ]


class ConflictSerializer(serializers.Serializer):
    detail = serializers.CharField()
    current_version = serializers.IntegerField()
    changes = serializers.ListField(child=serializers.DictField())


class ReportProblemSerializer(serializers.Serializer):
    """Raise a review item by hand: the benchmark (manifest name), the question id and a note."""

    benchmark = serializers.CharField(max_length=100, required=False, allow_blank=True)
    question_id = serializers.CharField(max_length=100)
    note = serializers.CharField(max_length=2000)
