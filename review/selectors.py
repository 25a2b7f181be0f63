"""Reads of the review workflow used by pages, API, services and the bench.

Each list read runs a fixed number of queries whatever the number of rows (pages and
endpoints assert it).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_date

from questions.models import Benchmark, KeyEdition, KeyEntry, Question, Section
from questions.selectors import edition_ancestry_ids, latest_published_edition
from review.models import AuditLogEntry, CitationCheck, Evidence, Proposal, ReviewItem
from scoring.models import AuditVerdict, Grade, Judge

# ------------------------------------------------------------------ editions and entries


def draft_edition(benchmark: Benchmark) -> KeyEdition | None:
    return KeyEdition.objects.filter(benchmark=benchmark, status=KeyEdition.Status.DRAFT).first()


def working_edition(benchmark: Benchmark) -> KeyEdition | None:
    """Return the edition reviewers work against: the latest published one."""
    return latest_published_edition(benchmark)


def entry_for_question(question: Question, edition: KeyEdition | None) -> KeyEntry | None:
    """Return the question's effective key entry in `edition` (nearest ancestor wins)."""
    if edition is None:
        return None
    chain = edition_ancestry_ids(edition)
    rank = {pk: i for i, pk in enumerate(chain)}
    entries = list(
        KeyEntry.objects.filter(question=question, edition_id__in=chain).select_related(
            "citation_document", "edition"
        )
    )
    return min(entries, key=lambda e: rank[e.edition_id]) if entries else None


# ------------------------------------------------------------------ the queue


@dataclass
class QueueFilters:
    benchmark: str = ""
    source: str = ""
    category: str = ""
    status: str = ""
    document: str = ""
    assignee: str = ""
    q: str = ""

    @classmethod
    def from_params(cls, params) -> QueueFilters:
        return cls(**{f: (params.get(f) or "").strip() for f in cls.__dataclass_fields__})

    def as_dict(self) -> dict[str, str]:
        return {k: v for k, v in self.__dict__.items() if v}


def queue_items(filters: QueueFilters, *, user=None) -> QuerySet[ReviewItem]:
    """Return the review items matching `filters`, highest priority first.

    `status` "" means every item that is not closed; "all" means every item;
    `assignee` "me" means the user's own claims, "none" unclaimed items.
    """
    qs = ReviewItem.objects.select_related(
        "benchmark", "question", "question__category", "claimed_by"
    )
    if filters.benchmark:
        qs = qs.filter(benchmark__name=filters.benchmark)
    if filters.source:
        has_evidence = Exists(Evidence.objects.filter(item=OuterRef("pk"), kind=filters.source))
        qs = qs.filter(Q(source=filters.source) | has_evidence)
    if filters.category:
        qs = qs.filter(question__category__category_id=filters.category)
    if filters.status == "all":
        pass
    elif filters.status:
        qs = qs.filter(status=filters.status)
    else:
        qs = qs.exclude(status__in=ReviewItem.CLOSED)
    if filters.assignee == "me" and user is not None:
        qs = qs.filter(claimed_by=user)
    elif filters.assignee == "none":
        qs = qs.filter(claimed_by__isnull=True)
    elif filters.assignee:
        qs = qs.filter(claimed_by__username=filters.assignee)
    if filters.document:
        cites = Exists(
            KeyEntry.objects.filter(question=OuterRef("question"), citation_doc_id=filters.document)
        )
        qs = qs.filter(cites)
    if filters.q:
        qs = qs.filter(
            Q(question__question_id__icontains=filters.q) | Q(question__text__icontains=filters.q)
        )
    return qs.order_by("-priority", "id")


def status_counts(filters: QueueFilters) -> dict[str, int]:
    """Return {status: count} over the items matching every filter but status (one query)."""
    without_status = QueueFilters(**{**filters.__dict__, "status": "all"})
    rows = queue_items(without_status).order_by().values_list("status").annotate(n=Count("id"))
    counts = {s: 0 for s in ReviewItem.Status.values}
    counts.update(dict(rows))
    return counts


def citation_labels(items: list[ReviewItem]) -> None:
    """Attach `entry` (the working edition's key entry) to each item in two or three queries."""
    by_benchmark: dict[int, list[ReviewItem]] = defaultdict(list)
    for item in items:
        by_benchmark[item.benchmark_id].append(item)
    for bench_items in by_benchmark.values():
        benchmark = bench_items[0].benchmark
        edition = working_edition(benchmark)
        chain = edition_ancestry_ids(edition) if edition else []
        rank = {pk: i for i, pk in enumerate(chain)}
        entries: dict[int, KeyEntry] = {}
        for entry in KeyEntry.objects.filter(
            edition_id__in=chain, question_id__in=[i.question_id for i in bench_items]
        ).select_related("citation_document"):
            cur = entries.get(entry.question_id)
            if cur is None or rank[entry.edition_id] < rank[cur.edition_id]:
                entries[entry.question_id] = entry
        for item in bench_items:
            item.entry = entries.get(item.question_id)


