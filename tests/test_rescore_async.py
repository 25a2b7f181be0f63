"""Re-scoring through the event-loop path (model judges): the same rules as the threaded path.

Grade runs whose judges are openai/anthropic backends call them as coroutines on the
process's judge loop (judges.aio) while the task's thread writes the ledger, grades
and counters in batches (scoring.runs.services.aio_transport.grade_on_loop). Here the real SDKs talk to the loopback
judge server over HTTP, tasks run eagerly, and the database is PostgreSQL with committed
transactions, so a second thread can cancel a run while it is being graded.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db.models import Count

import tests.judge_server as loopback
from scoring.models import Grade, JudgeCall, RunItem, ScoringRun
from scoring.runs import selectors as runs_selectors
from scoring.runs import services
from scoring.runs.services import aio_transport
from scoring.runs.tasks import run_start
from tests.judge_server import JudgeServer, ok, status
from tests.worker_fixtures import build_benchmark, publish_correction

pytestmark = pytest.mark.django_db(transaction=True)

judge_server = loopback.judge_server
KEY_ENV = "SNAGLIST_JUDGE_KEY_ASYNC_TEST"
GRADE_1 = '{"grade": 1, "rationale": "partly right", "flag": false, "flag_reason": ""}'


@pytest.fixture
def data(monkeypatch, judge_server: JudgeServer):
    """6 questions x 3 models, two openai judges pointed at the loopback server."""
    monkeypatch.setenv(KEY_ENV, "sk-async-test-not-a-secret")
    built = build_benchmark(
        n_questions=6, n_models=3, grade_original=False, with_auditors=False, name="async-path"
    )
    for n, judge in enumerate(built.judges):
        judge.backend = "openai"
        judge.model = f"loopback-{n}"
        judge.base_url = judge_server.url + "/v1"
        judge.api_key_env = KEY_ENV
        judge.backend_settings = {
            "concurrency": 4,
            "max_retries": 1,
            "base_delay": 0.01,
            "max_delay": 0.05,
            "timeout": 5,
        }
        judge.save()
    return built


def _one_grade_per_pair() -> bool:
    return not (
        Grade.objects.values("response_id", "judge_id", "key_entry_id", "prompt_version")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .exists()
    )


def test_the_event_loop_path_is_the_one_model_judges_take(data):
    judge = data.judges[0]
    assert aio_transport.async_ready([services.judge_backend(judge)])


def test_after_a_one_question_correction_it_calls_exactly_models_x_judges(data, judge_server):
    judge_server.default = ok(GRADE_1)
    first = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)
    run_start.delay(first.pk)
    first.refresh_from_db()
    assert (first.status, first.graded, first.failed) == ("complete", 36, 0)
    assert len(judge_server.requests) == 36

    judge_server.reset()
    judge_server.default = ok(GRADE_1)
    corrected = publish_correction(data)
    run = services.scoring_run_create(edition=corrected, judges=data.judges, enqueue=False)
    run_start.delay(run.pk)
    run.refresh_from_db()

    assert (run.status, run.needed, run.graded, run.failed) == ("complete", 6, 6, 0)
    assert len(judge_server.requests) == 3 * 2  # models x judges, nothing else re-bought
    assert Grade.objects.filter(run=run, grade=1).count() == 6
    assert runs_selectors.ledger_summary(run)["ok"] == 6
    assert JudgeCall.objects.filter(run=run).count() == 6
    assert _one_grade_per_pair()
    # a duplicate delivery of the whole run calls nothing more
    run_start.delay(run.pk)
    assert len(judge_server.requests) == 6


def test_unparsed_replies_are_counted_not_scored_zero(data, judge_server):
    judge_server.default = ok("I would rather not grade this.")
    run = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)
    run_start.delay(run.pk)
    run.refresh_from_db()
    assert (run.status, run.graded, run.unparsed, run.failed) == ("complete", 36, 36, 0)
    assert Grade.objects.filter(run=run, grade__isnull=True).count() == 36
    assert not Grade.objects.filter(run=run, grade=0).exists()


def test_a_judge_that_stays_down_fails_its_pairs_after_the_retries(data, judge_server, settings):
    settings.SNAGLIST_RESCORE_MAX_RETRIES = 1
    settings.SNAGLIST_RESCORE_RETRY_BASE_SECONDS = 0.01  # eager mode now backs off (issue 19)
    judge_server.default = status(500)
    run = services.scoring_run_create(edition=data.original, judges=data.judges[:1], enqueue=False)
    run_start.delay(run.pk)
    run.refresh_from_db()

    assert (run.status, run.done, run.graded, run.failed) == ("failed", 18, 0, 18)
    # per pair: 2 deliveries (first + 1 chunk retry) x 2 attempts (first + 1 judge retry)
    assert len(judge_server.requests) == 18 * 2 * 2
    outcomes = dict(
        JudgeCall.objects.filter(run=run).values_list("outcome").annotate(n=Count("id"))
    )
    assert outcomes == {JudgeCall.Outcome.RETRY: 18, JudgeCall.Outcome.FAILED: 18}
    assert not Grade.objects.filter(run=run).exists()


def test_cancel_stops_new_calls_and_settles_the_ones_in_flight(data, judge_server):
    # 8 calls in flight (2 judges x concurrency 4) of 0.2 s: the 36 would take ~0.9 s, and
    # the chunk checks for a cancel every STOP_CHECK_SECONDS (0.5 s)
    judge_server.latency = 0.2
    judge_server.default = ok(GRADE_1)
    run = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)

    def cancel_after_a_few_calls() -> None:
        from django.db import connection

        try:
            while len(judge_server.requests) < 6:
                time.sleep(0.005)
            services.scoring_run_cancel(run=ScoringRun.objects.get(pk=run.pk))
        finally:
            connection.close()

    canceller = threading.Thread(target=cancel_after_a_few_calls)
    canceller.start()
    run_start.delay(run.pk)
    canceller.join(10)
    run.refresh_from_db()

    called = len(judge_server.requests)
    assert run.status == "cancelled"
    assert 6 <= called < 36  # it stopped submitting soon after the cancel
    # every call that went out was settled: a grade and an "ok" ledger row each
    assert Grade.objects.filter(run=run).count() == called == run.graded
    assert runs_selectors.ledger_summary(run)["ok"] == called
    assert not JudgeCall.objects.filter(run=run, outcome=JudgeCall.Outcome.STARTED).exists()
    # the pairs never called are pending and not leased: a resume can take them
    pending = RunItem.objects.filter(run=run, state=RunItem.State.PENDING)
    assert pending.count() == 36 - called
    assert not pending.filter(lease_until__isnull=False).exists()


def test_a_reply_holding_nul_characters_is_stored_with_replacement_characters(data, judge_server):
    """PostgreSQL text cannot hold NUL (U+0000). A judge whose reply holds one, raw (decoded
    from the API's JSON) or escaped inside its own JSON, is graded all the same: the NUL is
    stored as U+FFFD, the run completes and nothing is paid twice."""
    judge_server.default = ok(
        '{"grade": 2, "rationale": "the \\u0000 figure", "flag": true, '
        '"flag_reason": "key \\u0000 out of date"}\u0000'
    )
    run = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)
    run_start.delay(run.pk)
    run.refresh_from_db()
    assert (run.status, run.graded, run.unparsed, run.failed) == ("complete", 36, 0, 0)
    assert len(judge_server.requests) == 36
    grade = Grade.objects.filter(run=run).first()
    assert (grade.grade, grade.rationale, grade.flag_reason) == (
        2,
        "the \ufffd figure",
        "key \ufffd out of date",
    )
    assert grade.raw_output.endswith("}\ufffd") and "\x00" not in grade.raw_output
    assert _one_grade_per_pair()


def test_an_error_body_holding_a_nul_character_fails_its_pairs_cleanly(
    data, judge_server, settings
):
    """The failure message of an HTTP error whose body holds NUL is stored (on the run items
    and the ledger) with U+FFFD in its place: the pairs fail after the retries, as for any
    judge that stays down, instead of the batch failing to write."""
    settings.SNAGLIST_RESCORE_MAX_RETRIES = 1
    settings.SNAGLIST_RESCORE_RETRY_BASE_SECONDS = 0.01  # eager mode now backs off (issue 19)
    judge_server.default = status(500, message="upstream \x00 broke")
    run = services.scoring_run_create(edition=data.original, judges=data.judges[:1], enqueue=False)
    run_start.delay(run.pk)
    run.refresh_from_db()

    assert (run.status, run.done, run.graded, run.failed) == ("failed", 18, 0, 18)
    assert len(judge_server.requests) == 18 * 2 * 2
    details = set(RunItem.objects.filter(run=run).values_list("detail", flat=True))
    assert len(details) == 1 and "upstream \ufffd broke" in details.pop()
    assert all(
        "upstream \ufffd broke" in d
        for d in JudgeCall.objects.filter(run=run).values_list("detail", flat=True)
    )
