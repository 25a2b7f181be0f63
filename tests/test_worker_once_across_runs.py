"""Exactly once across runs (issue 19 item 1), with a real worker, Redis and PostgreSQL.

Two `rescore` runs started back to back on the same edition and judges need the same
pairs; a pair is in flight in at most one run at a time (scoring.models.PairLease), so the
second run waits for the pairs the first holds and reuses their grades when they land.
The loopback judge counts every request it answers: that is what would be paid.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.db.models import Count

from scoring.models import Grade, JudgeCall, ScoringRun
from scoring.runs import selectors as runs_selectors
from tests import worker_fixtures
from tests.worker_fixtures import build_benchmark, use_openai_judges

celery_worker_factory = worker_fixtures.celery_worker_factory
fake_openai_judge = worker_fixtures.fake_openai_judge

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

QUESTIONS, MODELS, JUDGES = 12, 4, 2
PAIRS = QUESTIONS * MODELS * JUDGES  # 96
ENV = {"SNAGLIST_RESCORE_CHUNK": "16", "SNAGLIST_JUDGE_KEY_H8_FAKE": "sk-test-not-a-secret"}


def _rescore(benchmark: str) -> int:
    """`rescore --format json` (no --wait) on the worker's queue; return the run id."""
    out = io.StringIO()
    call_command("rescore", "--benchmark", benchmark, "--format", "json", stdout=out)
    return json.loads(out.getvalue())["run"]


def test_two_back_to_back_rescore_runs_call_each_pair_once(
    celery_worker_factory, fake_openai_judge
):
    fake_openai_judge.delay = 0.3
    data = build_benchmark(
        n_questions=QUESTIONS, n_models=MODELS, grade_original=False, name="once-across"
    )
    use_openai_judges(data.judges, fake_openai_judge, concurrency=8)
    worker = celery_worker_factory(**ENV)
    from config.celery import app

    default_queue = app.conf.task_default_queue
    app.conf.task_default_queue = worker.queue  # `rescore` sends to the worker's queue
    try:
        first = _rescore(data.benchmark.name)
        second = _rescore(data.benchmark.name)
        runs = [worker.wait_for_run(r, timeout=120) for r in (first, second)]
    finally:
        app.conf.task_default_queue = default_queue
    grades = Grade.objects.filter(key_entry__edition=data.original).count()
    ledgers = [runs_selectors.ledger_summary(r) for r in runs]
    print(
        f"\ntwo back-to-back rescore runs, {PAIRS} pairs each needed: judge requests "
        f"{fake_openai_judge.requests}, answered {fake_openai_judge.calls}, grades stored "
        f"{grades}; run {first}: {ledgers[0]}; run {second}: {ledgers[1]}; "
        f"states {[(r.status, r.needed, r.graded, r.reused) for r in runs]}"
    )
    assert grades == PAIRS
    assert fake_openai_judge.requests == PAIRS  # each pair called once, across both runs
    assert JudgeCall.objects.filter(outcome=JudgeCall.Outcome.OK).count() == PAIRS
    assert not (
        JudgeCall.objects.values("response_id", "judge_id", "key_entry_id", "prompt_version")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .exists()
    )
    assert [r.status for r in runs] == ["complete", "complete"]
    # the second run graded what the first had not claimed and reused the rest
    assert runs[0].graded + runs[1].graded == PAIRS
    assert runs[1].reused + runs[1].graded == PAIRS
    assert all(ledger["paid_twice"] == 0 for ledger in ledgers)
    assert ScoringRun.objects.count() == 2
