"""Re-scoring through a real Celery worker over Redis and PostgreSQL (not eager).

Exactly one grade per (response, judge, key entry, prompt version) after a normal run, a
duplicate delivery, a worker SIGKILLed twice mid-run and resumed, and a judge answering
429 for a while; the judge-call ledger shows no pair paid twice except calls in flight at
a kill, which are counted.
"""

from __future__ import annotations

import time

import pytest
from django.db.models import Count

from scoring.models import Grade, JudgeCall, ScoringRun
from scoring.runs import selectors as runs_selectors
from scoring.runs import services
from tests import worker_fixtures
from tests.worker_fixtures import build_benchmark, publish_correction, use_openai_judges

# Fixtures shared with the end-to-end tests (tests/worker_fixtures.py).
celery_worker_factory = worker_fixtures.celery_worker_factory
fake_openai_judge = worker_fixtures.fake_openai_judge

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _assert_one_grade_per_pair(run: ScoringRun, expected: int) -> None:
    per_pair = (
        Grade.objects.values("response_id", "judge_id", "key_entry_id", "prompt_version")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    assert not per_pair.exists()
    assert Grade.objects.filter(run=run).count() == expected
    ledger = runs_selectors.ledger_summary(run)
    assert ledger["ok"] == expected and ledger["paid_twice"] == 0 and ledger["in_flight"] == 0


def test_real_worker_rescores_with_reference_judges_exactly_once(celery_worker_factory):
    worker = celery_worker_factory(SNAGLIST_RESCORE_CHUNK="4")
    data = build_benchmark(n_questions=6, n_models=3, grade_original=False)
    corrected = publish_correction(data)
    run = services.scoring_run_create(edition=corrected, judges=data.judges, enqueue=False)
    assert run.needed == 6 * 3 * 2

    worker.send("scoring.run_start", run.pk)
    run = worker.wait_for_run(run.pk)

    assert (run.status, run.done, run.graded, run.failed) == ("complete", 36, 36, 0), worker.log()
    _assert_one_grade_per_pair(run, 36)
    assert set(
        Grade.objects.filter(run=run).values_list("key_entry__edition__name", flat=True)
    ) == {"original", "corrected-1"}
    # the reference judges differ in strictness: same inputs, deterministic grades
    assert Grade.objects.filter(run=run, grade__isnull=True).count() == run.unparsed

    # a duplicate delivery of the start and of a chunk writes nothing and calls nothing
    calls = JudgeCall.objects.count()
    worker.send("scoring.run_start", run.pk)
    worker.send("scoring.grade_chunk", run.pk, [i.pair() for i in run.items.all()[:4]])
    time.sleep(1.5)
    assert JudgeCall.objects.count() == calls and Grade.objects.count() == 36


def test_worker_killed_twice_mid_run_then_resumed_grades_each_pair_once(
    celery_worker_factory, fake_openai_judge
):
    fake_openai_judge.delay = 0.15
    env = {
        "SNAGLIST_RESCORE_CHUNK": "3",
        "SNAGLIST_PAIR_LEASE_SECONDS": "2",
        "SNAGLIST_JUDGE_KEY_H8_FAKE": "sk-test-not-a-secret",
    }
    data = build_benchmark(n_questions=6, n_models=3, grade_original=False)
    use_openai_judges(data.judges, fake_openai_judge)
    run = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)
    worker = celery_worker_factory(**env)
    worker.send("scoring.run_start", run.pk)

    worker.wait_for_run(run.pk, until=lambda r: r.done >= 8)
    worker.kill()
    worker.start()
    worker.wait_for_run(run.pk, until=lambda r: r.done >= 20, timeout=90)
    worker.kill()
    killed_at = ScoringRun.objects.get(pk=run.pk).done
    assert killed_at < 36
    worker.start()
    worker.send("scoring.run_start", run.pk)  # what `rescore --resume` sends
    run = worker.wait_for_run(run.pk, timeout=120)

    assert (run.status, run.graded, run.failed, run.done) == ("complete", 36, 0, 36), worker.log()
    _assert_one_grade_per_pair(run, 36)
    ledger = runs_selectors.ledger_summary(run)
    # only calls in flight at a kill were paid twice, and they are counted
    assert fake_openai_judge.calls <= 36 + ledger["in_flight_at_kill"]
    assert (
        ledger["calls"] == 36 + ledger["in_flight_at_kill"] + ledger["retries"] + ledger["failed"]
    )
    print(f"SIGKILL x2: ledger {ledger}, judge answered {fake_openai_judge.calls} calls")


def test_judge_answering_429_for_a_while_still_completes(celery_worker_factory, fake_openai_judge):
    env = {
        "SNAGLIST_RESCORE_CHUNK": "4",
        "SNAGLIST_RESCORE_RETRY_BASE_SECONDS": "0.3",
        "SNAGLIST_RESCORE_MAX_RETRIES": "12",
        "SNAGLIST_JUDGE_KEY_H8_FAKE": "sk-test-not-a-secret",
    }
    data = build_benchmark(n_questions=4, n_models=3, grade_original=False)
    use_openai_judges(data.judges, fake_openai_judge)
    run = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)
    worker = celery_worker_factory(**env)
    fake_openai_judge.reject_first = 30  # every pair's first calls, whatever the timing
    fake_openai_judge.busy_until = time.monotonic() + 3.0
    worker.send("scoring.run_start", run.pk)
    run = worker.wait_for_run(run.pk, timeout=120)

    assert (run.status, run.graded, run.failed) == ("complete", 24, 0), worker.log()
    assert fake_openai_judge.rejected > 0 and fake_openai_judge.calls == 24
    _assert_one_grade_per_pair(run, 24)
    assert runs_selectors.ledger_summary(run)["retries"] > 0
