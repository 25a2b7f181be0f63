"""The data layer: benchmarks, source documents, questions, key editions and responses.

Terms follow ../shared/spec/methodology.md. Rule 7 (the original key is immutable) is
enforced by database triggers (migrations 0002 for key rows, 0004 for the wording of
questions a published entry answers), not only here.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Benchmark(models.Model):
    """A benchmark as named by a bundle manifest; scopes every id below it."""

    name = models.SlugField(max_length=100, unique=True)
    version = models.CharField(max_length=50, blank=True)
    description = models.TextField(blank=True)
    license = models.TextField(blank=True)
    grade_scale = models.JSONField(default=list, help_text="Ordinal grade scale, e.g. [0, 1, 2].")
    manifest = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # The public results site (issue 22): only `questions.services.benchmark_publicity_set`
    # changes these, an admin's logged action.
    is_public = models.BooleanField(
        default=False,
        help_text="Anonymous visitors may read this benchmark's results site under /public/.",
    )
    credit_reviewers = models.BooleanField(
        default=False,
        help_text="The public site names the people who published key editions.",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def grade_min(self) -> int:
        return min(self.grade_scale) if self.grade_scale else 0

    @property
    def grade_max(self) -> int:
        return max(self.grade_scale) if self.grade_scale else 2


class SourceDocument(models.Model):
    """One edition of a published document (an Approved Document, a standard, an order)."""

    class Status(models.TextChoices):
        CURRENT = "current", "Current"
        SUPERSEDED = "superseded", "Superseded"
        WITHDRAWN = "withdrawn", "Withdrawn"

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="documents")
    doc_id = models.CharField(max_length=100)
    title = models.CharField(max_length=500)
    short_title = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=100, blank=True)
    edition = models.CharField(max_length=100, blank=True)
    published = models.DateField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.CURRENT)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    url = models.URLField(max_length=1000, blank=True)

    class Meta:
        ordering = ["benchmark", "doc_id"]
        constraints = [
            models.UniqueConstraint(fields=["benchmark", "doc_id"], name="document_unique_doc_id"),
            models.CheckConstraint(
                condition=Q(status__in=["current", "superseded", "withdrawn"]),
                name="document_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.short_title or self.title} ({self.edition or 'edition not stated'})"

    def is_in_force(self) -> bool:
        return self.status == self.Status.CURRENT


class Section(models.Model):
    """A located passage of a source document: a numbered paragraph, table or diagram caption."""

    document = models.ForeignKey(SourceDocument, on_delete=models.CASCADE, related_name="sections")
    locator = models.CharField(max_length=100)
    heading = models.TextField(blank=True)
    text = models.TextField(blank=True)
    position = models.PositiveIntegerField(default=0, help_text="Order within the document.")

    class Meta:
        ordering = ["document", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["document", "locator"], name="section_unique_locator"),
        ]

    def __str__(self) -> str:
        return f"{self.document.doc_id} {self.locator}"


class Category(models.Model):
    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="categories")
    category_id = models.CharField(max_length=100)
    name = models.CharField(max_length=200)

    class Meta:
        ordering = ["benchmark", "category_id"]
        verbose_name_plural = "categories"
        constraints = [
            models.UniqueConstraint(
                fields=["benchmark", "category_id"], name="category_unique_category_id"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Question(models.Model):
    """A benchmark question; its answer lives in KeyEntry rows, one per key edition.

    Whether it is scored depends on the key edition: see KeyEntry.removed and
    AuditExclusion (both per key entry).
    """

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="questions")
    question_id = models.CharField(max_length=100)
    category = models.ForeignKey(
        Category, null=True, blank=True, on_delete=models.PROTECT, related_name="questions"
    )
    text = models.TextField()

    class Meta:
        ordering = ["benchmark", "question_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["benchmark", "question_id"], name="question_unique_question_id"
            ),
        ]

    def __str__(self) -> str:
        return self.question_id


class KeyEdition(models.Model):
    """A version of the answer key; `original` comes from the bundle, later ones from review.

    A published edition and its entries are immutable (database triggers). An edition
    inherits every question it has no entry for from its parent, without copying.
    """

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        PUBLISHED = "published", "Published"

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="editions")
    name = models.SlugField(max_length=100)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["benchmark", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["benchmark", "name"], name="edition_unique_name"),
            models.UniqueConstraint(
                fields=["benchmark"],
                condition=Q(status="draft"),
                name="edition_one_draft_per_benchmark",
            ),
            models.CheckConstraint(
                condition=Q(status="draft", published_at__isnull=True)
                | Q(status="published", published_at__isnull=False),
                name="edition_published_has_time",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.benchmark.name}/{self.name}"

    def is_published(self) -> bool:
        return self.status == self.Status.PUBLISHED


class KeyEntry(models.Model):
    """A question's key answer and citation in one key edition.

    A row with `removed=True` takes the question out of scoring from that edition on
    (a removal, rule 5). `reason`/`note` say why a non-original entry was made.
    """

    class Reason(models.TextChoices):
        FACTUALLY_WRONG = "factually_wrong", "Factually wrong"
        AMENDED_OR_REPEALED = "amended_or_repealed", "Amended or repealed since"
        SUPERSEDED_EDITION = "superseded_edition", "Cites a superseded edition"
        UNGRADEABLE = "ungradeable", "Ambiguous or ungradeable"
        OTHER = "other", "Other"

    edition = models.ForeignKey(KeyEdition, on_delete=models.PROTECT, related_name="entries")
    question = models.ForeignKey(Question, on_delete=models.PROTECT, related_name="key_entries")
    answer = models.TextField(blank=True)
    citation_document = models.ForeignKey(
        SourceDocument, null=True, blank=True, on_delete=models.PROTECT, related_name="citations"
    )
    citation_doc_id = models.CharField(
        max_length=100, blank=True, help_text="As written in the bundle, even if unknown."
    )
    citation_locator = models.CharField(max_length=100, blank=True)
    citation_quote = models.TextField(blank=True)
    has_citation = models.BooleanField(default=True)
    removed = models.BooleanField(default=False)
    reason = models.CharField(max_length=30, choices=Reason.choices, blank=True)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["edition", "question"]
        verbose_name_plural = "key entries"
        constraints = [
            models.UniqueConstraint(
                fields=["edition", "question"], name="keyentry_unique_question"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.edition.name}:{self.question.question_id}"

    def citation_label(self) -> str:
        """Return the entry's citation as shown in lists: see :func:`citation_label`."""
        doc = self.citation_document
        return citation_label(
            has_citation=self.has_citation,
            document_title=doc.short_title if doc else None,
            doc_id=self.citation_doc_id,
            locator=self.citation_locator,
        )


