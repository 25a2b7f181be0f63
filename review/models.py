"""The review workflow: review items, their evidence, citation checks and proposals.

The audit log they write is core.models.AuditLogEntry.

Methodology rules 3-7 (../shared/spec/methodology.md). Workflows live in review/services/;
models hold predicates only.

Review item states::

    open --claim--> claimed --propose--> proposed --approve--> confirmed | corrected | removed
      ^               |  ^                   |
      +--release------+  +------reject-------+
      (an expired claim counts as open: anyone may claim it)

`confirmed`, `corrected` and `removed` are closed; a question has at most one item that is
not closed (constraint `reviewitem_one_open_per_question`).
"""

from __future__ import annotations

import hashlib
import json

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from questions.models import Benchmark, KeyEntry, Question


class Source(models.TextChoices):
    """Why a question is in the review queue (triage rules and detectors)."""

    SINGLE_AUDITOR_FLAG = "single_auditor_flag", "Auditor adverse, not decisive"
    JUDGE_FLAG = "judge_flag", "Judge flag"
    CONSENSUS_AGAINST_KEY = "consensus_against_key", "Models agree against the key"
    SUPERSEDED_CITATION = "superseded_citation", "Superseded or missing citation"
    # Retired detector (issue 17; replaced by panel_against_key in issue 27): kept so the
    # evidence it left on items still reads and ranks.
    MODELS_AGAINST_KEY = "models_against_key", "Strong models marked down against their record"
    PANEL_AGAINST_KEY = "panel_against_key", "Panel of models against the key"
    RESPONSES_AGREE_AGAINST_KEY = "responses_agree_against_key", "Responses agree on another answer"
    UNPARSED_REPLIES = "unparsed_replies", "Judge replies stay unparsed"
    MANUAL = "manual", "Added by hand"
    REPORTED = "reported", "Reported by a reader"


