"""The queue page's rows: plain values per item, display strings computed once (issue 18).

Split from review.selectors (the queue's filtering stays there: `queue_items`,
`status_counts`). Fixed queries whatever the number of rows: the page's values, then
two per benchmark shown for the citation labels.
"""

from __future__ import annotations

from collections import defaultdict

from django.db.models import F, QuerySet

from core.compiled_query import CompiledQuery
from questions.models import citation_label
from questions.selectors import key_entries_for_edition
from review import page_cache
from review.filters import QueueFilters
from review.models import ReviewItem, Source

# The queue page reads plain values, not model instances: one row per item, display
# values computed here (not by template filters per row). Same output as the models would give.
QUEUE_ROW_FIELDS = {
    "qid": "question__question_id",
    "qtext": "question__text",
    "category": "question__category__name",
    "claimed_by_name": "claimed_by__username",
}


def queue_row_values(qs: QuerySet[ReviewItem]) -> QuerySet:
    """Return `qs` (from `queue_items`) as the dicts `queue_rows` needs (no model instances)."""
    return qs.values(
        "id",
        "benchmark_id",
        "question_id",
        "sources",
        "priority",
        "reasons",
        "status",
        "claim_expires_at",
        **{alias: F(path) for alias, path in QUEUE_ROW_FIELDS.items()},
    )


# The queue as it opens (no filter): each page's values query compiled once per process
# (core.compiled_query), for the first MAX_COMPILED_PAGES pages of PAGE rows.
MAX_COMPILED_PAGES = 200
_PAGES: dict[tuple[int, int], CompiledQuery] = {}


def page_values(filters: QueueFilters, page) -> list[dict]:
    """Return the rows of `page`, a Paginator page of `queue_row_values(queue_items(filters,
    ...))`, as that queryset's dicts.

    Without filters the page's query is compiled once (per offset and page size: the same
    rows as evaluating `page.object_list`); otherwise it is `list(page.object_list)`.
    """
    from review.selectors import queue_items

    per_page = page.paginator.per_page
    bottom = (page.number - 1) * per_page
    if filters != QueueFilters() or page.number > MAX_COMPILED_PAGES:
        return list(page.object_list)
    key = (bottom, per_page)
    if key not in _PAGES:
        _PAGES[key] = CompiledQuery(
            lambda: queue_row_values(queue_items(QueueFilters()))[bottom : bottom + per_page], ()
        )
    return _PAGES[key]()


def _citation_labels_by_question(benchmark_id: int, question_ids: list[int]) -> dict[int, str]:
    """Return {question id: citation label} of the working edition's effective entries.

    Same result as `working_edition` + `entry_for_question` + `KeyEntry.citation_label`,
    read as value rows: two queries (the editions, the entries), none when a page of the
    same questions was shown since the last change of the editions or documents
    (review.page_cache.citation_labels).
    """
    return page_cache.citation_labels(
        benchmark_id, question_ids, lambda: _read_citation_labels(benchmark_id, question_ids)
    )


def _read_citation_labels(benchmark_id: int, question_ids: list[int]) -> dict[int, str]:
    working, chain = page_cache.working_edition_with_chain(benchmark_id)
    if working is None:
        return {}
    entries = key_entries_for_edition(
        working,
        chain=chain,
        question_ids=question_ids,
        fields=(
            "has_citation",
            "citation_document_id",
            "citation_document__short_title",
            "citation_doc_id",
            "citation_locator",
        ),
    )
    return {
        question_id: citation_label(
            has_citation=e.has_citation,
            document_title=e.citation_document__short_title if e.citation_document_id else None,
            doc_id=e.citation_doc_id,
            locator=e.citation_locator,
        )
        for question_id, e in entries.items()
    }


def truncate_chars(text: str, length: int) -> str:
    """Return Django's `truncatechars` of `text` (Truncator.chars), skipping it when short.

    A text of at most `length` characters already in NFC comes back unchanged from
    Truncator, so it is returned as it is: the queue and the review page cut dozens of
    texts per page, most of them short.
    """
    import unicodedata

    from django.utils.text import Truncator

    if len(text) <= length and unicodedata.is_normalized("NFC", text):
        return text
    return Truncator(text).chars(length)


_STATUS_LABELS = dict(ReviewItem.Status.choices)
_SOURCE_LABELS = dict(Source.choices)


def queue_rows(values: list[dict], *, now, can_claim: bool) -> list[dict]:
    """Return one display dict per row of `queue_row_values` (three queries per benchmark shown).

    Keys: id, url, claim_url, qid, text (truncated to 110 characters), sources (labels),
    citation ("—" when none), category ("—" when none), badge, status_label, claimed_by,
    expired, claimable, priority, reasons (the evidence in words, review.priority).
    """
    from django.urls import reverse

    from review.templatetags.review_tags import status_badge

    by_benchmark: dict[int, list[int]] = defaultdict(list)
    for v in values:
        by_benchmark[v["benchmark_id"]].append(v["question_id"])
    labels: dict[tuple[int, int], str] = {}
    for benchmark_id, question_ids in by_benchmark.items():
        for q, label in _citation_labels_by_question(benchmark_id, question_ids).items():
            labels[benchmark_id, q] = label
    # reverse() once per page, not twice per row
    marker = 987654321
    item_url = reverse("review:item", args=[marker]).replace(str(marker), "{}")
    claim_url = reverse("review:claim", args=[marker]).replace(str(marker), "{}")
    rows = []
    for v in values:
        status = v["status"]
        expires = v["claim_expires_at"]
        expired = status == ReviewItem.Status.CLAIMED and expires is not None and expires < now
        rows.append(
            {
                "id": v["id"],
                "url": item_url.format(v["id"]),
                "claim_url": claim_url.format(v["id"]),
                "qid": v["qid"],
                "text": truncate_chars(v["qtext"], 110),
                "sources": [_SOURCE_LABELS.get(s, s) for s in v["sources"] or ()],
                "reasons": v.get("reasons") or "",
                "citation": labels.get((v["benchmark_id"], v["question_id"])) or "—",
                "category": v["category"] or "—",
                "badge": status_badge(status),
                "status_label": _STATUS_LABELS.get(status, status),
                "claimed_by": v["claimed_by_name"] or "",
                "expired": expired,
                "claimable": can_claim and (status == ReviewItem.Status.OPEN or expired),
                "priority": v["priority"],
            }
        )
    # The queue's <kbd>c</kbd> claims the top row that can be claimed, not just the top row.
    first = next((row for row in rows if row["claimable"]), None)
    for row in rows:
        row["shortcut"] = row is first
    return rows


def page_count_from_status_counts(filters: QueueFilters, counts: dict[str, int]) -> int:
    """Return how many items `queue_items(filters, user=...)` lists, read off
    `status_counts(filters, user=...)` for the same user (assignee "me" included)."""
    if filters.status == "all" or (not filters.status and filters.open):
        return sum(counts.values())  # the counts already apply `open`
    if filters.status:
        return counts.get(filters.status, 0)
    return sum(n for s, n in counts.items() if s not in ReviewItem.CLOSED)
