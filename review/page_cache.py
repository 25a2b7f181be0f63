"""What the review pages keep between requests (issue 28 item 3), and when it is dropped.

Cached in the shared cache under the content tokens of core.content_cache (nothing is
cached where `content_cache.enabled()` is False: the page reads the database as before):

- `working_edition_with_chain(benchmark_id)`: the working (latest published) key edition
  and its ancestry, token "editions";
- `key_part(question, benchmark_id)`: the question's effective key entry in it (with its
  citation document, edition and audit exclusion), the cited passage
  (`selectors.passage_for_entry`) and the successor edition's passage
  (`cited_passages.successor_passage`), tokens "editions" and "sources";
- `panel(benchmark)`: the benchmark's judge ids and the judges whose grades count
  (`scoring.selectors.scoring_judges`), token "panel".

Grades, responses, audit verdicts, the item itself and the queue are read on every request
(they change with every scoring run and review action, written by raw SQL and COPY that
send no signal).

The tokens are dropped by `connect_signals` (receivers on save of KeyEdition, AuditExclusion,
SourceDocument, Section, Judge, PanelMember; a key entry of a published edition never
changes, questions/migrations/0002) and by the writers that bypass signals: bundle import
(interchange), `import_sources`, `scoring.services.panel.set_panel`, and the admin's
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
from questions.models import AuditExclusion, KeyEdition, KeyEntry, Section, SourceDocument

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
    cited `passage` (selectors.Passage or None) and `successor` (SuccessorPassage or None)."""

    edition: KeyEdition | None
    chain: list[int]
    entry: KeyEntry | None
    passage: Any
    successor: Any


def _read_key_part(question, benchmark_id: int) -> KeyPart:
    from review import selectors
    from review.cited_passages import successor_passage

    edition, chain = working_edition_with_chain(benchmark_id)
    entry = selectors.entry_for_question(question, edition, chain=chain)
    passage = selectors.passage_for_entry(entry)
    if passage is not None and passage.document is not None:
        _ = passage.document.superseded_by  # read now, so the cached copy holds it
    return KeyPart(edition, chain, entry, passage, successor_passage(entry))


def key_part(question, benchmark_id: int) -> KeyPart:
    """Return the question's KeyPart, cached under the "editions" and "sources" tokens.

    Read from the database (six to twelve queries) on a miss, none on a hit.
    """
    return _cached(
        benchmark_id,
        ("editions", "sources"),
        "key",
        (question.pk,),
        lambda: _read_key_part(question, benchmark_id),
    )


def panel(benchmark) -> tuple[list[str], list]:
    """Return (the benchmark's judge ids, sorted; `scoring.selectors.scoring_judges`),
    cached under the "panel" token. Three queries at most on a miss."""
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
            SourceDocument: "sources",
            Section: "sources",
            Judge: "panel",
            PanelMember: "panel",
        }
    )
    for model in _SCOPE_OF:
        post_save.connect(_saved, sender=model, dispatch_uid=f"review-page-cache-{model.__name__}")
