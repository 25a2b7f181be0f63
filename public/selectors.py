"""Reads of the public results site: which benchmarks and editions are public, cache validators.

Only a benchmark whose admin turned the switch on (`Benchmark.is_public`, set by
`questions.services.benchmark_publicity_set`) is public, and of it only the published key
editions: a draft is never shown.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from django.db.models import Max
from django.http import Http404

from core.actions import Action
from core.models import AuditLogEntry
from questions.models import AuditExclusion, Benchmark, KeyEdition
from scoring.board.human import human_changed_at
from scoring.models import Grade
from scoring.selectors import data_version, scoring_judges


def public_benchmark(name: str) -> Benchmark:
    """Return the public benchmark called `name`; raise Http404 when none is (or it is private)."""
    benchmark = Benchmark.objects.filter(name=name, is_public=True).first()
    if benchmark is None:
        raise Http404(f"no public benchmark named {name!r}")
    return benchmark


def is_public_benchmark(name: str) -> bool:
    """Return True when a benchmark called `name` exists and its results site is on (1 query)."""
    return Benchmark.objects.filter(name=name, is_public=True).exists()


def published_editions(benchmark: Benchmark) -> list[KeyEdition]:
    """Return the benchmark's published key editions, oldest first (by publication time)."""
    return list(
        KeyEdition.objects.filter(benchmark=benchmark, status=KeyEdition.Status.PUBLISHED)
        .select_related("parent", "published_by")
        .order_by("published_at", "id")
    )


def published_edition(editions: list[KeyEdition], name: str | None) -> KeyEdition:
    """Return the edition called `name` among `editions` (the newest when `name` is empty).

    Raises Http404 for a name that is not a published edition (a draft included) or when
    nothing is published yet.
    """
    if not name:
        if not editions:
            raise Http404("this benchmark has no published key edition yet")
        return editions[-1]
    for edition in editions:
        if edition.name == name:
            return edition
    raise Http404(f"no published key edition {name!r}")


def public_etag(
    benchmark: Benchmark, editions: list[KeyEdition], edition: KeyEdition | None, query: str
) -> str:
    """Return a strong ETag (quoted hex digest) for one public page of `benchmark`.

    It changes when an edition is published, the page's figures change
    (`scoring.selectors.data_version` of `edition`: grades, exclusions, the edition chain,
    the judges; `scoring.board.human.human_changed_at`: blind human grades), the credit switch
    changes, or the query string differs.
    """
    parts = [
        benchmark.pk,
        benchmark.credit_reviewers,
        [(e.pk, e.published_at) for e in editions],
        query,
    ]
    if edition is not None:
        parts.append(data_version(edition, scoring_judges(benchmark)))
    # The report's judges against people change with every blind grade (issue 31 item 2).
    parts.append(human_changed_at(benchmark))
    return '"' + hashlib.sha1(repr(parts).encode()).hexdigest()[:20] + '"'


def public_last_modified(benchmark: Benchmark, editions: list[KeyEdition]) -> datetime | None:
    """Return when the benchmark's public content last changed, or None when never published.

    The latest of: an edition's publication, a grade of the benchmark's judges, an
    exclusion by the key audit, a change of the public switch (audit log), a blind human
    grade or sample (audit log). Four queries.
    """
    times = [e.published_at for e in editions if e.published_at]
    if not times:
        return None
    times.append(
        Grade.objects.filter(judge__benchmark=benchmark).aggregate(t=Max("created_at"))["t"]
    )
    times.append(
        AuditExclusion.objects.filter(key_entry__edition__benchmark=benchmark).aggregate(
            t=Max("excluded_at")
        )["t"]
    )
    times.append(
        AuditLogEntry.objects.filter(
            action=str(Action.BENCHMARK_PUBLICITY), target_type="benchmark", target_id=benchmark.pk
        ).aggregate(t=Max("created_at"))["t"]
    )
    times.append(human_changed_at(benchmark))
    return max(t for t in times if t is not None)
