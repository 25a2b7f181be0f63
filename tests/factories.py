"""factory-boy factories for every model (questions, scoring, review). Others may reuse them.

`published_edition(benchmark)` builds the `original` edition in the published state
directly (the database triggers allow a row to be *created* published; entries must be
added while it is a draft, so use `KeyEditionFactory` + entries + `publish(edition)`).
"""

from __future__ import annotations

import factory
from django.contrib.auth.models import Group, User
from django.utils import timezone

from core.models import AuditLogEntry
from questions.models import (
    Benchmark,
    Category,
    KeyEdition,
    KeyEntry,
    ModelUnderTest,
    Question,
    Response,
    Section,
    SourceDocument,
)
from review.models import CitationCheck, Evidence, Proposal, ReviewItem, Source
from scoring.models import AuditVerdict, Grade, Judge


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.PostGenerationMethodCall("set_password", "correct-horse-battery-1")

    @factory.post_generation
    def roles(self, create, extracted, **kwargs):
        if create and extracted:
            for name in extracted:
                self.groups.add(Group.objects.get_or_create(name=name)[0])
        if create:
            self.save()


class BenchmarkFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Benchmark
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"bench-{n}")
    version = "1"
    grade_scale = [0, 1, 2]


class CategoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Category

    benchmark = factory.SubFactory(BenchmarkFactory)
    category_id = factory.Sequence(lambda n: f"cat{n}")
    name = factory.Sequence(lambda n: f"Category {n}")


class SourceDocumentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SourceDocument

    benchmark = factory.SubFactory(BenchmarkFactory)
    doc_id = factory.Sequence(lambda n: f"DOC{n}")
    title = factory.Sequence(lambda n: f"Approved Document {n}")
    short_title = factory.LazyAttribute(lambda d: d.doc_id)
    edition = "2013 edition incorporating 2016 amendments"
    status = SourceDocument.Status.CURRENT


class SectionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Section

    document = factory.SubFactory(SourceDocumentFactory)
    locator = factory.Sequence(lambda n: f"1.{n}")
    heading = ""
    text = "The passage text."
    position = factory.Sequence(lambda n: n)


class QuestionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Question

    benchmark = factory.SubFactory(BenchmarkFactory)
    question_id = factory.Sequence(lambda n: f"Q{n:04d}")
    category = factory.SubFactory(CategoryFactory, benchmark=factory.SelfAttribute("..benchmark"))
    text = factory.Sequence(lambda n: f"What is the minimum value number {n}?")


class KeyEditionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = KeyEdition

    benchmark = factory.SubFactory(BenchmarkFactory)
    name = "original"
    status = KeyEdition.Status.DRAFT


class KeyEntryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = KeyEntry

    edition = factory.SubFactory(KeyEditionFactory)
    question = factory.SubFactory(
        QuestionFactory, benchmark=factory.SelfAttribute("..edition.benchmark")
    )
    answer = factory.Sequence(lambda n: f"{n} mm")
    citation_document = None
    citation_doc_id = factory.LazyAttribute(
        lambda e: e.citation_document.doc_id if e.citation_document else ""
    )
    citation_locator = ""
    citation_quote = ""
    has_citation = factory.LazyAttribute(lambda e: bool(e.citation_doc_id))


class ModelUnderTestFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ModelUnderTest

    benchmark = factory.SubFactory(BenchmarkFactory)
    model_id = factory.Sequence(lambda n: f"model-{n}")
    name = factory.LazyAttribute(lambda m: m.model_id.title())
    vendor = "Vendor"


class ResponseFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Response

    question = factory.SubFactory(QuestionFactory)
    model = factory.SubFactory(
        ModelUnderTestFactory, benchmark=factory.SelfAttribute("..question.benchmark")
    )
    text = "An answer."


class JudgeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Judge

    benchmark = factory.SubFactory(BenchmarkFactory)
    judge_id = factory.Sequence(lambda n: f"judge-{n}")
    name = factory.LazyAttribute(lambda j: j.judge_id)
    vendor = factory.Sequence(lambda n: f"vendor-{n}")
    role = Judge.Role.JUDGE


class GradeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Grade

    response = factory.SubFactory(ResponseFactory)
    judge = factory.SubFactory(JudgeFactory)
    key_entry = None
    grade = 2


class AuditVerdictFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AuditVerdict

    key_entry = factory.SubFactory(KeyEntryFactory)
    auditor = factory.SubFactory(JudgeFactory, role=Judge.Role.AUDITOR)
    verdict = AuditVerdict.Verdict.CORRECT
    rationale = "Matches the cited clause."


class ReviewItemFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ReviewItem

    question = factory.SubFactory(QuestionFactory)
    benchmark = factory.SelfAttribute("question.benchmark")
    source = Source.SINGLE_AUDITOR_FLAG
    sources = factory.LazyAttribute(lambda i: [i.source])
    priority = 201
    status = ReviewItem.Status.OPEN


class EvidenceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Evidence

    item = factory.SubFactory(ReviewItemFactory)
    kind = Source.SINGLE_AUDITOR_FLAG
    detail = factory.Sequence(lambda n: {"n": n})
    fingerprint = factory.Sequence(lambda n: f"fp{n}")


class CitationCheckFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = CitationCheck

    item = factory.SubFactory(ReviewItemFactory)
    reviewer = factory.SubFactory(UserFactory)
    locator_exists = "yes"
    supports = "yes"
    edition_in_force = "yes"
    amended = "no"


class ProposalFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Proposal

    item = factory.SubFactory(ReviewItemFactory, status=ReviewItem.Status.PROPOSED)
    author = factory.SubFactory(UserFactory)
    action = Proposal.Action.CONFIRM


class AuditLogEntryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AuditLogEntry

    actor_label = "system"
    action = "test.action"
    target_type = "thing"
    target_id = "1"


def publish(edition: KeyEdition) -> KeyEdition:
    """Mark a draft edition published (test set-up; the review service is the real path)."""
    edition.status = KeyEdition.Status.PUBLISHED
    edition.published_at = timezone.now()
    edition.save(update_fields=["status", "published_at"])
    return edition
