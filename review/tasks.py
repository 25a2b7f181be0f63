"""Celery tasks of the review workflow: ids in, services do the work.

- `review.triage_after_audit(run_id)`: the follow-up of every key-audit run (methodology
  rule 4): when the run has finished, triage its edition, so the auditors' verdicts become
  exclusions and review items without anyone running `triage` by hand. Scoring sends it
  with the run id when the run closes (`ScoringRun.on_complete`); which task follows an
  audit is set by the composition root (settings.SNAGLIST_AUDIT_FOLLOW_UP_TASK), so scoring
  never imports review (docs/architecture.md).
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import InterfaceError, OperationalError

from review.triage import triage_run
from scoring.models import ScoringRun

logger = logging.getLogger(__name__)


@shared_task(
    name="review.triage_after_audit",
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=5,
    soft_time_limit=600,
    time_limit=660,
)
def triage_after_audit(run_id: int) -> dict | None:
    """Triage the edition of finished key-audit run `run_id`; return triage's counts.

    Runs for a complete run and for a failed one (the verdicts it did get count; the pairs
    that failed are asked again by the next audit run, whose triage follows it too).
    Returns None, with a log line, when the run is gone, is not an audit run, or was
    cancelled. Triage is idempotent (an excluded entry stays excluded once; evidence is
    fingerprinted), so a duplicate delivery changes nothing.
    """
    run = ScoringRun.objects.select_related("benchmark", "edition").filter(pk=run_id).first()
    if run is None:
        logger.warning("review.triage_after_audit: run %s does not exist", run_id)
        return None
    if run.kind != ScoringRun.Kind.AUDIT:
        logger.warning("review.triage_after_audit: run %s is not a key-audit run", run_id)
        return None
    if run.status not in (ScoringRun.Status.COMPLETE, ScoringRun.Status.FAILED):
        logger.info("review.triage_after_audit: run %s is %s; no triage", run_id, run.status)
        return None
    counts = triage_run(benchmark=run.benchmark, edition=run.edition)
    logger.info(
        "review.triage_after_audit: run %s: %s excluded, %s review items created",
        run_id,
        counts["excluded"],
        counts["items_created"],
    )
    return counts
