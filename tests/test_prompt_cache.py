"""Prompt caching (issue 20 item 7): judge-v2 puts everything a question's responses share
first and the response last; the Anthropic backend marks that prefix for caching, OpenAI's
caches it unmarked; the loopback server emulates both caches; a run grades question by
question and its ledger and costs carry the cached tokens."""

from __future__ import annotations

from decimal import Decimal

import pytest

import tests.judge_server as loopback
from judges import GradingInput, JudgeConfig, JudgeConfigError, aio, render_judge_prompt
from judges.prompts import (
    RELEASED_SHA256,
    check_version,
    load_template,
    released_versions,
    template_sha256,
)
from scoring.models import Judge, JudgeCall, RunItem
from scoring.runs import services
from scoring.runs.costs import CACHE_WRITE_FACTOR, calls_cost
from scoring.runs.services.backends import citation_text, judge_backend_config
from scoring.runs.tasks import run_start
from tests.judge_server import GOOD_GRADE, JudgeServer, count_tokens, ok, prompt_tokens
from tests.test_judge_server import KEY_ENV, SDKS, backend
from tests.worker_fixtures import build_benchmark

judge_server = loopback.judge_server

QUESTION = "What is the minimum height of guarding to a balcony of a dwelling?"
KEY = "Not less than 1100 mm."
CITATION = "Approved Document K (2013) Diagram 3.1: guarding to balconies 1100 mm"
RESPONSES = [
    f"Model {i}: the guarding must be at least {1000 + 10 * i} mm high." for i in range(18)
]


def inputs(responses=RESPONSES) -> list[GradingInput]:
    return [GradingInput(QUESTION, KEY, CITATION, r, [0, 1, 2]) for r in responses]


