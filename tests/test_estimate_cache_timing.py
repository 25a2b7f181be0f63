"""The estimate's prompt cache against a loopback run with the vendors' cache timing
(issue 30 item 12): a prefix is readable only once the first request carrying it has been
answered, so a question's calls sent together miss together and each Anthropic one writes
the prefix; the estimate predicts that from the judge's calls in flight."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest
from django.db.models import Sum

from scoring import services
from scoring.costs import calls_cost
from scoring.estimate import estimate_run
from scoring.models import Judge, JudgeCall
from scoring.tasks import run_start
from tests.judge_server import JudgeServer, ok
from tests.test_judge_server import KEY_ENV
from tests.worker_fixtures import build_benchmark

PRICES = {
    "price_currency": "USD",
    "price_input": Decimal("3.00"),
    "price_cached_input": Decimal("0.30"),
    "price_output": Decimal("15.00"),
}
GRADE = '{"grade": 1, "rationale": "partly right", "flag": false, "flag_reason": ""}'
MODELS = 10  # responses a question: more than the calls in flight, so some read
# The judge's calls in flight (its row's `concurrency`; the backend's semaphore holds the
# loop to it, so a call goes out as soon as an earlier one is answered).
WINDOW = 4


def _run(edition, judge) -> list[JudgeCall]:
    run = services.scoring_run_create(edition=edition, judges=[judge], enqueue=False)
    run_start.delay(run.pk)
    run.refresh_from_db()
    assert (run.status, run.failed) == ("complete", 0), run.error
    return list(JudgeCall.objects.filter(run=run).order_by("id"))


@pytest.mark.django_db(transaction=True)
def test_the_predicted_cache_matches_a_run_with_four_calls_in_flight(monkeypatch, settings):
    settings.SNAGLIST_RESCORE_CHUNK = 500
    monkeypatch.setenv(KEY_ENV, "sk-cache-timing-test-not-a-secret")
    data = build_benchmark(
        n_questions=3, n_models=MODELS, n_judges=1, grade_original=False, with_auditors=False
    )
    (judge,) = data.judges
    with JudgeServer(latency=0.05) as server:
        assert server.prefix_cache.ready == "reply"  # the vendors' timing is the default
        server.cache_min_tokens = 64
        server.default = ok(GRADE)
        Judge.objects.filter(pk=judge.pk).update(
            backend="anthropic",
            model="loopback-anthropic",
            api_key_env=KEY_ENV,
            base_url=server.url,
            backend_settings={
                "max_retries": 0,
                "timeout": 5,
                "cache_min_tokens": 64,
                "concurrency": WINDOW,
            },
            prompt_version="judge-v1",
            **PRICES,
        )
        judge.refresh_from_db()
        _run(data.original, judge)  # calibrates characters a token and output a call
        Judge.objects.filter(pk=judge.pk).update(prompt_version="judge-v2")
        judge.refresh_from_db()
        estimate = estimate_run(edition=data.original, judges=[judge])
        (row,) = estimate.judges
        assert "predicted from the prompts' layout" in row.basis
        assert f"with {WINDOW} calls in flight the first {WINDOW} of a question miss" in row.basis
        calls = _run(data.original, judge)
    # The server's own record: per question, the calls sent before its first reply (at most
    # the 4 in flight; fewer when the transport hands calls over a little late) wrote the
    # prefix, the others read it: every call did one or the other.
    writes = Counter(c.key_entry_id for c in calls if c.cache_write_tokens)
    reads = Counter(c.key_entry_id for c in calls if c.cached_tokens)
    assert len(writes) == 3 and all(1 <= n <= WINDOW for n in writes.values()), writes
    assert all(writes[q] + reads[q] == MODELS for q in writes), (writes, reads)
    ledger = JudgeCall.objects.filter(pk__in=[c.pk for c in calls]).aggregate(
        i=Sum("input_tokens"), c=Sum("cached_tokens"), w=Sum("cache_write_tokens")
    )
    # The estimate's cached tokens within 10 % of the run's (its input tokens are the
    # calibrated characters a token, its prefix the rendered one's characters / that ratio).
    assert abs(row.tokens_cached - ledger["c"]) <= Decimal("0.10") * ledger["c"]
    actual = Decimal(calls_cost(JudgeCall.objects.filter(pk__in=[c.pk for c in calls]))["cost"])
    # The prediction counts the most misses the calls in flight allow (an upper bound on
    # the writes, which cost more than reads), so it errs high, by what the transport's
    # timing saved: measured -0.9 % (4 misses a question) to +3.4 % (3 and 4); the 3 % low
    # allowed is the calibrated characters a token's error. The prediction before issue 30
    # item 12 (only a question's first call misses) comes to about 0.0248 USD by hand here,
    # ~40 % low: the shared prefix is most of each prompt.
    error = (row.cost_live - actual) / actual
    assert Decimal("-0.03") <= error <= Decimal("0.08"), (row.cost_live, actual)