def filter_choices() -> dict[str, Any]:
    """Return the options of the queue's filter form (a handful of small queries)."""
    from questions.models import Category, SourceDocument

    User = get_user_model()
    return {
        "benchmarks": list(Benchmark.objects.values_list("name", flat=True)),
        "categories": list(
            Category.objects.values_list("category_id", "name").order_by("name").distinct()
        ),
        "documents": list(
            SourceDocument.objects.values_list("doc_id", "short_title")
            .order_by("doc_id")
            .distinct()
        ),
        "assignees": list(
            User.objects.filter(review_claims__isnull=False)
            .values_list("username", flat=True)
            .order_by("username")
            .distinct()
        ),
    }


def neighbour_item_ids(item: ReviewItem, filters: QueueFilters | None = None) -> tuple:
    """Return (previous id, next id) of `item` in the queue order (two queries)."""
    qs = queue_items(filters or QueueFilters(benchmark=item.benchmark.name)).exclude(pk=item.pk)
    after = qs.filter(Q(priority__lt=item.priority) | Q(priority=item.priority, id__gt=item.id))
    before = qs.filter(Q(priority__gt=item.priority) | Q(priority=item.priority, id__lt=item.id))
    nxt = after.values_list("id", flat=True).first()
    prev = before.order_by("priority", "-id").values_list("id", flat=True).first()
    return prev, nxt


# ------------------------------------------------------------------ the review page


@dataclass
class ModelRow:
    model_id: str
    model_name: str
    response: str
    grades: dict[str, int | None] = field(default_factory=dict)
    flags: dict[str, str] = field(default_factory=dict)

    @property
    def agreed(self) -> int | None:
        values = list(self.grades.values())
        if len(values) >= 2 and values[0] is not None and all(v == values[0] for v in values):
            return values[0]
        return None


@dataclass
class Passage:
    document: Any = None
    section: Section | None = None
    before: str = ""
    quote: str = ""
    after: str = ""
    quote_found: bool = False
    previous: Section | None = None
    next: Section | None = None
    nearest: list[str] = field(default_factory=list)
    document_known: bool = True


def passage_for_entry(entry: KeyEntry | None) -> Passage | None:
    """Return the cited passage with the quote split out for highlighting, or None.

    When the locator is not found, `nearest` lists the locators it probably meant
    (questions.sources.nearest_locators).
    """
    from questions.selectors import section_for_locator
    from questions.sources import nearest_locators, quote_span

    if entry is None or not entry.has_citation:
        return None
    document = entry.citation_document
    if document is None:
        return Passage(document_known=False)
    section = (
        section_for_locator(document, entry.citation_locator) if entry.citation_locator else None
    )
    if section is None:
        available = list(
            Section.objects.filter(document=document)
            .order_by("position", "id")
            .values_list("locator", flat=True)
        )
        return Passage(
            document=document, nearest=nearest_locators(entry.citation_locator or "", available)
        )
    passage = Passage(document=document, section=section, before=section.text)
    if entry.citation_quote:
        span = quote_span(section.text, entry.citation_quote)
        if span:
            start, end = span
            passage.before = section.text[:start]
            passage.quote = section.text[start:end]
            passage.after = section.text[end:]
            passage.quote_found = True
    siblings = Section.objects.filter(document=document).only(
        "id", "locator", "position", "document_id"
    )
    passage.previous = (
        siblings.filter(
            Q(position__lt=section.position) | Q(position=section.position, id__lt=section.id)
        )
        .order_by("-position", "-id")
        .first()
    )
    passage.next = (
        siblings.filter(
            Q(position__gt=section.position) | Q(position=section.position, id__gt=section.id)
        )
        .order_by("position", "id")
        .first()
    )
    return passage


def model_rows(question: Question, entry: KeyEntry | None) -> tuple[list[str], list[ModelRow]]:
    """Return (judge ids, one row per response with each judge's grade on `entry`) in two queries."""
    judges = list(
        Judge.objects.filter(benchmark_id=question.benchmark_id, role=Judge.Role.JUDGE)
        .order_by("judge_id")
        .values_list("judge_id", flat=True)
    )
    rows: dict[int, ModelRow] = {}
    responses = question.responses.select_related("model").order_by("model__model_id")
    for response in responses:
        rows[response.pk] = ModelRow(response.model.model_id, response.model.name, response.text)
    if entry is not None and rows:
        grades = Grade.objects.filter(
            response_id__in=list(rows), key_entry=entry, judge__role=Judge.Role.JUDGE
        ).values_list("response_id", "judge__judge_id", "grade", "flag", "flag_reason")
        for response_id, judge_id, grade, flag, flag_reason in grades:
            row = rows[response_id]
            row.grades[judge_id] = grade
            if flag:
                row.flags[judge_id] = flag_reason or "flagged"
    for row in rows.values():
        row.grades = {j: row.grades.get(j) for j in judges}
    return judges, list(rows.values())


