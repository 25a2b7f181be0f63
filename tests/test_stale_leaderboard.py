"""A failed or cancelled re-scoring run marks the edition's leaderboard stale (issue 5).

Grades a failed run did write are real grades and are shown; what the page, the JSON
download, the API and `leaderboard --format json` must say is that the figures do not yet
reflect the pairs still lacking a grade (`stale`, `stale_reason`). A later complete run
clears it. Eager Celery (the zero set-up default): `scoring.run_start` runs in-process.
"""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone

from questions.errors import InvalidTransitionError
from scoring.board.views import board_staleness
from scoring.models import Grade, RunItem, ScoringRun
from scoring.runs import services
from scoring.runs.services import backends
from scoring.runs.tasks import run_start
from tests.test_leaderboard import _private_cache  # noqa: F401 - autouse, locmem cache
from tests.worker_fixtures import build_benchmark, publish_correction

pytestmark = pytest.mark.django_db

NAME = "stale-demo"


@pytest.fixture
def signed_in(client):
    client.force_login(User.objects.create_user("viewer", password="x-very-long-pass-1"))
    return client


@pytest.fixture
def corrected():
    """6 questions x 3 models graded by j1, j2 against `original`; corrected-1 fixes Q001."""
    data = build_benchmark(
        n_questions=6, n_models=3, grade_original=True, name=NAME, with_auditors=False
    )
    data.corrected = publish_correction(data)
    return data


def _cli_json(edition: str) -> dict:
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "leaderboard",
        "--benchmark",
        NAME,
        "--edition",
        edition,
        "--format",
        "json",
        stdout=out,
        stderr=err,
    )
    return json.loads(out.getvalue())


def _views(client, edition: str) -> tuple[str, dict, dict, dict]:
    """Return (page HTML, JSON download, API document, CLI document) for an edition."""
    page = client.get(f"/leaderboard/{NAME}/?edition={edition}")
    assert page.status_code == 200
    download = client.get(f"/leaderboard/{NAME}/leaderboard.json?edition={edition}")
    api = client.get(f"/api/scoring/{NAME}/leaderboard/?edition={edition}")
    assert download.status_code == 200 and api.status_code == 200
    return page.content.decode(), json.loads(download.content), api.json(), _cli_json(edition)


def _break(judge) -> None:
    judge.backend_settings = {"strictness": "not-a-strictness"}  # refused: every pair fails
    judge.save()


def test_failed_run_marks_the_board_stale_and_a_complete_run_clears_it(signed_in, corrected):
    data = corrected
    html, download, api, cli = _views(signed_in, "corrected-1")
    assert not download["stale"] and download["stale_reason"] is None
    assert api["stale"] is False and cli["stale"] is False and "Re-scoring run" not in html
    before_original = Grade.objects.filter(key_entry__edition=data.original).count()

    _break(data.judges[1])
    run = services.scoring_run_create(edition=data.corrected, judges=data.judges, enqueue=False)
    assert run.needed == 3 * 2  # the corrected question x 3 models x 2 judges
    run_start.delay(run.pk)
    run.refresh_from_db()
    assert (run.status, run.graded, run.failed) == ("failed", 3, 3)

    html, download, api, cli = _views(signed_in, "corrected-1")
    when = timezone.localtime(run.finished_at)
    reason = (
        f"Re-scoring run {run.pk} failed at {when:%H:%M} on {when:%Y-%m-%d} "
        f"({when:%Z}); 3 of 6 pairs lack a grade — these figures do not yet reflect them."
    )
    for doc in (download, api, cli):
        assert doc["stale"] is True and doc["stale_reason"] == reason
        # one state: a run that ended owing grades leaves the figures incomplete (issue 31)
        assert (doc["complete"], doc["figures_state"]) == (False, "incomplete")
        assert doc["models"] and "questions_scored" in doc  # existing keys are all still there
    assert (
        "Incomplete figures." in html and f"Re-scoring run {run.pk} failed at {when:%H:%M}" in html
    )
    assert "3 of 6 pairs lack a grade" in html
    # nothing was half-written: grades are whole rows, the failed pairs simply have none
    assert Grade.objects.filter(run=run).count() == 3
    assert Grade.objects.filter(key_entry__edition=data.original).count() == before_original
    # the original edition's board is not affected by a run of another edition
    assert board_staleness(data.original)["stale"] is False
    err = io.StringIO()
    call_command(
        "leaderboard",
        "--benchmark",
        NAME,
        "--edition",
        "corrected-1",
        stdout=io.StringIO(),
        stderr=err,
    )
    assert err.getvalue().startswith("warning: Incomplete: 3 responses of scored questions")
    assert f"Re-scoring run {run.pk} failed at" in err.getvalue()

    data.judges[1].backend_settings = {"strictness": "strict"}
    data.judges[1].save()
    again = services.scoring_run_create(edition=data.corrected, judges=data.judges, enqueue=False)
    assert again.needed == 3  # only the failed pairs
    run_start.delay(again.pk)
    again.refresh_from_db()
    assert again.status == "complete"
    html, download, api, cli = _views(signed_in, "corrected-1")
    for doc in (download, api, cli):
        assert doc["stale"] is False and doc["stale_reason"] is None
    assert "Re-scoring run" not in html


