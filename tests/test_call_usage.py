"""Usage on every judge call (issue 20 item 1): tokens from the SDKs' usage fields, stored
on the JudgeCall ledger; unknown (NULL) where the backend reports none, never 0.

The backends are exercised with the real SDKs against tests/judge_server.py (which reports
usage as each vendor does); the ledger end to end through a re-scoring run.
"""

from __future__ import annotations

import pytest
from django.db.models import Sum

import tests.judge_server as loopback
from judges import Usage, aio
from judges.types import anthropic_usage, openai_usage
from scoring.models import JudgeCall
from scoring.runs import services
from scoring.runs.tasks import run_start
from tests.judge_server import (
    GOOD_GRADE,
    JudgeServer,
    count_tokens,
    cut_off,
    no_usage,
    ok,
    prompt_tokens,
)
from tests.test_judge_server import _MADE, INPUT, KEY_ENV, SDKS, backend
from tests.worker_fixtures import build_benchmark

judge_server = loopback.judge_server
GRADE_1 = '{"grade": 1, "rationale": "partly right", "flag": false, "flag_reason": ""}'


@pytest.fixture
def secret_env(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-usage-test-not-a-secret")


@pytest.fixture(params=["sync", "async"])
def mode(request):
    """grade() or agrade() on the judge loop; the backends made are closed afterwards."""
    yield request.param
    while _MADE:
        _MADE.pop().close()


def grade(b, mode):
    return aio.run(b.agrade(INPUT), timeout=30) if mode == "async" else b.grade(INPUT)


# -- the vendors' usage shapes -----------------------------------------------------------


def test_openai_usage_reads_prompt_completion_and_cached_tokens():
    usage = openai_usage(
        {
            "prompt_tokens": 1200,
            "completion_tokens": 45,
            "prompt_tokens_details": {"cached_tokens": 1024},
        }
    )
    assert usage == Usage(input_tokens=1200, output_tokens=45, cached_tokens=1024)
    assert usage.cache_write_tokens is None  # OpenAI reports no cache writes: unknown


def test_openai_usage_without_details_leaves_cached_unknown_not_zero():
    usage = openai_usage({"prompt_tokens": 10, "completion_tokens": 3})
    assert usage == Usage(input_tokens=10, output_tokens=3, cached_tokens=None)
    assert openai_usage(None) is None
    assert openai_usage({"prompt_tokens": "ten"}).input_tokens is None


def test_anthropic_usage_adds_cache_reads_and_writes_to_input():
    usage = anthropic_usage(
        {
            "input_tokens": 100,
            "output_tokens": 40,
            "cache_read_input_tokens": 900,
            "cache_creation_input_tokens": 50,
        }
    )
    # Anthropic's input_tokens leaves out the cached part: 100 + 900 + 50 billed as input.
    assert usage == Usage(
        input_tokens=1050, output_tokens=40, cached_tokens=900, cache_write_tokens=50
    )
    assert anthropic_usage({"input_tokens": 7, "output_tokens": 2}) == Usage(7, 2, 0, 0)
    assert anthropic_usage(None) is None


def test_a_sum_with_an_unknown_side_is_unknown():
    assert Usage(10, 5, 0, None) + Usage(20, 6, 4, None) == Usage(30, 11, 4, None)


def test_loopback_token_count_by_hand():
    # "Hello" "," "world" "!" ; "ration" "ale" ; "1100" "mm" "."
    assert count_tokens("Hello, world!") == 4
    assert count_tokens("rationale") == 2
    assert count_tokens("1100 mm.") == 3
    # one message: 3 (reply priming) + 4 (message overhead) + 4 (text)
    assert prompt_tokens({"messages": [{"role": "user", "content": "Hello, world!"}]}) == 11


# -- the backends, through the SDKs -----------------------------------------------------


@pytest.mark.parametrize("sdk", SDKS)
def test_a_reply_carries_the_usage_the_api_reported(
    sdk, judge_server: JudgeServer, secret_env, mode
):
    judge_server.script(ok(GOOD_GRADE))
    result = grade(backend(sdk, judge_server), mode)
    billed_in = prompt_tokens(judge_server.requests[0]["json"])
    assert billed_in > 100  # the rendered judge prompt, not a placeholder
    assert result.usage.input_tokens == billed_in
    assert result.usage.output_tokens == count_tokens(GOOD_GRADE)
    assert result.usage.cached_tokens == 0
    assert result.usage.cache_write_tokens == (0 if sdk == "anthropic" else None)


@pytest.mark.parametrize("sdk", SDKS)
def test_a_cut_off_reply_asked_again_counts_both_calls(sdk, judge_server, secret_env, mode):
    judge_server.script(cut_off('{"grade": 2, "rationale": "the fig'), ok(GOOD_GRADE))
    result = grade(backend(sdk, judge_server), mode)
    assert len(judge_server.requests) == 2
    both_in = sum(prompt_tokens(r["json"]) for r in judge_server.requests)
    assert result.usage.input_tokens == both_in
    assert result.usage.output_tokens == count_tokens('{"grade": 2, "rationale": "the fig') + (
        count_tokens(GOOD_GRADE)
    )


@pytest.mark.parametrize("sdk", SDKS)
def test_a_reply_without_usage_gives_unknown_usage(sdk, judge_server, secret_env, mode):
    judge_server.script(no_usage(GOOD_GRADE))
    result = grade(backend(sdk, judge_server), mode)
    assert result.grade == 2
    assert result.usage is None


# -- the ledger ---------------------------------------------------------------------------


@pytest.fixture
def data(monkeypatch, judge_server: JudgeServer):
    monkeypatch.setenv(KEY_ENV, "sk-usage-test-not-a-secret")
    built = build_benchmark(
        n_questions=4, n_models=3, grade_original=False, with_auditors=False, name="usage"
    )
    return built


def _point_at(judge, server: JudgeServer, sdk: str) -> None:
    judge.backend = sdk
    judge.model = f"loopback-{sdk}"
    judge.base_url = server.url + "/v1" if sdk == "openai" else server.url
    judge.api_key_env = KEY_ENV
    judge.backend_settings = {"max_retries": 0, "timeout": 5}
    judge.save()


@pytest.mark.django_db(transaction=True)
def test_every_answered_call_stores_its_tokens_on_the_ledger(data, judge_server):
    _point_at(data.judges[0], judge_server, "openai")
    _point_at(data.judges[1], judge_server, "anthropic")
    judge_server.default = ok(GRADE_1)
    run = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)
    run_start.delay(run.pk)
    run.refresh_from_db()
    assert (run.status, run.graded) == ("complete", 24)

    calls = JudgeCall.objects.filter(run=run)
    assert calls.count() == 24
    assert not calls.filter(input_tokens__isnull=True).exists()
    totals = calls.aggregate(i=Sum("input_tokens"), o=Sum("output_tokens"), c=Sum("cached_tokens"))
    assert totals["i"] == sum(prompt_tokens(r["json"]) for r in judge_server.requests)
    assert totals["o"] == 24 * count_tokens(GRADE_1)
    assert totals["c"] == 0
    # Anthropic reports cache writes (0 here); OpenAI reports none: unknown.
    assert set(calls.filter(judge=data.judges[1]).values_list("cache_write_tokens", flat=True)) == {
        0
    }
    assert set(calls.filter(judge=data.judges[0]).values_list("cache_write_tokens", flat=True)) == {
        None
    }