def audit_verdicts(entry: KeyEntry | None) -> list[AuditVerdict]:
    if entry is None:
        return []
    return list(entry.audits.select_related("auditor").order_by("auditor__judge_id"))


def item_detail(item_id: int) -> ReviewItem:
    """Return a review item with what its page shows prefetched."""
    return (
        ReviewItem.objects.select_related(
            "benchmark", "question", "question__category", "claimed_by"
        )
        .prefetch_related(
            Prefetch("evidence", queryset=Evidence.objects.order_by("created_at", "id")),
            Prefetch(
                "proposals",
                queryset=Proposal.objects.select_related("author", "decided_by", "base_entry"),
            ),
            Prefetch("checks", queryset=CitationCheck.objects.select_related("reviewer")),
        )
        .get(pk=item_id)
    )


def item_history(item: ReviewItem) -> list[AuditLogEntry]:
    """Return the audit log entries about this item, its checks and proposals (oldest first)."""
    proposal_ids = [str(p.pk) for p in item.proposals.all()]
    check_ids = [str(c.pk) for c in item.checks.all()]
    return list(
        AuditLogEntry.objects.filter(
            Q(target_type="review_item", target_id=str(item.pk))
            | Q(target_type="proposal", target_id__in=proposal_ids)
            | Q(target_type="citation_check", target_id__in=check_ids)
        ).order_by("created_at", "id")
    )


# ------------------------------------------------------------------ approvals and editions


def pending_proposals(benchmark: str = "") -> QuerySet[Proposal]:
    qs = Proposal.objects.filter(status=Proposal.Status.PENDING).select_related(
        "author",
        "item",
        "item__benchmark",
        "item__question",
        "base_entry",
        "base_entry__citation_document",
    )
    if benchmark:
        qs = qs.filter(item__benchmark__name=benchmark)
    return qs.order_by("created_at", "id")


@dataclass
class EditionChange:
    question: Question
    old: KeyEntry | None
    new: KeyEntry
    proposal: Proposal | None


def edition_changes(edition: KeyEdition) -> list[EditionChange]:
    """Return each entry of `edition` with its parent's effective entry and the proposal behind it.

    Three queries whatever the number of entries (plus the edition tree).
    """
    entries = list(
        KeyEntry.objects.filter(edition=edition)
        .select_related("question", "citation_document")
        .order_by("question__question_id")
    )
    old: dict[int, KeyEntry] = {}
    if edition.parent_id and entries:
        chain = edition_ancestry_ids(edition.parent)
        rank = {pk: i for i, pk in enumerate(chain)}
        for e in KeyEntry.objects.filter(
            edition_id__in=chain, question_id__in=[e.question_id for e in entries]
        ).select_related("citation_document"):
            cur = old.get(e.question_id)
            if cur is None or rank[e.edition_id] < rank[cur.edition_id]:
                old[e.question_id] = e
    proposals = {
        p.key_entry_id: p
        for p in Proposal.objects.filter(key_entry__in=entries).select_related(
            "author", "decided_by"
        )
    }
    return [
        EditionChange(e.question, old.get(e.question_id), e, proposals.get(e.pk)) for e in entries
    ]


def editions_for_benchmark(benchmark: Benchmark) -> list[KeyEdition]:
    return list(
        KeyEdition.objects.filter(benchmark=benchmark)
        .select_related("parent", "published_by")
        .annotate(n_entries=Count("entries"))
        .order_by("created_at", "id")
    )


def log_entries(params) -> QuerySet[AuditLogEntry]:
    """Return the audit log filtered by actor, action, target type/id and date range."""
    qs = AuditLogEntry.objects.all()
    if params.get("actor"):
        qs = qs.filter(actor_label=params["actor"])
    if params.get("action"):
        qs = qs.filter(action=params["action"])
    if params.get("target_type"):
        qs = qs.filter(target_type=params["target_type"])
    if params.get("target_id"):
        qs = qs.filter(target_id=params["target_id"])
    for name, lookup in (
        ("date_from", "created_at__date__gte"),
        ("date_to", "created_at__date__lte"),
    ):
        try:
            day = parse_date(params.get(name) or "")
        except ValueError:
            day = None
        if day is not None:
            qs = qs.filter(**{lookup: day})
    return qs.order_by("-created_at", "-id")


def now():
    return timezone.now()