def test_unfinished_run_marks_the_board_stale_while_it_runs(corrected):
    run = services.scoring_run_create(
        edition=corrected.corrected, judges=corrected.judges, enqueue=False
    )
    staleness = board_staleness(corrected.corrected)
    assert staleness["stale"] is True
    assert staleness["stale_reason"].startswith(f"Re-scoring run {run.pk} is pending (0 of 6")
    run_start.delay(run.pk)
    assert board_staleness(corrected.corrected) == {
        "stale": False,
        "stale_reason": None,
        "stale_run_status": None,
    }


def test_failed_run_whose_pairs_were_graded_since_is_not_stale(corrected):
    _break(corrected.judges[1])
    run = services.scoring_run_create(
        edition=corrected.corrected, judges=corrected.judges, enqueue=False
    )
    run_start.delay(run.pk)
    assert board_staleness(corrected.corrected)["stale"] is True
    # the missing grades arrive some other way (an import, another run): nothing is owed
    for item in RunItem.objects.filter(run=run, state=RunItem.State.FAILED):
        Grade.objects.create(
            response_id=item.response_id,
            judge_id=item.judge_id,
            key_entry_id=item.key_entry_id,
            grade=1,
            prompt_version="v1",
        )
    assert board_staleness(corrected.corrected)["stale"] is False


def test_cancel_stops_the_remaining_pairs_and_marks_the_board_stale(
    signed_in, monkeypatch, settings
):
    data = build_benchmark(
        n_questions=6, n_models=3, grade_original=False, name=NAME, with_auditors=False
    )
    settings.SNAGLIST_RESCORE_CHUNK = 50  # one chunk: it checks for a cancel every 10 pairs
    run = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)
    assert run.needed == 36
    real_backend = services.judge_backend
    calls = []

    class CancelAfterThree:
        """The reference judge; an admin cancels the run while its 3rd call is answered."""

        def __init__(self, judge):
            self.inner = real_backend(judge)

        def grade(self, inp):
            calls.append(1)
            if len(calls) == 3:
                services.scoring_run_cancel(run=ScoringRun.objects.get(pk=run.pk))
            return self.inner.grade(inp)

    monkeypatch.setattr(backends, "judge_backend", CancelAfterThree)
    run_start.delay(run.pk)
    run.refresh_from_db()

    assert run.status == "cancelled" and "cancelled by system" in run.error
    assert run.finished_at is not None
    # the chunk stopped at its next check (pair 10): the other 26 pairs were never called
    assert len(calls) == 10 and run.done == 10
    assert Grade.objects.filter(run=run).count() == 10
    assert RunItem.objects.filter(run=run, state=RunItem.State.PENDING).count() == 26
    # a re-sent start or chunk does nothing for a cancelled run; resuming is refused
    run_start.delay(run.pk)
    from scoring.runs.tasks import grade_chunk

    grade_chunk.delay(run.pk, services.pending_pairs(run=run))
    assert len(calls) == 10 and Grade.objects.filter(run=run).count() == 10
    with pytest.raises(InvalidTransitionError):
        services.scoring_run_resume(run=run)
    with pytest.raises(InvalidTransitionError):
        services.scoring_run_cancel(run=run)

    when = timezone.localtime(run.finished_at)
    reason = (
        f"Re-scoring run {run.pk} was cancelled at {when:%H:%M} on {when:%Y-%m-%d} "
        f"({when:%Z}); 26 of 36 pairs lack a grade — these figures do not yet reflect them."
    )
    html, download, api, cli = _views(signed_in, "original")
    for doc in (download, api, cli):
        assert doc["stale"] is True and doc["stale_reason"] == reason
        # one state: a run that ended owing grades leaves the figures incomplete (issue 31)
        assert (doc["complete"], doc["figures_state"]) == (False, "incomplete")
    assert "Incomplete figures." in html and "was cancelled at" in html
