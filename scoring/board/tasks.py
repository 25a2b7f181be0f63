"""The board's Celery task: `scoring.refresh_leaderboard(run_id)` warms the leaderboard (and a
draft's impact preview) of a finished re-scoring run's edition.

The run machinery sends it by name when a re-scoring run completes
(scoring.runs.services.runs.BOARD_REFRESH_TASK): the board sits above the runs. Registered name
unchanged since it lived among the runs' tasks, so queued messages still resolve.
"""

from __future__ import annotations

import logging

from celery import shared_task

from scoring.models import ScoringRun
from scoring.runs.tasks import TRANSIENT_DB_ERRORS

logger = logging.getLogger(__name__)


@shared_task(
    name="scoring.refresh_leaderboard",
    acks_late=True,
    autoretry_for=TRANSIENT_DB_ERRORS,
    retry_backoff=5,
    max_retries=3,
    soft_time_limit=600,
    time_limit=660,
)
def refresh_leaderboard(run_id: int) -> None:
    """Warm the leaderboard cache of a finished run's edition."""
    run = ScoringRun.objects.select_related("edition__benchmark").filter(pk=run_id).first()
    if run is None:
        logger.warning("scoring.refresh_leaderboard: run %s does not exist", run_id)
        return
    leaderboard_refresh(run=run)


def leaderboard_refresh(*, run: ScoringRun) -> None:
    """Compute the finished run's edition leaderboard into the cache (the board is versioned
    by its data, so this only warms it); for a draft edition (a preview re-score) its impact
    preview too (`scoring.board.impact.draft_impact`), so the editor's next view is served from
    the cache. A failure is logged, never raised."""
    try:
        from scoring.selectors import board_for_edition

        board_for_edition(run.edition)
        if not run.edition.is_published():
            from scoring.board.impact import draft_impact

            draft_impact(run.edition)
    except Exception:  # noqa: BLE001 - a cache warm-up must not undo a finished run
        logger.exception("leaderboard refresh after run %s failed", run.pk)
