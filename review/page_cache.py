"""What the review pages keep between requests (issue 28 item 3), and when it is dropped.

Cached in the shared cache under the content tokens of core.content_cache (nothing is
cached where `content_cache.enabled()` is False: the page reads the database as before):

- `working_edition_with_chain(benchmark_id)`: the working (latest published) key edition
  and its ancestry, token "editions";
- `key_part(question, benchmark)`: the question's effective key entry in it (with its
  citation document, edition and audit exclusion), the cited passage
  (`selectors.passage_for_entry`), the successor edition's passage
  (`cited_passages.successor_passage`) and the judge panel (the benchmark's judge ids and
  `scoring.selectors.scoring_judges`), tokens "editions", "sources" and "panel"; on a
  miss from the shared copies of `working_edition_with_chain`, `document_index(benchmark_id,
  document_id)` (a document's passages in reading order, token "sources") and
  `panel(benchmark)` (token "panel");
- `citation_labels(benchmark_id, question_ids, compute)`: the queue's "Cited" column for a
  page of questions, tokens "editions" and "sources";
- `filter_choices(benchmark_ids, compute)`: the queue filter's categories and documents;

Grades, responses, audit verdicts, the item itself and the queue are read on every request
(they change with every scoring run and review action, written by raw SQL and COPY that
send no signal).

The tokens are dropped by `connect_signals` (receivers on save of KeyEdition, AuditExclusion,
Category, SourceDocument, Section, Judge, PanelMember; a key entry of a published edition never
changes, questions/migrations/0002) and by the writers that bypass signals: bundle import
(interchange), `import_sources`, `scoring.runs.services.panel.judge_panel_set`, and the admin's
deletions of documents and passages. No post_delete receiver is connected: it would stop
Django deleting a benchmark's passages in one statement.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.db.models.signals import post_save

from core import content_cache
from questions.models import (
    AuditExclusion,
    Category,
    KeyEdition,
    KeyEntry,
    Section,
    SourceDocument,
)

_MISS = object()


def _cached(benchmark_id: int, scopes: tuple[str, ...], name: str, parts: tuple, compute):
    """Return compute() cached under `name`, `parts` and the current tokens of `scopes`."""
    if not content_cache.enabled():
        return compute()
    digest = hashlib.sha1(repr(parts).encode()).hexdigest()[:20]
    key = f"review-page:{name}:{content_cache.tokens(benchmark_id, scopes)}:{digest}"
    hit = cache.get(key, _MISS)
    if hit is not _MISS:
        return hit
    value = compute()
    cache.set(key, value, content_cache.TIMEOUT)
    return value


def working_edition_with_chain(benchmark_id: int) -> tuple[KeyEdition | None, list[int]]:
    """`review.selectors.working_edition_with_chain`, cached under the "editions" token."""
    from review.selectors import working_edition_with_chain as read

    return _cached(
        benchmark_id, ("editions",), "edition", (benchmark_id,), lambda: read(benchmark_id)
    )


@dataclass
class KeyPart:
    """What the review page shows of a question's key: the working `edition` and its
    `chain`, the effective `entry` (None when not keyed or nothing is published), its
    cited `passage` (selectors.Passage or None) and `successor` (SuccessorPassage or
    None), and the benchmark's `judges_and_panel` (its judge ids sorted, and
    `scoring.selectors.scoring_judges`)."""

    edition: KeyEdition | None
    chain: list[int]
    entry: KeyEntry | None
    passage: Any
    successor: Any
    judges_and_panel: tuple[list[str], list]


def _read_key_part(question, benchmark) -> KeyPart:
    from review import selectors
    from review.cited_passages import successor_passage

    edition, chain = working_edition_with_chain(benchmark.pk)
    entry = selectors.entry_for_question(question, edition, chain=chain)
    passage = selectors.passage_for_entry(
        entry, index_of=lambda pk: document_index(benchmark.pk, pk)
    )
    if passage is not None and passage.document is not None:
        _ = passage.document.superseded_by  # read now, so the cached copy holds it
    return KeyPart(edition, chain, entry, passage, successor_passage(entry), panel(benchmark))


def document_index(benchmark_id: int, document_id: int):
    """`review.selectors.document_index` (a document's passages in file and reading order),
    cached per document under the "sources" token: every item citing it shares it."""
    from review.selectors import document_index as read

    return _cached(
        benchmark_id, ("sources",), "doc-index", (document_id,), lambda: read(document_id)
    )


def panel(benchmark) -> tuple[list[str], list]:
    """Return (the benchmark's judge ids, sorted; `scoring.selectors.scoring_judges`),
    cached per benchmark under the "panel" token. Three queries at most on a miss."""
    from scoring.models import Judge
    from scoring.selectors import scoring_judges

    def read():
        judges = list(
            Judge.objects.filter(benchmark_id=benchmark.pk, role=Judge.Role.JUDGE)
            .order_by("judge_id")
            .values_list("judge_id", flat=True)
        )
        return judges, scoring_judges(benchmark)

    return _cached(benchmark.pk, ("panel",), "panel", (benchmark.pk,), read)


def key_part(question, benchmark) -> KeyPart:
    """Return the question's KeyPart, cached under the "editions", "sources" and "panel"
    tokens (one cache look-up after the tokens'). On a miss it is read from the database
    (four to ten queries), the edition, the document's index and the panel from their own
    cached copies, which other questions share.
    """
    return _cached(
        benchmark.pk,
        ("editions", "sources", "panel"),
        "key",
        (question.pk,),
        lambda: _read_key_part(question, benchmark),
    )


def citation_labels(benchmark_id: int, question_ids: list[int], compute) -> dict[int, str]:
    """Return compute() ({question pk: citation label}, review.queue_rows) for a queue page's
    questions, cached under the "editions" and "sources" tokens."""
    return _cached(
        benchmark_id, ("editions", "sources"), "labels", tuple(sorted(question_ids)), compute
    )


def filter_choices(benchmark_ids: list[int], compute) -> dict[str, list]:
    """Return compute() (the queue filter's categories and documents over every benchmark,
    review.selectors) cached under the "editions" and "sources" tokens of all of them."""
    if not content_cache.enabled():
        return compute()
    tokens = [content_cache.tokens(pk, ("editions", "sources")) for pk in benchmark_ids]
    first = benchmark_ids[0] if benchmark_ids else 0
    return _cached(first, (), "choices", (benchmark_ids, tokens), compute)


def rendered(name: str, values: Any, render) -> str:
    """Return render() (HTML) cached under `name` and the sha1 of repr(`values`).

    For a fragment that is a function of plain values only (dicts, tuples, strings,
    numbers, dates): the key changes whenever a value does, so no token is needed and it is
    cached whatever the cache backend.
    """
    digest = hashlib.sha1(repr(values).encode()).hexdigest()
    key = f"review-fragment:{name}:{digest}"
    html = cache.get(key)
    if html is None:
        html = render()
        cache.set(key, html, content_cache.TIMEOUT)
    return html


# ------------------------------------------------------------------ invalidation


def _benchmark_of(sender, instance) -> int | None:
    if sender in (KeyEdition, SourceDocument) or hasattr(instance, "benchmark_id"):
        return instance.benchmark_id
    if sender is Section:
        return (
            SourceDocument.objects.filter(pk=instance.document_id)
            .values_list("benchmark_id", flat=True)
            .first()
        )
    if sender is AuditExclusion:
        return (
            KeyEntry.objects.filter(pk=instance.key_entry_id)
            .values_list("edition__benchmark_id", flat=True)
            .first()
        )
    return None


_SCOPE_OF: dict[type, str] = {}


def _saved(sender, instance, **kwargs) -> None:
    if not content_cache.enabled():
        return
    benchmark_id = _benchmark_of(sender, instance)
    if benchmark_id is not None:
        content_cache.bump(benchmark_id, _SCOPE_OF[sender])


def connect_signals() -> None:
    """Connect the post_save receivers that drop the tokens (ReviewConfig.ready)."""
    from scoring.models import Judge, PanelMember

    _SCOPE_OF.update(
        {
            KeyEdition: "editions",
            AuditExclusion: "editions",
            Category: "editions",  # the queue's filter lists them
            SourceDocument: "sources",
            Section: "sources",
            Judge: "panel",
            PanelMember: "panel",
        }
    )
    for model in _SCOPE_OF:
        post_save.connect(_saved, sender=model, dispatch_uid=f"review-page-cache-{model.__name__}")