@pytest.fixture
def secret_env(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-cache-test-not-a-secret")


@pytest.fixture(params=["sync", "async"])
def mode(request):
    """grade() or agrade() on the judge loop; the backends made are closed afterwards."""
    from tests.test_judge_server import _MADE

    yield request.param
    while _MADE:
        _MADE.pop().close()


def grade(b, inp, mode):
    return aio.run(b.agrade(inp), timeout=30) if mode == "async" else b.grade(inp)


# -- the prompt ------------------------------------------------------------------------------


def test_judge_v2_prefix_is_the_same_bytes_for_a_questions_18_responses_and_the_response_is_last():
    prompts = [render_judge_prompt(inp, "judge-v2") for inp in inputs()]
    assert len({p.prefix.encode() for p in prompts}) == 1
    prefix = prompts[0].prefix
    for part in (QUESTION, KEY, CITATION, "How to grade", "Use only these grades: 0, 1, 2"):
        assert part in prefix
    assert '"flag_reason"' in prefix and "data to be graded" in prefix
    for prompt, response in zip(prompts, RESPONSES, strict=True):
        assert response not in prefix
        assert str(prompt) == prompt.prefix + prompt.suffix
        # the response, then only the closing fence of its block
        assert prompt.suffix == f"{response}\nRESPONSE>>>\n"
        assert prompt.endswith(f"{response}\nRESPONSE>>>\n")


def test_judge_v1_text_is_unchanged_by_the_split_and_its_prefix_ends_before_the_response():
    inp = inputs()[0]
    whole = load_template("judge-v1").substitute(
        question=QUESTION,
        key_answer=KEY,
        citation=CITATION,
        response=RESPONSES[0],
        scale_list="0, 1, 2",
        scale_meaning="  0 = wrong, 1 = partly right, 2 = right.",
    )
    prompt = render_judge_prompt(inp)  # the default version, judge-v1
    assert str(prompt) == whole
    # v1's instructions come after the response: its shared prefix is the question part only
    assert prompt.prefix.endswith("<<<RESPONSE\n") and "How to grade" not in prompt.prefix
    assert prompt.suffix.startswith(RESPONSES[0]) and "How to grade" in prompt.suffix


def test_judge_v2_holds_judge_v1s_paragraphs_reordered_and_nothing_else():
    def paragraphs(version):
        return load_template(version).template.strip("\n").split("\n\n")

    v1, v2 = paragraphs("judge-v1"), paragraphs("judge-v2")
    assert sorted(v1) == sorted(v2) and v1 != v2
    assert v2[-1].startswith("RESPONSE TO GRADE:")  # the response block comes last


def test_judge_v2_is_released_and_only_released_versions_are_sent():
    assert RELEASED_SHA256["judge-v2"] == template_sha256("judge-v2")
    assert released_versions("judge") == ["judge-v1", "judge-v2"]
    assert released_versions("auditor") == ["auditor-v1"]
    assert check_version("judge-v2", "judge") == "judge-v2"
    with pytest.raises(ValueError, match="'judge-v3' is not a released judge prompt"):
        check_version("judge-v3", "judge")
    with pytest.raises(JudgeConfigError, match="prompt_version must be a released prompt"):
        JudgeConfig.from_dict({"backend": "openai", "model": "m", "prompt_version": "judge-v3"})
    # A response holding template syntax is still not expanded in the split template.
    text = render_judge_prompt(inputs(["Use $question here"])[0], "judge-v2")
    assert text.suffix.startswith("Use $question here")


@pytest.mark.django_db
def test_the_judge_rows_prompt_version_chooses_the_template_sent():
    data = build_benchmark(n_questions=1, n_models=1, grade_original=False, with_auditors=False)
    judge = data.judges[0]
    judge.backend, judge.model = "openai", "m"
    judge.backend_settings = {"prompt_version": "judge-v2"}  # not the source: dropped
    judge.prompt_version = "v1"  # a plain label: the default template, as before
    assert "prompt_version" not in judge_backend_config(judge)
    judge.prompt_version = "judge-v2"
    assert judge_backend_config(judge)["prompt_version"] == "judge-v2"
    judge.prompt_version = "judge-v9"
    with pytest.raises(JudgeConfigError, match="judge-v9"):
        JudgeConfig.from_dict(judge_backend_config(judge))


# -- the requests and the loopback server's cache ---------------------------------------------


@pytest.mark.parametrize("sdk", SDKS)
def test_the_prefix_goes_first_and_anthropic_marks_it_for_caching(
    sdk, judge_server: JudgeServer, secret_env, mode
):
    b = backend(sdk, judge_server, prompt_version="judge-v2")
    result = grade(b, inputs()[0], mode)
    assert (result.grade, result.prompt_version) == (2, "judge-v2")
    prompt = render_judge_prompt(inputs()[0], "judge-v2")
    content = judge_server.requests[0]["json"]["messages"][0]["content"]
    if sdk == "openai":  # automatic caching: no marker, one text beginning with the prefix
        assert content == str(prompt) and content.startswith(prompt.prefix)
    else:
        assert content == [
            {"type": "text", "text": prompt.prefix, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": prompt.suffix},
        ]


@pytest.mark.parametrize("sdk", SDKS)
def test_the_loopback_server_reports_the_prefix_cached_from_a_questions_second_response(
    sdk, judge_server: JudgeServer, secret_env, mode
):
    judge_server.cache_min_tokens = 64
    b = backend(sdk, judge_server, prompt_version="judge-v2")
    results = [grade(b, inp, mode) for inp in inputs()[:3]]
    prefix = render_judge_prompt(inputs()[0], "judge-v2").prefix
    shared = count_tokens(prefix)
    assert shared > 300  # instructions, scale, question, key and citation
    billed = [prompt_tokens(r["json"]) for r in judge_server.requests]
    assert [r.usage.input_tokens for r in results] == billed
    if sdk == "anthropic":  # the marked blocks: written once, then read
        assert [(r.usage.cached_tokens, r.usage.cache_write_tokens) for r in results] == [
            (0, shared),
            (shared, 0),
            (shared, 0),
        ]
    else:  # the longest seen prefix in steps of 128 tokens from the minimum on
        step = 64 + 128 * ((shared - 64) // 128)
        assert step <= shared < step + 128
        assert [r.usage.cached_tokens for r in results] == [0, step, step]
        assert results[0].usage.cache_write_tokens is None


@pytest.mark.parametrize("sdk", SDKS)
def test_a_prefix_under_the_minimum_is_not_cached_and_raises_nothing(
    sdk, judge_server: JudgeServer, secret_env
):
    assert judge_server.cache_min_tokens == 1024  # the vendors' minimum
    b = backend(sdk, judge_server, prompt_version="judge-v2")
    results = [b.grade(inp) for inp in inputs()[:2]]
    assert all(r.grade == 2 and r.usage.cached_tokens == 0 for r in results)
    if sdk == "anthropic":
        assert [r.usage.cache_write_tokens for r in results] == [0, 0]


def test_anthropic_caches_only_the_same_model_and_marked_prefix():
    cache = loopback.PrefixCache(min_tokens=1, ready="arrival")
    marked = {"type": "text", "text": "shared words here", "cache_control": {"type": "ephemeral"}}

    def request(model, first):
        return {"model": model, "messages": [{"role": "user", "content": [first, {"text": "x"}]}]}

    assert cache.lookup("anthropic", request("a", marked)).write == 3
    assert cache.lookup("anthropic", request("a", marked)).read == 3
    assert cache.lookup("anthropic", request("b", marked)).write == 3  # another model
    unmarked = {"type": "text", "text": "shared words here"}
    assert cache.lookup("anthropic", request("a", unmarked)) == loopback.CacheLookup()
    # ready "reply" (the default, the vendors' timing): a prefix is readable only once the
    # reply of its first request is out
    late = loopback.PrefixCache(min_tokens=1)
    assert late.ready == "reply"
    first = late.lookup("anthropic", request("a", marked))
    assert late.lookup("anthropic", request("a", marked)).write == 3
    late.remember(first)
    assert late.lookup("anthropic", request("a", marked)).read == 3


# -- a run: question-major order, cached tokens on the ledger and in the cost ---------------


PRICES = {
    "price_currency": "USD",
    "price_input": Decimal("3.00"),
    "price_cached_input": Decimal("0.30"),
    "price_output": Decimal("15.00"),
}


@pytest.mark.django_db(transaction=True)
def test_a_run_grades_question_by_question_and_prices_the_cached_tokens(
    monkeypatch, judge_server: JudgeServer
):
    monkeypatch.setenv(KEY_ENV, "sk-cache-test-not-a-secret")
    judge_server.cache_min_tokens = 64
    judge_server.default = ok(GOOD_GRADE)
    data = build_benchmark(
        n_questions=3, n_models=4, grade_original=False, with_auditors=False, name="cache"
    )
    for judge, sdk in zip(data.judges, SDKS, strict=True):
        judge.backend, judge.model, judge.api_key_env = sdk, f"loopback-{sdk}", KEY_ENV
        judge.base_url = judge_server.url + "/v1" if sdk == "openai" else judge_server.url
        judge.backend_settings = {"max_retries": 0, "timeout": 5}
        judge.prompt_version = "judge-v2"
        judge.save()
    Judge.objects.filter(pk__in=[j.pk for j in data.judges]).update(**PRICES)
    run = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)

    # question-major: each judge's calls for one question's 4 responses are adjacent
    order = list(
        RunItem.objects.filter(run=run)
        .order_by("id")
        .values_list("key_entry_id", "judge_id", "response_id")
    )
    assert order == sorted(order) and len(order) == 3 * 2 * 4
    assert services.pending_pairs(run=run) == [[r, j, e] for e, j, r in order]

    run_start.delay(run.pk)
    run.refresh_from_db()
    assert (run.status, run.graded) == ("complete", 24)
    calls = JudgeCall.objects.filter(run=run)
    assert set(calls.values_list("prompt_version", flat=True)) == {"judge-v2"}
    openai_judge, anthropic_judge = data.judges
    # Per judge and question: the first call misses (Anthropic writes), the 3 others read.
    prefixes = {
        q.pk: count_tokens(
            render_judge_prompt(
                GradingInput(q.text, e.answer, citation_text(e), "x"), "judge-v2"
            ).prefix
        )
        for q in data.questions
        for e in [data.original.entries.get(question=q)]
    }
    anthropic_calls = calls.filter(judge=anthropic_judge)
    read = sum(c.cached_tokens for c in anthropic_calls)
    written = sum(c.cache_write_tokens for c in anthropic_calls)
    assert (read, written) == (3 * sum(prefixes.values()), sum(prefixes.values()))
    # OpenAI: per question the 3 later calls read the prefix in 128-token steps from 64 on;
    # the first reads nothing, or (after another question) the instructions all prompts share.
    entry_question = dict(data.original.entries.values_list("pk", "question_id"))
    for entry_id in {c.key_entry_id for c in calls}:
        got = sorted(
            calls.filter(judge=openai_judge, key_entry_id=entry_id).values_list(
                "cached_tokens", flat=True
            )
        )
        step = 64 + 128 * ((prefixes[entry_question[entry_id]] - 64) // 128)
        assert got[1:] == [step, step, step] and got[0] < step
    assert calls.filter(judge=openai_judge, cached_tokens=0).count() == 1  # the very first

    # The cost: every figure from the server's own records, priced by hand.
    requests = [
        r["json"] for r in judge_server.requests if r["json"]["model"] == "loopback-anthropic"
    ]
    billed_in = sum(prompt_tokens(r) for r in requests)
    out = 12 * count_tokens(GOOD_GRADE)
    expected = (
        Decimal(billed_in - read - written) * Decimal("3.00")
        + Decimal(written) * Decimal("3.00") * Decimal("1.25")
        + Decimal(read) * Decimal("0.30")
        + Decimal(out) * Decimal("15.00")
    ) / Decimal(1_000_000)
    assert CACHE_WRITE_FACTOR == Decimal("1.25")
    summary = calls_cost(calls.filter(judge=anthropic_judge))
    assert summary["judges"][0]["input_tokens"] == billed_in
    assert (summary["cached_tokens"], summary["cache_write_tokens"]) == (read, written)
    assert summary["cost"] == f"{expected.quantize(Decimal('0.000001'))}"
    # Without the cache the same tokens would cost more: (all input at 3.00).
    uncached = (Decimal(billed_in) * 3 + Decimal(out) * 15) / Decimal(1_000_000)
    assert Decimal(summary["cost"]) < uncached
