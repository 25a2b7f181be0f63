"""Reads of the data layer shared by several callers (commands, views, scoring, review)."""

from __future__ import annotations

from django.db.models import QuerySet

from questions.errors import AmbiguousError, NotFoundError
from questions.models import Benchmark, KeyEdition, KeyEntry, Section, SourceDocument


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


def latest_published_edition(benchmark: Benchmark) -> KeyEdition | None:
    """Return the most recently published key edition of `benchmark`, or None."""
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
    chain: list[int] = []
    node: int | None = edition.pk
    while node is not None and node not in chain:
        chain.append(node)
        node = parents.get(node)
    return chain


def edition_chain(edition: KeyEdition) -> list[KeyEdition]:
    """Return the editions from the root (`original`) down to `edition`, root first."""
    ids = edition_ancestry_ids(edition)
    by_id = KeyEdition.objects.in_bulk(ids)
    return [by_id[i] for i in reversed(ids)]


def key_entries_for_edition(
    edition: KeyEdition, *, select_related: tuple[str, ...] = ()
) -> dict[int, KeyEntry]:
    """Return {question pk: effective KeyEntry} for every question keyed in `edition`.

    An edition inherits every question it has no entry for from its parent (models.py),
    so the effective entry is the one of the nearest edition in [self, parent, ...] that
    has one. Entries with `removed=True` are included: the caller decides what a removal
    means. Two queries whatever the depth: the edition tree, then the entries.
    """
    chain = edition_ancestry_ids(edition)
    rank = {edition_id: i for i, edition_id in enumerate(chain)}
    entries = KeyEntry.objects.filter(edition_id__in=chain)
    if select_related:
        entries = entries.select_related(*select_related)
    effective: dict[int, KeyEntry] = {}
    for entry in entries.iterator(chunk_size=5000):
        current = effective.get(entry.question_id)
        if current is None or rank[entry.edition_id] < rank[current.edition_id]:
            effective[entry.question_id] = entry
    return effective


def documents_for_benchmark(benchmark: Benchmark) -> QuerySet[SourceDocument]:
    return SourceDocument.objects.filter(benchmark=benchmark)


def get_document(benchmark: Benchmark, doc_id: str) -> SourceDocument:
    """Return the source document `doc_id` of `benchmark`; NotFoundError if unknown."""
    try:
        return SourceDocument.objects.get(benchmark=benchmark, doc_id=doc_id)
    except SourceDocument.DoesNotExist:
        raise NotFoundError(
            f"benchmark {benchmark.name!r} has no source document {doc_id!r}"
        ) from None


def section_for_locator(document: SourceDocument, locator: str) -> Section | None:
    """Return the passage of `document` at `locator` (exact, then normalised), or None."""
    exact = Section.objects.filter(document=document, locator=locator).first()
    if exact is not None:
        return exact
    from questions.sources import normalise_locator

    wanted = normalise_locator(locator)
    for section in Section.objects.filter(document=document).order_by("position", "id"):
        if normalise_locator(section.locator) == wanted:
            return section
    return None