def citation_label(
    *, has_citation: bool, document_title: str | None, doc_id: str, locator: str
) -> str:
    """Return a citation's label, e.g. "ADK 1.2" ("" when the entry cites nothing).

    ``document_title`` is the register document's short title (None when the entry's
    document is not in the register: its ``doc_id`` as written in the bundle is shown).
    The one rule: `KeyEntry.citation_label` and the queue's value rows
    (review.queue_rows) both call it.
    """
    if not has_citation:
        return ""
    doc = document_title if document_title is not None else doc_id
    return f"{doc} {locator}".strip()


class AuditExclusion(models.Model):
    """A key entry taken out of scoring because both auditors found it adverse (rule 4).

    Per key entry, not per question: it applies to every key edition whose effective entry
    for the question is this one (the edition that has the entry and the descendants that
    inherit it), and to no other. A corrected entry is not excluded by its predecessor's
    audit, and auditing a corrected edition changes the original edition's figures only
    through an entry the two share (one the corrected edition inherits unchanged: the
    verdict is about that entry, whichever edition's triage found it). Not a key row: triage adds it
    after publication, and the triggers that keep published key rows immutable do not
    cover it. `reason` is a short code (triage writes `auditors_agree`).
    """

    key_entry = models.OneToOneField(KeyEntry, on_delete=models.PROTECT, related_name="exclusion")
    reason = models.CharField(max_length=50)
    excluded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["key_entry"]
        constraints = [
            models.CheckConstraint(condition=~Q(reason=""), name="auditexclusion_has_reason"),
        ]

    REASON_LABELS = {
        "auditors_agree": "both auditors found the key entry wrong or ungradeable (rule 4)",
    }

    def __str__(self) -> str:
        return f"{self.key_entry} excluded ({self.reason})"

    def reason_label(self) -> str:
        """Return the reason in words for the UI (the code itself when it has no label)."""
        return self.REASON_LABELS.get(self.reason, self.reason)


class ModelUnderTest(models.Model):
    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="models")
    model_id = models.CharField(max_length=200)
    name = models.CharField(max_length=300)
    vendor = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["benchmark", "model_id"]
        verbose_name = "model under test"
        verbose_name_plural = "models under test"
        constraints = [
            models.UniqueConstraint(fields=["benchmark", "model_id"], name="model_unique_model_id"),
        ]

    def __str__(self) -> str:
        return self.name


class Response(models.Model):
    """One model's answer to one question (the text may be empty)."""

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="responses")
    model = models.ForeignKey(ModelUnderTest, on_delete=models.CASCADE, related_name="responses")
    text = models.TextField(blank=True)

    class Meta:
        ordering = ["question", "model"]
        constraints = [
            models.UniqueConstraint(fields=["question", "model"], name="response_unique_pair"),
        ]

    def __str__(self) -> str:
        return f"{self.model.model_id} on {self.question.question_id}"
