"""Reads of the review workflow used by pages, API, services and the bench.

Each list read runs a fixed number of queries whatever the number of rows (pages and
endpoints assert it).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import (
    Count,
    Exists,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Value,
    prefetch_related_objects,
)
from django.utils import timezone

from core.compiled_query import CompiledQuery
from core.models import AuditLogEntry
from questions.models import Benchmark, KeyEdition, KeyEntry, Question, Section
from questions.selectors import (
    excluded_entry_ids,
    key_entries_for_edition,
    latest_published_edition,
    scored_entries,
    working_edition_and_chain,
)
from review.filters import FALSE_VALUES, TRUE_VALUES, QueueFilters
from review.models import CitationCheck, Evidence, Proposal, ReviewItem
from scoring.models import AuditVerdict

# ------------------------------------------------------------------ editions and entries


def working_edition(benchmark: Benchmark) -> KeyEdition | None:
    """Return the edition reviewers work against: the latest published one."""
    return latest_published_edition(benchmark)


def working_edition_with_chain(benchmark: Benchmark | int) -> tuple[KeyEdition | None, list[int]]:
    """Return (`working_edition`, its edition_ancestry_ids) in one query, or (None, []).

    questions.selectors.working_edition_and_chain: for pages that then read key entries.
    """
    return working_edition_and_chain(benchmark)


def entry_for_question(
    question: Question, edition: KeyEdition | None, *, chain: list[int] | None = None
) -> KeyEntry | None:
    """Return the question's effective key entry in `edition`, or None (two queries).

    `questions.selectors.key_entries_for_edition` for one question (one query when the
    caller passes the edition's `chain` of ancestry ids); None when `edition` is None or
    the question is not keyed in it. The entry comes with its citation document, edition
    and audit exclusion (`entry.exclusion`; absent when not excluded) read.
    """
    if edition is None:
        return None
    return key_entries_for_edition(
        edition,
        question_ids=[question.pk],
        select_related=("citation_document", "edition", "exclusion"),
        chain=chain,
    ).get(question.pk)


# ------------------------------------------------------------------ the queue


def queue_items(filters: QueueFilters, *, user=None) -> QuerySet[ReviewItem]:
    """Return the review items matching `filters` (see QueueFilters), highest priority first.

    `assignee` "me" needs `user` (ignored without one).
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
    elif not filters.open:
        qs = qs.exclude(status__in=ReviewItem.CLOSED)
    if filters.open in TRUE_VALUES:
        qs = qs.exclude(status__in=ReviewItem.CLOSED)
    elif filters.open in FALSE_VALUES:
        qs = qs.filter(status__in=ReviewItem.CLOSED)
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


def status_counts(filters: QueueFilters, *, user=None) -> dict[str, int]:
    """Return {status: count} over the items matching every filter but status (one query);
    `user` as queue_items takes it (assignee "me")."""
    without_status = QueueFilters(**{**filters.__dict__, "status": "all"})
    if without_status == QueueFilters(status="all"):  # the queue as it opens: compiled once
        rows = _ALL_STATUS_COUNTS()
    else:
        rows = _status_count_rows(without_status, user)
    counts = {s: 0 for s in ReviewItem.Status.values}
    counts.update(dict(rows))
    return counts


def _status_count_rows(filters: QueueFilters, user=None) -> QuerySet:
    return queue_items(filters, user=user).order_by().values_list("status").annotate(n=Count("id"))


_ALL_STATUS_COUNTS = CompiledQuery(lambda: _status_count_rows(QueueFilters(status="all")), ())


def reviewer_usernames() -> list[str]:
    """Return the user names an item can be reassigned to: active users holding the
    reviewer role (a reviewer, editor or admin group, or a superuser; core.roles), sorted.
    One query."""
    from core.roles import Role

    return list(
        get_user_model()
        .objects.filter(is_active=True)
        .filter(Q(is_superuser=True) | Q(groups__name__in=[r.value for r in Role]))
        .values_list("username", flat=True)
        .order_by("username")
        .distinct()
    )


def filter_choices() -> dict[str, Any]:
    """Return the options of the queue's filter form (four small queries; two when the
    categories and documents are kept, review.page_cache.filter_choices)."""
    from review import page_cache

    benchmarks = _BENCHMARKS()
    return {
        "benchmarks": [name for _pk, name in benchmarks],
        **page_cache.filter_choices([pk for pk, _name in benchmarks], _content_choices),
        "assignees": _CLAIMANTS(),
    }


# the queue page asks them on every request: compiled once (core.compiled_query)
_BENCHMARKS = CompiledQuery(lambda: Benchmark.objects.values_list("pk", "name"), ())
_CLAIMANTS = CompiledQuery(
    lambda: (
        get_user_model()
        .objects.filter(review_claims__isnull=False)
        .values_list("username", flat=True)
        .order_by("username")
        .distinct()
    ),
    (),
)


def _content_choices() -> dict[str, list]:
    """The queue filter's categories and documents, over every benchmark (two queries)."""
    from questions.models import Category, SourceDocument

    return {
        "categories": list(
            Category.objects.values_list("category_id", "name").order_by("name").distinct()
        ),
        "documents": list(
            SourceDocument.objects.values_list("doc_id", "short_title")
            .order_by("doc_id")
            .distinct()
        ),
    }


def _neighbour_parts(benchmark_name: str, pk: int, priority: int, filters=None) -> tuple:
    """The two querysets of neighbour_item_ids: [(id, "next")] and [(id, "prev")], at most
    one row each."""
    qs = queue_items(filters or QueueFilters(benchmark=benchmark_name)).exclude(pk=pk)
    is_after = Q(priority__lt=priority) | Q(priority=priority, id__gt=pk)
    is_before = Q(priority__gt=priority) | Q(priority=priority, id__lt=pk)
    after = qs.filter(is_after).annotate(side=Value("next")).values_list("id", "side")[:1]
    before = (
        qs.filter(is_before)
        .order_by("priority", "-id")
        .annotate(side=Value("prev"))
        .values_list("id", "side")[:1]
    )
    return after, before


def _neighbour_union(benchmark_name: str, pk: int, priority: int, filters=None) -> QuerySet:
    after, before = _neighbour_parts(benchmark_name, pk, priority, filters)
    return after.union(before, all=True)  # one query, not two


# The item page's neighbours in its benchmark's queue, compiled once (core.compiled_query):
# building and compiling this union cost more CPU than PostgreSQL's answer.
_NEIGHBOURS = CompiledQuery(_neighbour_union, ("\x00benchmark-stand-in", -987654321, -987654322))


def neighbour_item_ids(item: ReviewItem, filters: QueueFilters | None = None) -> tuple:
    """Return (previous id, next id) of `item` in the queue order (one query; two on SQLite)."""
    args = (item.benchmark.name, item.pk, item.priority)
    if not connection.features.supports_slicing_ordering_in_compound:  # SQLite
        after, before = _neighbour_parts(*args, filters)
        rows = [*after, *before]
    elif filters is None:
        rows = _NEIGHBOURS(*args)
    else:
        rows = list(_neighbour_union(*args, filters))
    found = {side: pk for pk, side in rows}
    return found.get("prev"), found.get("next")


# ------------------------------------------------------------------ the review page


@dataclass
class Passage:
    document: Any = None
    section: Section | None = None
    before: str = ""
    quote: str = ""
    after: str = ""
    quote_found: bool = False
    quote_elsewhere: tuple[str, ...] = ()
    previous: Section | None = None
    next: Section | None = None
    nearest: list[str] = field(default_factory=list)
    document_known: bool = True
    indexed: bool = True  # the document has passages; False: the citation is not checked

    @property
    def neighbours(self) -> list[tuple[Section | None, str]]:
        """[(previous section or None, "previous"), (next section or None, "next")]."""
        return [(self.previous, "previous"), (self.next, "next")]


def document_index(document_id: int) -> tuple[list[tuple], list[tuple]]:
    """Return a document's passages as (id, locator, position) rows, in file order and in
    reading order (questions.sources.locator_sort_key, then position and id). One query."""
    from questions.sources import locator_sort_key

    index = list(
        Section.objects.filter(document_id=document_id)
        .order_by("position", "id")
        .values_list("id", "locator", "position")
    )
    return index, sorted(index, key=lambda row: (locator_sort_key(row[1]), row[2], row[0]))


def passage_for_entry(entry: KeyEntry | None, *, index_of=document_index) -> Passage | None:
    """Return the cited passage with the quote split out for highlighting, or None.

    When the locator is not found, `nearest` lists the locators it probably meant
    (questions.sources.nearest_locators). `previous` and `next` are the neighbouring
    sections in reading order (questions.sources.locator_sort_key), with their text.
    `index_of(document pk)` gives the document's `document_index` (review.page_cache keeps
    it per document).
    Where the quote is not in the passage,
    `quote_elsewhere` names the passages that hold it (questions.passages.locate_quote,
    the function triage's citation checks use too).
    """
    from questions.passages import locate_quote
    from questions.selectors import match_locator
    from questions.sources import nearest_locators

    if entry is None or not entry.has_citation:
        return None
    document = entry.citation_document
    if document is None:
        return Passage(document_known=False)
    # Two queries (issue 18, load): the document's locators, then the texts of the cited
    # passage and its neighbours; the other passages' texts only when the quote is not in
    # the cited one. The section is questions.selectors.section_for_locator's.
    sections = Section.objects.filter(document=document).order_by("position", "id")
    index, order = index_of(document.pk)
    locators = [row[1] for row in index]
    found = match_locator(locators, entry.citation_locator) if entry.citation_locator else None
    if found is None:
        return Passage(
            document=document,
            nearest=nearest_locators(entry.citation_locator or "", locators),
            indexed=bool(locators),
        )
    section_id = index[locators.index(found)][0]
    # Neighbours in reading order (questions.sources.locator_sort_key: 3.59, 3.60, 3.61),
    # not file order; their text is shown in place on the page.
    at = next(i for i, row in enumerate(order) if row[0] == section_id)
    wanted = {
        "previous": order[at - 1][0] if at > 0 else None,
        "next": order[at + 1][0] if at + 1 < len(order) else None,
    }
    texts = Section.objects.order_by().in_bulk(
        [pk for pk in (section_id, *wanted.values()) if pk is not None]
    )
    section = texts[section_id]
    passage = Passage(document=document, section=section, before=section.text)
    if entry.citation_quote:
        others = sections.exclude(pk=section.pk).values_list("locator", "text")
        found_quote = locate_quote(entry.citation_quote, section.text, others)
        passage.quote_elsewhere = found_quote.elsewhere
        if found_quote.span:
            start, end = found_quote.span
            passage.before = section.text[:start]
            passage.quote = section.text[start:end]
            passage.after = section.text[end:]
            passage.quote_found = True
    passage.previous = texts.get(wanted["previous"])
    passage.next = texts.get(wanted["next"])
    return passage


def audit_verdicts(entry: KeyEntry | None) -> list[AuditVerdict]:
    if entry is None:
        return []
    return list(entry.audits.select_related("auditor").order_by("auditor__judge_id"))


def item_detail(item_id: int) -> ReviewItem:
    """Return a review item with what its page shows prefetched: its evidence, proposals
    and citation checks (`item.evidence.all()` etc. run no query).

    Two to four queries: the item (with whether it has any proposal or check), its
    evidence, and its proposals and checks only when it has some (most items in the queue
    have neither; an empty relation is set as prefetched without a query). Raises
    ReviewItem.DoesNotExist.
    """
    item = (
        ReviewItem.objects.select_related(
            "benchmark", "question", "question__category", "claimed_by"
        )
        .annotate(
            _has_proposals=Exists(Proposal.objects.filter(item=OuterRef("pk"))),
            _has_checks=Exists(CitationCheck.objects.filter(item=OuterRef("pk"))),
        )
        .get(pk=item_id)
    )
    proposals = Proposal.objects.select_related("author", "decided_by", "base_entry")
    checks = CitationCheck.objects.select_related("reviewer")
    prefetch_related_objects(
        [item],
        Prefetch("evidence", queryset=Evidence.objects.order_by("created_at", "id")),
        Prefetch(
            "proposals", queryset=proposals if item._has_proposals else Proposal.objects.none()
        ),
        Prefetch("checks", queryset=checks if item._has_checks else CitationCheck.objects.none()),
    )
    return item


# One action logs two entries: the check or proposal itself and the item it changed. The
# item's entry (with the item's status after it) tells the story; its twin is left out.
_TWINS = {
    "citation_check.record": ("review_item.check", "check"),
    "proposal.create": (
        "review_item.propose",
        "proposal",
    ),
}


def item_history(item: ReviewItem) -> list[AuditLogEntry]:
    """Return the audit log entries about this item, its checks and proposals (oldest first).

    A check's or proposal's own entry is left out where the item's entry for the same
    action names it (`_TWINS`), so the history lists each action once.
    """
    proposal_ids = [str(p.pk) for p in item.proposals.all()]
    check_ids = [str(c.pk) for c in item.checks.all()]
    entries = list(
        AuditLogEntry.objects.filter(
            Q(target_type="review_item", target_id=str(item.pk))
            | Q(target_type="proposal", target_id__in=proposal_ids)
            | Q(target_type="citation_check", target_id__in=check_ids)
        ).order_by("created_at", "id")
    )
    told = {
        (e.action, str((e.after or {}).get(key)))
        for e in entries
        for action, key in _TWINS.values()
        if e.action == action
    }
    return [
        e
        for e in entries
        if e.action not in _TWINS or (_TWINS[e.action][0], str(e.target_id)) not in told
    ]


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
class KeyRow:
    """One question of a key edition as the key page shows it.

    `entry` is the effective key entry (from this edition or the nearest ancestor that
    has one; `entry.edition` says which). `status`: "scored", "removed" (a removal,
    rule 5) or "excluded" (both auditors adverse on this entry, rule 4).
    """

    question: Question
    entry: KeyEntry
    status: str


KEY_STATUSES = (
    ("scored", "Scored"),
    ("removed", "Removed by review"),
    ("excluded", "Excluded by audit"),
)


def key_rows(edition: KeyEdition, *, text: str = "", status: str = "") -> list[KeyRow]:
    """Return every question keyed in `edition` with its effective entry, in question order.

    `text` filters on question id, question text, answer or citation (case-insensitive);
    `status` on KEY_STATUSES. Four queries whatever the size.
    """
    entries = key_entries_for_edition(
        edition, select_related=("question", "question__category", "edition", "citation_document")
    )
    excluded = excluded_entry_ids(edition)
    scored = scored_entries(edition, entries=entries, excluded=excluded)
    needle = text.strip().lower()
    rows = []
    for entry in sorted(entries.values(), key=lambda e: e.question.question_id):
        state = (
            "scored" if entry.question_id in scored else "removed" if entry.removed else "excluded"
        )
        if status and state != status:
            continue
        if needle and not any(
            needle in (s or "").lower()
            for s in (
                entry.question.question_id,
                entry.question.text,
                entry.answer,
                entry.citation_label(),
            )
        ):
            continue
        rows.append(KeyRow(question=entry.question, entry=entry, status=state))
    return rows


@dataclass
class ProposalEvidence:
    """What an editor should see before deciding a proposal (rules 5 and 6).

    `checks`: the item's citation checks, newest first (rule 5 asks for one before an
    outcome; none is allowed but shown as missing). `citation`: for a correction that
    names a citation, "found" (the locator is in the document's source index),
    "not_found" (with `nearest` guesses), "not_indexed" (the document has no sections to
    look in) or "unknown_document"; "" when the proposal names no citation.
    """

    checks: list[CitationCheck]
    citation: str = ""
    nearest: list[str] = field(default_factory=list)


def proposals_evidence(proposals: list[Proposal]) -> dict[int, ProposalEvidence]:
    """Return {proposal pk: ProposalEvidence} for a page of proposals in four queries.

    Checks of the proposals' items (newest first), the source documents their citations
    name, and those documents' locators; a locator is found when it equals one of them or
    has the same normalised form (questions.sources.normalise_locator).
    """
    from questions.models import SourceDocument
    from questions.sources import nearest_locators, normalise_locator

    def norm(locator: str) -> str | None:
        try:
            return normalise_locator(locator)
        except ValueError:
            return None

    checks: dict[int, list[CitationCheck]] = defaultdict(list)
    for check in CitationCheck.objects.filter(
        item_id__in={p.item_id for p in proposals}
    ).select_related("reviewer"):
        checks[check.item_id].append(check)  # Meta ordering: newest first per item
    cited = [p for p in proposals if p.action == Proposal.Action.CORRECT and p.citation_doc_id]
    documents = {
        (d.benchmark_id, d.doc_id): d
        for d in SourceDocument.objects.filter(
            benchmark_id__in={p.item.benchmark_id for p in cited},
            doc_id__in={p.citation_doc_id for p in cited},
        )
    }
    locators: dict[int, list[str]] = defaultdict(list)
    for doc_id, locator in (
        Section.objects.filter(document_id__in=[d.pk for d in documents.values()])
        .order_by("document_id", "position", "id")
        .values_list("document_id", "locator")
    ):
        locators[doc_id].append(locator)
    out = {}
    for proposal in proposals:
        evidence = ProposalEvidence(checks=checks.get(proposal.item_id, []))
        out[proposal.pk] = evidence
        if proposal not in cited:
            continue
        document = documents.get((proposal.item.benchmark_id, proposal.citation_doc_id))
        if document is None:
            evidence.citation = "unknown_document"
            continue
        available = locators.get(document.pk, [])
        wanted = proposal.citation_locator or ""
        if not available:
            evidence.citation = "not_indexed"
        elif wanted and (
            wanted in available or (norm(wanted) or "") in {norm(x) for x in available}
        ):
            evidence.citation = "found"
        else:
            evidence.citation = "not_found"
            evidence.nearest = nearest_locators(wanted, available)
    return out


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
        old = key_entries_for_edition(
            edition.parent,
            question_ids=[e.question_id for e in entries],
            select_related=("citation_document",),
        )
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


def now():
    return timezone.now()