@pytest.mark.django_db(transaction=True)
def test_a_backend_that_reports_no_usage_leaves_the_ledger_unknown_not_zero(data, judge_server):
    _point_at(data.judges[0], judge_server, "openai")
    judge_server.default = no_usage(GRADE_1)
    run = services.scoring_run_create(edition=data.original, judges=data.judges[:1], enqueue=False)
    run_start.delay(run.pk)
    calls = JudgeCall.objects.filter(run=run)
    assert calls.count() == 12
    assert (
        calls.filter(outcome="ok", input_tokens__isnull=True, output_tokens__isnull=True).count()
        == 12
    )


@pytest.mark.django_db(transaction=True)
def test_the_offline_reference_judge_has_unknown_usage(data):
    run = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)
    run_start.delay(run.pk)
    calls = JudgeCall.objects.filter(run=run)
    assert calls.count() == 24
    assert not calls.filter(input_tokens__isnull=False).exists()
    assert not calls.filter(output_tokens=0).exists()


@pytest.mark.django_db(transaction=True)
def test_an_audit_call_stores_its_tokens_too(monkeypatch, judge_server, settings):
    settings.SNAGLIST_AUDIT_FOLLOW_UP_TASK = ""  # no triage after this audit run
    from scoring.models import ScoringRun

    monkeypatch.setenv(KEY_ENV, "sk-usage-test-not-a-secret")
    built = build_benchmark(n_questions=3, n_models=1, grade_original=False, name="usage-audit")
    auditor = built.auditors[0]
    _point_at(auditor, judge_server, "anthropic")
    reply = '{"verdict": "correct", "rationale": "the key matches the cited table"}'
    judge_server.default = ok(reply)
    run = services.scoring_run_create(
        edition=built.original,
        judges=[auditor],
        kind=ScoringRun.Kind.AUDIT,
        enqueue=False,
    )
    run_start.delay(run.pk)
    calls = JudgeCall.objects.filter(run=run)
    assert calls.count() == 3
    totals = calls.aggregate(i=Sum("input_tokens"), o=Sum("output_tokens"))
    assert totals["i"] == sum(prompt_tokens(r["json"]) for r in judge_server.requests)
    assert totals["o"] == 3 * count_tokens(reply)
