"""Reads of the data layer shared by several callers (commands, views, scoring, review)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from questions.errors import AmbiguousError, NotFoundError
from questions.models import (
    AuditExclusion,
    Benchmark,
    KeyEdition,
    KeyEntry,
    Section,
    SourceDocument,
)


def get_benchmark(name: str | None = None) -> Benchmark:
    """Return the benchmark called `name`, or the only one when `name` is None.

    Raises NotFoundError when the name is unknown or the database holds no benchmark, and
    AmbiguousError (with `choices`) when `name` is None and several benchmarks exist.
    """
    if name:
        try:
            return Benchmark.objects.get(name=name)
        except Benchmark.DoesNotExist:
            names = list(Benchmark.objects.values_list("name", flat=True))
            known = ", ".join(names) if names else "none imported yet"
            raise NotFoundError(f"no benchmark named {name!r} (known: {known})") from None
    benchmarks = list(Benchmark.objects.all()[:2])
    if not benchmarks:
        raise NotFoundError("no benchmark in the database: import a bundle first")
    if len(benchmarks) > 1:
        names = list(Benchmark.objects.values_list("name", flat=True))
        raise AmbiguousError(
            f"several benchmarks exist, name one with --benchmark: {', '.join(names)}", names
        )
    return benchmarks[0]


def latest_published_edition(benchmark: Benchmark | int) -> KeyEdition | None:
    """Return the most recently published key edition of `benchmark` (or its pk), or None."""
    return (
        KeyEdition.objects.filter(benchmark=benchmark, status=KeyEdition.Status.PUBLISHED)
        .order_by("-published_at", "-id")
        .first()
    )


def get_edition(benchmark: Benchmark, name: str | None = None) -> KeyEdition:
    """Return the edition called `name`, or the latest published one when `name` is None.

    Raises NotFoundError when there is no such edition (or nothing is published).
    """
    if name:
        try:
            return KeyEdition.objects.get(benchmark=benchmark, name=name)
        except KeyEdition.DoesNotExist:
            names = list(
                KeyEdition.objects.filter(benchmark=benchmark).values_list("name", flat=True)
            )
            raise NotFoundError(
                f"benchmark {benchmark.name!r} has no key edition {name!r} "
                f"(editions: {', '.join(names) or 'none'})"
            ) from None
    edition = latest_published_edition(benchmark)
    if edition is None:
        raise NotFoundError(f"benchmark {benchmark.name!r} has no published key edition")
    return edition


def edition_ancestry_ids(edition: KeyEdition) -> list[int]:
    """Return the ids of [edition, parent, grandparent, ...] (nearest first), in one query."""
    parents = dict(
        KeyEdition.objects.filter(benchmark_id=edition.benchmark_id).values_list("id", "parent_id")
    )
    return _ancestry(edition.pk, parents)


def _ancestry(start: int, parents: Mapping[int, int | None]) -> list[int]:
    """Return [start, its parent, ...] from {edition id: parent id} (a cycle stops it)."""
    chain: list[int] = []
    node: int | None = start
    while node is not None and node not in chain:
        chain.append(node)
        node = parents.get(node)
    return chain


def working_edition_and_chain(benchmark: Benchmark | int) -> tuple[KeyEdition | None, list[int]]:
    """Return (`latest_published_edition`, its `edition_ancestry_ids`) in one query.

    Both read from the benchmark's editions at once (a handful of rows) for pages that
    need the two (issue 18, load). The latest is the one with the latest `published_at`,
    then the highest id, as `latest_published_edition` orders them: a published edition
    always has `published_at` (constraint `edition_published_has_time`).
    (None, []) when nothing is published.
    """
    editions = list(KeyEdition.objects.filter(benchmark=benchmark).order_by())
    published = [e for e in editions if e.status == KeyEdition.Status.PUBLISHED]
    if not published:
        return None, []
    latest = max(published, key=lambda e: (e.published_at, e.pk))
    return latest, _ancestry(latest.pk, {e.pk: e.parent_id for e in editions})


def edition_chain(edition: KeyEdition) -> list[KeyEdition]:
    """Return the editions from the root (`original`) down to `edition`, root first."""
    ids = edition_ancestry_ids(edition)
    by_id = KeyEdition.objects.in_bulk(ids)
    return [by_id[i] for i in reversed(ids)]


def key_entries_for_edition(
    edition: KeyEdition,
    *,
    question_ids: Iterable[int] | None = None,
    select_related: tuple[str, ...] = (),
    fields: tuple[str, ...] = (),
    chain: list[int] | None = None,
) -> dict[int, Any]:
    """Return {question pk: effective key entry} for every question keyed in `edition`.

    The one implementation of "effective key entry" (docs/architecture.md): an edition inherits
    every question it has no entry for from its parent (questions/models.py), so the
    effective entry is the one of the nearest edition in [self, parent, ...] that has one.
    Entries with `removed=True` are included: `scored_entries` says what is scored.

    `question_ids` limits the result to those question pks. By default the values are
    KeyEntry instances (with `select_related`); with `fields` (KeyEntry field names, e.g.
    ("id", "removed")) they are named rows of `question_id`, `edition_id` and those
    fields, no model instances, for callers that read tens of thousands of entries.
    `chain`: the edition's `edition_ancestry_ids` when the caller has them. Two queries
    whatever the depth: the edition tree (none with `chain`), then the entries.
    """
    if chain is None:
        chain = edition_ancestry_ids(edition)
    rank = {edition_id: i for i, edition_id in enumerate(chain)}
    entries = KeyEntry.objects.filter(edition_id__in=chain)
    if question_ids is not None:
        entries = entries.filter(question_id__in=list(question_ids))
    if fields:
        # order_by(): the model's default ordering would join editions and questions
        wanted = tuple(dict.fromkeys(("question_id", "edition_id", *fields)))
        rows = entries.order_by().values_list(*wanted, named=True)
    else:
        rows = entries.select_related(*select_related) if select_related else entries
    effective: dict[int, Any] = {}
    # A server-side cursor for the whole key; a plain query for a few questions (a page's
    # worth: one round trip, not DECLARE, FETCH and CLOSE).
    for row in rows.iterator(chunk_size=5000) if question_ids is None else rows:
        current = effective.get(row.question_id)
        if current is None or rank[row.edition_id] < rank[current.edition_id]:
            effective[row.question_id] = row
    return effective


def excluded_entry_ids(edition: KeyEdition) -> set[int]:
    """Return the pks of the key entries of `edition`'s benchmark excluded by the key audit.

    An exclusion (questions.models.AuditExclusion, rule 4) belongs to one key entry and so
    holds in every edition whose effective entry that is. One query.
    """
    return set(
        AuditExclusion.objects.filter(key_entry__edition__benchmark_id=edition.benchmark_id)
        .order_by()
        .values_list("key_entry_id", flat=True)
    )


def scored_entries(
    edition: KeyEdition,
    *,
    entries: Mapping[int, Any] | None = None,
    excluded: set[int] | None = None,
) -> dict[int, int]:
    """Return {question pk: effective entry pk} of the questions scored in `edition`.

    The one implementation of "scored" (methodology.md rules 4 and 5): the question is
    keyed in the edition and its effective entry is neither a removal (`removed=True`) nor
    excluded by the key audit. `entries` (the result of `key_entries_for_edition` for this
    edition, instances or rows with `id` and `removed`) and `excluded` (of
    `excluded_entry_ids`) save their queries when the caller has them; three queries
    without them.
    """
    if entries is None:
        entries = key_entries_for_edition(edition, fields=("id", "removed"))
    if excluded is None:
        excluded = excluded_entry_ids(edition)
    return {q: e.id for q, e in entries.items() if not e.removed and e.id not in excluded}


def section_for_locator(document: SourceDocument, locator: str) -> Section | None:
    """Return the passage of `document` at `locator` (exact, then normalised), or None."""
    exact = Section.objects.filter(document=document, locator=locator).first()
    if exact is not None:
        return exact
    locators = Section.objects.filter(document=document).order_by("position", "id")
    found = match_locator(locators.values_list("locator", flat=True), locator)
    return None if found is None else locators.get(locator=found)


def match_locator(locators: Iterable[str], locator: str) -> str | None:
    """Return the one of `locators` (document order) that `locator` names, or None.

    The rule of `section_for_locator`: the exact locator, else the first whose
    questions.sources.normalise_locator form equals `locator`'s. Raises what
    normalise_locator raises for a malformed `locator` (only when there is no exact match).
    """
    from questions.sources import normalise_locator

    locators = list(locators)
    if locator in locators:
        return locator
    wanted = normalise_locator(locator)
    return next((loc for loc in locators if normalise_locator(loc) == wanted), None)