class ReviewItem(models.Model):
    """A question in the review queue, with why it is there and who is working on it."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        CLAIMED = "claimed", "Claimed"
        PROPOSED = "proposed", "Awaiting approval"
        CONFIRMED = "confirmed", "Key confirmed"
        CORRECTED = "corrected", "Corrected"
        REMOVED = "removed", "Removed from scoring"

    CLOSED = (Status.CONFIRMED, Status.CORRECTED, Status.REMOVED)

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="review_items")
    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="review_items")
    source = models.CharField(
        max_length=30, choices=Source.choices, help_text="The highest-priority reason."
    )
    sources = models.JSONField(default=list, blank=True, help_text="Every reason gathered.")
    priority = models.IntegerField(default=0, db_index=True)
    reasons = models.TextField(
        blank=True, help_text="Why, in words, from the evidence (review.priority)."
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="review_claims",
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    claim_expires_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1, help_text="Optimistic lock: +1 per change.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-priority", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["question"],
                condition=~Q(status__in=["confirmed", "corrected", "removed"]),
                name="reviewitem_one_open_per_question",
            ),
            models.CheckConstraint(
                condition=Q(
                    status__in=["open", "claimed", "proposed", "confirmed", "corrected", "removed"]
                ),
                name="reviewitem_status_valid",
            ),
            models.CheckConstraint(
                condition=~Q(status="claimed")
                | Q(claimed_by__isnull=False, claim_expires_at__isnull=False),
                name="reviewitem_claim_has_holder",
            ),
            models.CheckConstraint(
                condition=~Q(status="open") | Q(claimed_by__isnull=True),
                name="reviewitem_open_has_no_holder",
            ),
        ]
        indexes = [
            models.Index(fields=["benchmark", "status", "-priority"], name="reviewitem_queue_idx"),
        ]

    def __str__(self) -> str:
        return f"review item {self.pk} ({self.question_id and self.question.question_id})"

    def claim_is_live(self, now=None) -> bool:
        """Return True when someone holds an unexpired claim."""
        now = now or timezone.now()
        return (
            self.status == self.Status.CLAIMED
            and self.claim_expires_at is not None
            and self.claim_expires_at > now
        )

    def is_closed(self) -> bool:
        """True once the item is decided for good (CLOSED: confirmed, corrected, removed)."""
        return self.status in self.CLOSED

    def can_be_claimed(self, now=None) -> bool:
        return self.status == self.Status.OPEN or (
            self.status == self.Status.CLAIMED and not self.claim_is_live(now)
        )

    def is_held_by(self, user, now=None) -> bool:
        return self.claim_is_live(now) and self.claimed_by_id == getattr(user, "pk", None)

    @classmethod
    def claimable_q(cls, now) -> Q:
        """Return the filter for items anyone may claim now (open, or an expired claim)."""
        return Q(status=cls.Status.OPEN) | Q(status=cls.Status.CLAIMED, claim_expires_at__lte=now)


def fingerprint_of(kind: str, detail: dict) -> str:
    """Return a stable hash of a piece of evidence (re-running triage adds no duplicate)."""
    blob = json.dumps([kind, detail], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:40]


class Evidence(models.Model):
    """A reason, with its data, for a question being in the queue (added by triage)."""

    item = models.ForeignKey(ReviewItem, on_delete=models.CASCADE, related_name="evidence")
    kind = models.CharField(max_length=30, choices=Source.choices)
    detail = models.JSONField(default=dict, blank=True)
    fingerprint = models.CharField(max_length=40)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item", "created_at", "id"]
        verbose_name_plural = "evidence"
        constraints = [
            models.UniqueConstraint(
                fields=["item", "fingerprint"], name="evidence_unique_per_item"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} on item {self.item_id}"


class CitationCheck(models.Model):
    """A reviewer's check of the key's citation against the source (methodology rule 5)."""

    class YesNo(models.TextChoices):
        YES = "yes", "Yes"
        NO = "no", "No"

    class Supports(models.TextChoices):
        YES = "yes", "Yes"
        PARTLY = "partly", "Partly"
        NO = "no", "No"

    class InForce(models.TextChoices):
        YES = "yes", "Yes, in force"
        SUPERSEDED = "superseded", "Superseded"
        WITHDRAWN = "withdrawn", "Withdrawn"
        UNKNOWN = "unknown", "Unknown"

    class Amended(models.TextChoices):
        YES = "yes", "Yes"
        NO = "no", "No"
        UNKNOWN = "unknown", "Unknown"

    item = models.ForeignKey(ReviewItem, on_delete=models.CASCADE, related_name="checks")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    key_entry = models.ForeignKey(
        KeyEntry, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    locator_exists = models.CharField(max_length=5, choices=YesNo.choices)
    supports = models.CharField(max_length=10, choices=Supports.choices)
    edition_in_force = models.CharField(max_length=12, choices=InForce.choices)
    amended = models.CharField(max_length=10, choices=Amended.choices)
    note = models.TextField(blank=True)
    source_url = models.URLField(max_length=1000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item", "-created_at", "-id"]

    def __str__(self) -> str:
        return f"citation check {self.pk} on item {self.item_id}"


class Proposal(models.Model):
    """A reviewer's outcome for an item, awaiting an editor other than its author (rule 6)."""

    class Action(models.TextChoices):
        CONFIRM = "confirm", "Confirm key"
        CORRECT = "correct", "Correction"
        REMOVE = "remove", "Removal from scoring"

    Reason = KeyEntry.Reason

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        WITHDRAWN = "withdrawn", "Withdrawn"
        # A confirmation that took effect without an editor (rule 6 asks approval only for
        # corrections and removals; SNAGLIST_CONFIRMATION_NEEDS_APPROVAL turns this off).
        RECORDED = "recorded", "Recorded (no approval needed)"

    item = models.ForeignKey(ReviewItem, on_delete=models.CASCADE, related_name="proposals")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    action = models.CharField(max_length=10, choices=Action.choices)
    base_entry = models.ForeignKey(
        KeyEntry,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The key entry in force when the proposal was made (the 'old' side).",
    )
    answer = models.TextField(blank=True)
    citation_doc_id = models.CharField(max_length=100, blank=True)
    citation_locator = models.CharField(max_length=100, blank=True)
    citation_quote = models.TextField(blank=True)
    reason = models.CharField(max_length=30, choices=KeyEntry.Reason.choices, blank=True)
    note = models.TextField(blank=True)
    override_reason = models.CharField(
        max_length=200,
        blank=True,
        help_text="One line: why the key was confirmed over standing evidence (issue 30).",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_comment = models.TextField(blank=True)
    key_entry = models.ForeignKey(
        KeyEntry,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="proposals",
        help_text="The entry created in the draft key edition on approval.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["item"], condition=Q(status="pending"), name="proposal_one_pending_per_item"
            ),
            models.CheckConstraint(
                condition=Q(status="pending", decided_by__isnull=True)
                | Q(status="withdrawn")
                | Q(status__in=["approved", "rejected"], decided_by__isnull=False)
                | Q(status="recorded", action="confirm", decided_by__isnull=True),
                name="proposal_decision_has_editor",
            ),
            models.CheckConstraint(
                condition=Q(action="confirm") | ~Q(reason=""),
                name="proposal_change_has_reason",
            ),
            models.CheckConstraint(
                condition=~Q(decided_by=models.F("author")),
                name="proposal_four_eyes",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_action_display()} of {self.item.question.question_id} ({self.status})"

    def is_pending(self) -> bool:
        return self.status == self.Status.PENDING

    def is_removal(self) -> bool:
        return self.action == self.Action.REMOVE

    def changes_key(self) -> bool:
        return self.action in (self.Action.CORRECT, self.Action.REMOVE)


class ReaderReport(models.Model):
    """A key error reported by anyone on a public benchmark's results site (issue 22).

    Untrusted text: stored as typed, shown only escaped, never as HTML. The report's text
    is also its review item's evidence (kind `reported`, `evidence`); the reply address is
    not, so only editors see it (review.permissions.can_see_reporter_email).
    A reviewer may mark the report as spam (review.services.items.reader_report_mark_spam).
    """

    item = models.ForeignKey(ReviewItem, on_delete=models.CASCADE, related_name="reader_reports")
    evidence = models.OneToOneField(
        Evidence, on_delete=models.CASCADE, related_name="reader_report"
    )
    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="+")
    what = models.TextField(help_text="What the reader says is wrong with the key entry.")
    source_text = models.TextField(blank=True, help_text="The source that says so, as typed.")
    email = models.EmailField(blank=True, help_text="For a reply; shown to editors only.")
    created_at = models.DateTimeField(default=timezone.now)
    spam = models.BooleanField(default=False)
    spam_marked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    spam_marked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["item", "created_at", "id"]
        constraints = [
            models.CheckConstraint(condition=~Q(what=""), name="readerreport_says_what"),
            models.CheckConstraint(
                condition=Q(spam=False, spam_marked_by__isnull=True)
                | Q(spam=True, spam_marked_by__isnull=False),
                name="readerreport_spam_has_marker",
            ),
        ]

    def __str__(self) -> str:
        return f"reader report {self.pk} on {self.question.question_id}"
