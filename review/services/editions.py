"""Key editions: the draft edition and publishing (rule 7).

Publishing commits and returns: the re-scoring of the new edition (rule 8) is asked for
in the publishing transaction (scoring.runs.services.rescore_request, an outbox row) and sent
to the workers after commit; a broker that is down delays it, never fails the publish.
"""

from __future__ import annotations

import logging

from django.db import transaction

from core.actions import Action
from core.services import audit_log
from questions import services as question_services
from questions.models import Benchmark, KeyEdition, KeyEntry
from questions.selectors import latest_published_edition
from review import permissions
from review.errors import (
    InvalidTransitionError,
)
from review.models import (
    Proposal,
)
from review.services.common import _require
from scoring.runs import services as scoring_services

logger = logging.getLogger(__name__)


def draft_edition_get_or_create(*, benchmark: Benchmark, user=None) -> KeyEdition:
    """Return the benchmark's draft key edition, opening `corrected-N` on the latest published."""
    draft = KeyEdition.objects.filter(benchmark=benchmark, status=KeyEdition.Status.DRAFT).first()
    if draft is not None:
        return draft
    parent = latest_published_edition(benchmark)
    names = set(KeyEdition.objects.filter(benchmark=benchmark).values_list("name", flat=True))
    n = 1
    while f"corrected-{n}" in names:
        n += 1
    draft = question_services.key_edition_create(
        benchmark=benchmark,
        name=f"corrected-{n}",
        parent=parent,
        note="Corrections and removals approved in review.",
        user=user,
    )
    audit_log(
        actor=user,
        action=Action.KEY_EDITION_CREATE,
        target_type="key_edition",
        target_id=draft.pk,
        target_label=f"{benchmark.name}/{draft.name}",
        benchmark_name=benchmark.name,
        after={"name": draft.name, "parent": parent.name if parent else None, "status": "draft"},
    )
    return draft


# ------------------------------------------------------------------ editions and exclusions


def key_edition_publish(*, edition: KeyEdition, user) -> KeyEdition:
    """Publish a draft key edition (editor); it is then immutable (rule 7).

    Records the affected questions (its corrections and removals) in the audit log and asks
    for the re-grading of their responses (rule 8) in the same transaction
    (`scoring.runs.services.rescore_request`: an outbox row, its task sent after commit). The
    publish never waits for the re-scoring set-up and never fails because the broker is
    down: the edition page says re-scoring is pending until a worker has started it.
    Raises NotAllowedError (not an editor) and InvalidTransitionError (already published,
    or nothing to publish).
    """
    _require(permissions.can_publish(user), "only an editor may publish a key edition")
    with transaction.atomic():
        locked = (
            KeyEdition.objects.select_for_update().select_related("benchmark").get(pk=edition.pk)
        )
        if locked.is_published():
            raise InvalidTransitionError(f"key edition {locked.name!r} is already published")
        entries = list(
            KeyEntry.objects.filter(edition=locked)
            .select_related("question")
            .order_by("question__question_id")
        )
        if not entries:
            raise InvalidTransitionError(f"key edition {locked.name!r} has no changes to publish")
        pending = Proposal.objects.filter(
            status=Proposal.Status.PENDING, item__benchmark=locked.benchmark
        ).count()
        published = question_services.key_edition_publish(edition=locked, user=user)
        affected = {
            "corrected": [e.question.question_id for e in entries if not e.removed],
            "removed": [e.question.question_id for e in entries if e.removed],
        }
        audit_log(
            actor=user,
            action=Action.KEY_EDITION_PUBLISH,
            target_type="key_edition",
            target_id=locked.pk,
            target_label=f"{locked.benchmark.name}/{locked.name}",
            benchmark_name=locked.benchmark.name,
            before={"status": "draft"},
            after={
                "status": "published",
                "parent": locked.parent.name if locked.parent_id else None,
                "affected": affected,
                "affected_question_pks": [e.question_id for e in entries],
                "rescoring_requested": True,
                "pending_proposals_left": pending,
            },
        )
        scoring_services.rescore_request(edition=locked, user=user)
    return published


def draft_preview_rescore(*, edition: KeyEdition, user):
    """Start a preview re-score of a draft key edition (editor or admin; issue 18 item 4).

    Grades, with the judges the re-score after publishing would use
    (`scoring.runs.services.pairs.active_graders`), every response that lacks a grade against
    the draft's effective entries: in practice the responses to its corrections. The
    grades are keyed to the draft's own (never altered) entries, so publishing the draft
    later reuses them and buys none again (rule 8); until it is published they count for
    no published figure (`scoring.board.impact.draft_impact` shows them as a preview).
    Returns the ScoringRun. Raises NotAllowedError (not an editor), InvalidTransitionError
    (the edition is published, has no changes, or a grade run of it is still active) and
    DomainError naming why no judge can grade.
    """
    from scoring.models import ScoringRun
    from scoring.runs.services.pairs import active_graders

    _require(permissions.can_publish(user), "only an editor may start a preview re-score")
    if edition.is_published():
        raise InvalidTransitionError(
            f"key edition {edition.name!r} is published: re-score it from the runs page"
        )
    if not KeyEntry.objects.filter(edition=edition).exists():
        raise InvalidTransitionError(f"key edition {edition.name!r} has no changes to preview")
    active = (
        ScoringRun.objects.filter(
            edition=edition,
            kind=ScoringRun.Kind.GRADE,
            status__in=(ScoringRun.Status.PENDING, ScoringRun.Status.RUNNING),
        )
        .order_by("-pk")
        .first()
    )
    if active is not None:
        raise InvalidTransitionError(
            f"a preview re-score of {edition.name!r} is already under way (run {active.pk})"
        )
    judges, _ = active_graders(edition)
    return scoring_services.scoring_run_create(
        edition=edition, judges=judges, kind=ScoringRun.Kind.GRADE, user=user
    )
