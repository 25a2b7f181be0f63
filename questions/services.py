"""Every write to the data layer outside a bundle import (conventions.md: services write).

Each function is keyword-only, runs in one transaction and raises a `questions.errors`
domain error for an illegal action. Methodology rule 7 (published key editions are
immutable) is enforced here in Python and, underneath, by database triggers (migrations
0002 and 0004), so a bug here still cannot change a published row.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from core.actions import Action
from core.roles import Role, has_role
from core.services import audit_log
from questions.errors import (
    DomainError,
    ImmutableEditionError,
    InvalidTransitionError,
    NotFoundError,
)
from questions.models import (
    AuditExclusion,
    Benchmark,
    KeyEdition,
    KeyEntry,
    Question,
    SourceDocument,
)


def key_edition_create(
    *,
    benchmark: Benchmark,
    name: str,
    parent: KeyEdition | None,
    note: str = "",
    user: Any = None,
) -> KeyEdition:
    """Open a draft key edition on top of `parent` (None only for `original`).

    A benchmark has at most one draft (constraint `edition_one_draft_per_benchmark`);
    raises InvalidTransitionError when one is open or the name is taken, DomainError when
    `parent` is an unpublished edition or belongs to another benchmark.
    """
    with transaction.atomic():
        Benchmark.objects.select_for_update().get(pk=benchmark.pk)
        if parent is not None:
            if parent.benchmark_id != benchmark.pk:
                raise DomainError("the parent edition belongs to another benchmark")
            if not parent.is_published():
                raise DomainError(f"parent edition {parent.name!r} is not published")
        draft = KeyEdition.objects.filter(benchmark=benchmark, status=KeyEdition.Status.DRAFT)
        if draft.exists():
            raise InvalidTransitionError(
                f"benchmark {benchmark.name!r} already has a draft edition "
                f"{draft.first().name!r}: publish it first"
            )
        if KeyEdition.objects.filter(benchmark=benchmark, name=name).exists():
            raise InvalidTransitionError(f"an edition named {name!r} already exists")
        return KeyEdition.objects.create(benchmark=benchmark, name=name, parent=parent, note=note)


def key_edition_publish(*, edition: KeyEdition, user: Any = None) -> KeyEdition:
    """Publish a draft edition (draft -> published, published_at = now); it is then frozen.

    Raises InvalidTransitionError when the edition is already published. The row is
    locked first so two editors publishing at once cannot both succeed.
    """
    with transaction.atomic():
        locked = KeyEdition.objects.select_for_update().get(pk=edition.pk)
        if locked.status != KeyEdition.Status.DRAFT:
            raise InvalidTransitionError(f"key edition {locked.name!r} is already published")
        locked.status = KeyEdition.Status.PUBLISHED
        locked.published_at = timezone.now()
        locked.published_by = user if getattr(user, "pk", None) else None
        locked.save(update_fields=["status", "published_at", "published_by"])
    edition.status, edition.published_at = locked.status, locked.published_at
    edition.published_by = locked.published_by
    return locked


def key_entry_create(
    *,
    edition: KeyEdition,
    question: Question,
    answer: str = "",
    citation_doc_id: str = "",
    citation_locator: str = "",
    citation_quote: str = "",
    has_citation: bool | None = None,
    removed: bool = False,
    reason: str = "",
    note: str = "",
) -> KeyEntry:
    """Add a question's entry (a correction, or a removal with `removed=True`) to a draft.

    `has_citation` defaults to "a doc_id was given". The doc_id must name a source
    document of the benchmark. Raises ImmutableEditionError for a published edition,
    DomainError for a question of another benchmark, a duplicate entry or a bad reason,
    NotFoundError for an unknown document.
    """
    if reason and reason not in KeyEntry.Reason.values:
        raise DomainError(f"unknown reason {reason!r}: one of {', '.join(KeyEntry.Reason.values)}")
    if has_citation is None:
        has_citation = bool(citation_doc_id)
    with transaction.atomic():
        locked = KeyEdition.objects.select_for_update().get(pk=edition.pk)
        if locked.is_published():
            raise ImmutableEditionError(
                f"key edition {locked.name!r} is published: no entry may be added to it"
            )
        if question.benchmark_id != locked.benchmark_id:
            raise DomainError("the question belongs to another benchmark")
        if KeyEntry.objects.filter(edition=locked, question=question).exists():
            raise DomainError(
                f"edition {locked.name!r} already has an entry for {question.question_id}"
            )
        document = None
        if has_citation and citation_doc_id:
            document = SourceDocument.objects.filter(
                benchmark_id=locked.benchmark_id, doc_id=citation_doc_id
            ).first()
            if document is None:
                raise NotFoundError(f"no source document {citation_doc_id!r} in this benchmark")
        return KeyEntry.objects.create(
            edition=locked,
            question=question,
            answer=answer,
            citation_document=document,
            citation_doc_id=citation_doc_id if has_citation else "",
            citation_locator=citation_locator if has_citation else "",
            citation_quote=citation_quote if has_citation else "",
            has_citation=has_citation,
            removed=removed,
            reason=reason,
            note=note,
        )


def key_entry_exclude(*, entry: KeyEntry, reason: str) -> tuple[AuditExclusion, bool]:
    """Take a key entry out of scoring (rule 4, both auditors adverse) with a reason.

    Applies to every edition whose effective entry for the question is `entry` (see
    AuditExclusion). Returns (exclusion, created); idempotent: excluding an excluded entry
    keeps its first reason and time (created False). Raises DomainError for an empty or
    over-long reason (50 characters at most).
    """
    reason = (reason or "").strip()
    if not reason:
        raise DomainError("an exclusion needs a reason")
    if len(reason) > AuditExclusion._meta.get_field("reason").max_length:
        raise DomainError("the exclusion reason is too long (50 characters at most)")
    # get_or_create on the one-to-one key: two at once give one row (the loser re-reads it).
    return AuditExclusion.objects.get_or_create(key_entry=entry, defaults={"reason": reason})


def benchmark_publicity_set(
    *, benchmark: Benchmark, user: Any, public: bool, credit_reviewers: bool
) -> Benchmark:
    """Turn the public results site of `benchmark` on or off; admins only (issue 22).

    `public` lets anonymous visitors read the site under /public/<benchmark>/ (published
    editions only: leaderboards, report, edition history, errata, downloads);
    `credit_reviewers` names the people who published key editions there. Logs one
    `benchmark.publicity` entry with the before/after flags in the same transaction; a call
    that changes nothing logs nothing. Raises PermissionError when `user` lacks the admin
    role (core.roles).
    """
    if user is None or not has_role(user, Role.ADMIN):
        raise PermissionError("only an admin may change who can read a benchmark's results")
    with transaction.atomic():
        locked = Benchmark.objects.select_for_update().get(pk=benchmark.pk)
        before = {"is_public": locked.is_public, "credit_reviewers": locked.credit_reviewers}
        after = {"is_public": bool(public), "credit_reviewers": bool(credit_reviewers)}
        if before != after:
            locked.is_public, locked.credit_reviewers = (
                after["is_public"],
                after["credit_reviewers"],
            )
            locked.save(update_fields=["is_public", "credit_reviewers"])
            audit_log(
                actor=user,
                action=Action.BENCHMARK_PUBLICITY,
                target_type="benchmark",
                target_id=locked.pk,
                target_label=locked.name,
                benchmark_name=locked.name,
                before=before,
                after=after,
            )
    benchmark.is_public, benchmark.credit_reviewers = locked.is_public, locked.credit_reviewers
    return locked
