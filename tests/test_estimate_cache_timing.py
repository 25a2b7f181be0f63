"""The estimate's prompt cache against a loopback run with the vendors' cache timing
(issue 30 item 12): a prefix is readable only once the first request carrying it has been
answered, so a question's calls sent together miss together and each Anthropic one writes
the prefix; the estimate predicts that from the judge's calls in flight."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest

from scoring.models import Judge, JudgeCall
from scoring.runs import services
from scoring.runs.costs import calls_cost
from scoring.runs.estimate import estimate_run
from scoring.runs.tasks import run_start
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
    # The most misses the 4 calls in flight allow (all 4 of a question out before its first
    # reply; the transport's timing saved some this time): the same ledger repriced by hand
    # with WINDOW writes and MODELS - WINDOW reads of each question's prefix (a miss writes
    # the whole marked prefix, a hit reads it).
    prefix = {c.key_entry_id: c.cache_write_tokens for c in calls if c.cache_write_tokens}
    billed_in = sum(c.input_tokens for c in calls)
    out = sum(c.output_tokens for c in calls)
    most_writes = sum(WINDOW * p for p in prefix.values())
    least_reads = sum((MODELS - WINDOW) * p for p in prefix.values())
    bound = (
        Decimal(billed_in - most_writes - least_reads) * Decimal("3.00")
        + Decimal(most_writes) * Decimal("3.00") * Decimal("1.25")
        + Decimal(least_reads) * Decimal("0.30")
        + Decimal(out) * Decimal("15.00")
    ) / Decimal(1_000_000)
    actual = Decimal(calls_cost(JudgeCall.objects.filter(pk__in=[c.pk for c in calls]))["cost"])
    assert actual <= bound.quantize(Decimal("0.000001"), "ROUND_UP")
    # The estimate predicts that bound: its cached tokens and cost within 3 % (its tokens
    # are the calibrated characters a token, its prefix the rendered one's characters / that
    # ratio); measured -0.9 % to +3.4 % against the run's actual cost, 4 and 3-4 misses a
    # question. The prediction before issue 30 item 12 (only a question's first call
    # misses) comes to about 0.0248 USD by hand here, ~40 % low: the shared prefix is most
    # of each prompt.
    assert abs(row.tokens_cached - least_reads) <= Decimal("0.03") * least_reads
    assert abs(row.cost_live - bound) <= Decimal("0.03") * bound, (row.cost_live, bound, actual)
