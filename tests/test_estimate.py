"""The estimate before a run (issue 20 item 3): pairs from the run's own selector, input
tokens from the rendered prompts' characters (4 a token by default, calibrated from a
judge's observed calls), output tokens from max_tokens or the observed mean, cost at the
judge's live and batch prices (unknown when a price is empty); `rescore --dry-run`."""

from __future__ import annotations

import io
import json
import math
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from scoring.models import Judge, JudgeCall, ScoringRun
from scoring.runs.estimate import estimate_run, estimate_summary
from tests.worker_fixtures import build_benchmark

pytestmark = pytest.mark.django_db

PROMPTS = Path(__file__).resolve().parent.parent / "judges" / "prompt_templates"
PRICES = {
    "price_currency": "GBP",
    "price_input": Decimal("2.50"),
    "price_cached_input": Decimal("1.25"),
    "price_output": Decimal("10.00"),
    "batch_price_input": Decimal("1.25"),
    "batch_price_cached_input": Decimal("0.625"),
    "batch_price_output": Decimal("5.00"),
}


def _prompt_chars_by_hand(response, version: str = "judge-v1", *, prefix: bool = False) -> int:
    """The judge prompt's length at template `version` (or, `prefix`, of the text before
    the response only), counted from the template file and the pair's texts (each
    placeholder once), not by rendering it."""
    template = (PROMPTS / f"{version}.txt").read_text(encoding="utf-8")
    if prefix:
        template = template[: template.index("$response")]
    entry = response.question.key_entries.get()
    values = {
        "$question": response.question.text.strip(),
        "$key_answer": entry.answer.strip(),
        "$citation": f"Approved Document K (2013) {entry.citation_locator}: "
        f"{entry.citation_quote.strip()}",
        "$response": response.text.strip(),
        "$scale_list": "0, 1, 2",
        "$scale_meaning": "  0 = wrong, 1 = partly right, 2 = right.",
    }
    if prefix:
        values = {k: v for k, v in values.items() if k in template}
    for name in values:
        assert template.count(name) == 1, name
    return len(template) - sum(len(n) for n in values) + sum(len(v) for v in values.values())


@pytest.fixture
def tiny():
    """2 questions x 2 models x 2 judges, nothing graded: 8 pairs. j1 priced (GBP), j2 not;
    j1 with max_tokens 200, j2 with the default 1024."""
    data = build_benchmark(n_questions=2, n_models=2, grade_original=False, with_auditors=False)
    j1, j2 = data.judges
    Judge.objects.filter(pk=j1.pk).update(
        backend_settings={**j1.backend_settings, "max_tokens": 200}, **PRICES
    )
    j1.refresh_from_db()
    return data


def test_estimate_by_hand_with_the_default_ratio(tiny):
    chars = sum(_prompt_chars_by_hand(r) for r in tiny.responses)
    est = estimate_run(edition=tiny.original, judges=tiny.judges)
    j1, j2 = est.judges
    assert (est.needed, est.calls, j1.pairs, j2.pairs) == (8, 8, 4, 4)
    assert j1.tokens_in == j2.tokens_in == math.ceil(chars / 4)
    assert (j1.tokens_out, j2.tokens_out) == (4 * 200, 4 * 1024)
    assert j1.tokens_cached == j2.tokens_cached == 0
    # j1: tokens_in x 2.50 + 800 x 10.00 per million; batch at half those prices
    live = Decimal(j1.tokens_in) * Decimal("2.50") / 10**6 + Decimal(800) * 10 / 10**6
    assert j1.cost_live == live and j1.cost_batch == live / 2
    assert j2.cost_live is None and j2.cost_batch is None
    assert est.cost_live is None and est.cost_batch is None  # j2 has no price
    assert "4 characters a token (default" in j1.basis and "max_tokens" in j1.basis
    assert any("j2 has no live price" in n for n in est.notes)
    # re-asks of stored unparsed replies are pairs; retries while the run goes are not
    assert any("re-asks of stored unparsed replies included" in n for n in est.notes)
    assert "cost unknown: judge j2 has no price" in estimate_summary(est)
    # money as strings in JSON, None where unknown
    doc = est.as_json()
    assert doc["judges"][0]["cost_live"] == f"{live.quantize(Decimal('0.000001'))}"
    assert doc["cost_live"] is None and doc["judges"][1]["cost_batch"] is None


def test_estimate_only_counts_the_pairs_a_run_would_send(tiny):
    run_first = estimate_run(edition=tiny.original, judges=tiny.judges[:1])
    assert (run_first.needed, [j.judge for j in run_first.judges]) == (4, ["j1"])
    assert run_first.cost_live == run_first.judges[0].cost_live  # one priced judge: a total
    assert "GBP live" in estimate_summary(run_first)
    from scoring.runs.services import scoring_run_create
    from scoring.runs.tasks import run_start

    run = scoring_run_create(edition=tiny.original, judges=tiny.judges[:1], enqueue=False)
    run_start.delay(run.pk)  # the offline reference judge grades them
    again = estimate_run(edition=tiny.original, judges=tiny.judges)
    assert (again.needed, [j.judge for j in again.judges]) == (4, ["j2"])


def test_the_ratios_are_calibrated_from_the_judges_observed_calls(tiny):
    j1 = tiny.judges[0]
    run = ScoringRun.objects.create(benchmark=tiny.benchmark, edition=tiny.original)
    seen = tiny.responses[:2]
    entry = {r.pk: r.question.key_entries.get() for r in seen}
    observed_chars = sum(_prompt_chars_by_hand(r) for r in seen)
    # two answered calls: 300 + 500 input tokens (of them 200 cached), 30 + 50 output
    for r, (i, c, o) in zip(seen, [(300, 0, 30), (500, 200, 50)], strict=True):
        JudgeCall.objects.create(
            run=run,
            judge=j1,
            response=r,
            key_entry=entry[r.pk],
            prompt_version="v1",
            outcome="ok",
            input_tokens=i,
            cached_tokens=c,
            output_tokens=o,
        )
    # calls without usage or not answered do not calibrate
    JudgeCall.objects.create(
        run=run, judge=j1, response=seen[0], key_entry=entry[seen[0].pk], prompt_version="v1"
    )
    est = estimate_run(edition=tiny.original, judges=[j1])
    (row,) = est.judges
    ratio = observed_chars / 800  # characters a token, as observed
    all_chars = sum(_prompt_chars_by_hand(r) for r in tiny.responses)
    assert row.tokens_in == math.ceil(all_chars / ratio)
    assert row.tokens_out == 4 * 40  # observed mean 40 a call
    assert row.tokens_cached == round(row.tokens_in * 200 / 800)  # 25% cached, as observed
    assert "observed on 2 calls of j1" in row.basis
    cost = (
        Decimal(row.tokens_in - row.tokens_cached) * Decimal("2.50")
        + Decimal(row.tokens_cached) * Decimal("1.25")
        + Decimal(160) * Decimal("10.00")
    ) / 10**6
    assert row.cost_live == cost


def test_the_cached_share_comes_only_from_calls_at_the_judges_prompt_version(tiny):
    """A new prompt layout (judge-v2 puts the shared part first) changes what the vendor
    caches, so calls sent at judge-v1 do not say what judge-v2 will read from the cache:
    the characters a token still calibrate from every call (each rendered at the version it
    was sent with), the cached share from calls at the judge's current version only."""
    j1 = tiny.judges[0]
    run = ScoringRun.objects.create(benchmark=tiny.benchmark, edition=tiny.original)
    r0, r1, r2 = tiny.responses[:3]
    calls = [(r0, "v1", 300, 0, 30), (r1, "v1", 500, 200, 50)]

    def record(rows):
        for r, version, i, c, o in rows:
            JudgeCall.objects.create(
                run=run,
                judge=j1,
                response=r,
                key_entry=r.question.key_entries.get(),
                prompt_version=version,
                outcome="ok",
                input_tokens=i,
                cached_tokens=c,
                output_tokens=o,
            )

    record(calls)
    Judge.objects.filter(pk=j1.pk).update(prompt_version="judge-v2")
    j1.refresh_from_db()
    (row,) = estimate_run(edition=tiny.original, judges=[j1]).judges
    v2_chars = sum(_prompt_chars_by_hand(r, "judge-v2") for r in tiny.responses)
    ratio = (_prompt_chars_by_hand(r0) + _prompt_chars_by_hand(r1)) / 800
    assert row.tokens_in == math.ceil(v2_chars / ratio)  # judge-v2 prompts measured
    assert row.tokens_cached == 0  # 25% cached at v1 says nothing about v2
    assert "the reference backend caches nothing; no call of j1 at prompt version judge-v2" in (
        row.basis
    )
    # one call at judge-v2: 900 input tokens, 600 of them cached
    record([(r2, "judge-v2", 900, 600, 40)])
    (row,) = estimate_run(edition=tiny.original, judges=[j1]).judges
    ratio = (
        _prompt_chars_by_hand(r0)
        + _prompt_chars_by_hand(r1)
        + _prompt_chars_by_hand(r2, "judge-v2")
    ) / 1700
    assert row.tokens_in == math.ceil(v2_chars / ratio)
    assert row.tokens_cached == round(row.tokens_in * 600 / 900)
    assert row.tokens_out == 4 * 40  # (30 + 50 + 40) / 3 a call
    assert "cached: 67% of input, as observed on 1 call at prompt version judge-v2" in row.basis


def _as_vendor_judge(judge, backend: str = "openai", **settings) -> None:
    """Make `judge` a vendor judge at judge-v2 (no call yet) with `settings` added."""
    Judge.objects.filter(pk=judge.pk).update(
        backend=backend,
        model="some-model",
        prompt_version="judge-v2",
        backend_settings={**judge.backend_settings, **settings},
    )
    judge.refresh_from_db()


def test_with_no_call_at_its_version_the_cache_is_predicted_from_the_shared_prefix(tiny):
    """2 questions x 2 responses, one call in flight (concurrency 1): a run sends each
    question's two prompts one after the other, the first writes the shared prefix to the
    cache, the second (sent once the first is answered) reads it: cached = (2 - 1) x prefix
    tokens a question when the prefix reaches the cache minimum."""
    j1 = tiny.judges[0]
    _as_vendor_judge(j1, cache_min_tokens=50, concurrency=1)
    (row,) = estimate_run(edition=tiny.original, judges=[j1]).judges
    firsts = {r.question_id: r for r in tiny.responses}.values()  # one response a question
    prefix_tokens = [_prompt_chars_by_hand(r, "judge-v2", prefix=True) / 4 for r in firsts]
    assert len(prefix_tokens) == 2 and min(prefix_tokens) >= 50
    v2_chars = sum(_prompt_chars_by_hand(r, "judge-v2") for r in tiny.responses)
    assert row.tokens_in == math.ceil(v2_chars / 4)
    assert row.tokens_cached == round(sum(prefix_tokens))
    assert 0 < row.tokens_cached < row.tokens_in / 2
    live = (
        Decimal(row.tokens_in - row.tokens_cached) * Decimal("2.50")
        + Decimal(row.tokens_cached) * Decimal("1.25")
        + Decimal(4 * 200) * 10
    ) / 10**6
    assert row.cost_live == live
    assert "predicted from the prompts' layout (2 of 2 questions" in row.basis
    assert "cache minimum, 50 tokens" in row.basis
    assert "with 1 call in flight the first 1 of a question miss" in row.basis
    # Anthropic bills the first call's write at 1.25x the input price
    _as_vendor_judge(j1, backend="anthropic", cache_min_tokens=50, concurrency=1)
    (anthropic,) = estimate_run(edition=tiny.original, judges=[j1]).judges
    writes = round(sum(prefix_tokens))  # one write a question
    assert anthropic.tokens_cached == row.tokens_cached
    assert anthropic.cost_live == live + Decimal(writes) * Decimal("2.50") * Decimal("0.25") / 10**6
    assert f"{writes:,} written at 1.25x the input price" in anthropic.basis


def test_calls_sent_together_all_miss_the_cache_and_each_writes_it(tiny):
    """The vendors' timing (issue 30 item 12): a prefix is readable only once the first
    request carrying it is answered. With the default 8 calls in flight a question's 2
    calls go out together: neither reads, and for Anthropic both write the prefix."""
    j1 = tiny.judges[0]
    _as_vendor_judge(j1, backend="anthropic", cache_min_tokens=50)  # concurrency unset: 8
    (row,) = estimate_run(edition=tiny.original, judges=[j1]).judges
    firsts = {r.question_id: r for r in tiny.responses}.values()
    prefix_tokens = [_prompt_chars_by_hand(r, "judge-v2", prefix=True) / 4 for r in firsts]
    writes = round(2 * sum(prefix_tokens))  # both calls of each question write
    assert row.tokens_cached == 0
    by_hand = (
        Decimal(row.tokens_in - writes) * Decimal("2.50")
        + Decimal(writes) * Decimal("2.50") * Decimal("1.25")
        + Decimal(4 * 200) * 10
    ) / 10**6
    assert row.cost_live == by_hand
    assert "with 4 calls in flight the first 4 of a question miss" in row.basis


def test_observed_cache_writes_are_counted_and_priced_at_one_and_a_quarter(tiny):
    """A calibrated estimate keeps the cache writes it observed (issue 30 item 12: it
    counted none once a cached share was observed, so it ran low for Anthropic)."""
    j1 = tiny.judges[0]
    _as_vendor_judge(j1, backend="anthropic", cache_min_tokens=50)
    r0 = tiny.responses[0]
    JudgeCall.objects.create(
        run=ScoringRun.objects.create(benchmark=tiny.benchmark, edition=tiny.original),
        judge=j1,
        response=r0,
        key_entry=r0.question.key_entries.get(),
        prompt_version="judge-v2",
        outcome="ok",
        input_tokens=1000,
        cached_tokens=500,
        cache_write_tokens=250,
        output_tokens=30,
    )
    (row,) = estimate_run(edition=tiny.original, judges=[j1]).judges
    cached, writes = round(row.tokens_in * 0.5), round(row.tokens_in * 0.25)
    assert row.tokens_cached == cached
    by_hand = (
        Decimal(row.tokens_in - cached - writes) * Decimal("2.50")
        + Decimal(writes) * Decimal("2.50") * Decimal("1.25")
        + Decimal(cached) * Decimal("1.25")
        + Decimal(4 * 30) * 10
    ) / 10**6
    assert row.cost_live == by_hand
    assert "cached: 50% of input, 25% written to the cache at 1.25x the input price" in row.basis


def test_a_prefix_below_the_cache_minimum_predicts_nothing_cached(tiny):
    j1 = tiny.judges[0]
    _as_vendor_judge(j1)  # no cache_min_tokens: the vendors' 1,024
    (row,) = estimate_run(edition=tiny.original, judges=[j1]).judges
    firsts = {r.question_id: r for r in tiny.responses}.values()
    assert max(_prompt_chars_by_hand(r, "judge-v2", prefix=True) / 4 for r in firsts) < 1024
    assert row.tokens_cached == 0
    assert "(0 of 2 questions have a shared prefix of at least the cache minimum, 1,024" in (
        row.basis
    )


def test_observed_calls_at_the_version_win_over_the_prediction(tiny):
    j1 = tiny.judges[0]
    _as_vendor_judge(j1, cache_min_tokens=50)
    r0 = tiny.responses[0]
    JudgeCall.objects.create(
        run=ScoringRun.objects.create(benchmark=tiny.benchmark, edition=tiny.original),
        judge=j1,
        response=r0,
        key_entry=r0.question.key_entries.get(),
        prompt_version="judge-v2",
        outcome="ok",
        input_tokens=400,
        cached_tokens=0,
        output_tokens=30,
    )
    (row,) = estimate_run(edition=tiny.original, judges=[j1]).judges
    assert row.tokens_cached == 0  # measured: nothing cached, whatever the prefix says
    assert "cached: 0% of input, as observed on 1 call at prompt version judge-v2" in row.basis
    assert "predicted" not in row.basis


@pytest.mark.parametrize("bad", [0, -5, "1024", True, 2.5])
def test_a_bad_cache_minimum_is_refused(tiny, bad):
    from judges import JudgeConfig, JudgeConfigError

    with pytest.raises(JudgeConfigError, match="cache_min_tokens must be"):
        JudgeConfig.from_dict({"backend": "openai", "model": "m", "cache_min_tokens": bad})
    assert (
        JudgeConfig.from_dict({"backend": "openai", "model": "m", "cache_min_tokens": 256})
    ).cache_min_tokens == 256
    j1 = tiny.judges[0]
    _as_vendor_judge(j1, cache_min_tokens=bad)
    with pytest.raises(JudgeConfigError, match="judge j1: cache_min_tokens must be"):
        estimate_run(edition=tiny.original, judges=[j1])


def test_an_audit_estimate_renders_the_auditor_prompt():
    data = build_benchmark(n_questions=3, n_models=1, grade_original=False)
    est = estimate_run(edition=data.original, judges=data.auditors, kind=ScoringRun.Kind.AUDIT)
    assert (est.needed, [j.pairs for j in est.judges]) == (6, [3, 3])
    template = (PROMPTS / "auditor-v1.txt").read_text(encoding="utf-8")
    assert est.judges[0].tokens_in > 3 * len(template) // 4 - 3 * 20  # the whole prompt
    assert est.judges[0].tokens_in < 3 * (len(template) + 1000) // 4
    stdout = io.StringIO()
    call_command("audit_key", "--dry-run", "--format", "json", stdout=stdout)
    doc = json.loads(stdout.getvalue())
    assert (doc["needed"], doc["kind"], doc["tokens_in"]) == (6, "audit", est.tokens_in)
    assert ScoringRun.objects.count() == 0


def test_different_currencies_give_no_total(tiny):
    j1, j2 = tiny.judges
    Judge.objects.filter(pk=j2.pk).update(**{**PRICES, "price_currency": "USD"})
    j2.refresh_from_db()
    est = estimate_run(edition=tiny.original, judges=[j1, j2])
    assert est.judges[0].cost_live is not None and est.judges[1].cost_live is not None
    assert est.cost_live is None and est.currency == ""
    assert any("different currencies (GBP, USD)" in n for n in est.notes)


def _dry_run(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("rescore", "--dry-run", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_rescore_dry_run_json_creates_no_run_and_makes_no_call(tiny):
    runs, calls = ScoringRun.objects.count(), JudgeCall.objects.count()
    out, _ = _dry_run("--format", "json", "--judges", "j1,j2")
    doc = json.loads(out)
    for key in ("needed", "calls", "tokens_in", "tokens_out", "cost_live", "cost_batch"):
        assert key in doc
    assert "run" not in doc
    assert (doc["needed"], doc["calls"], doc["cost_live"], doc["cost_batch"]) == (8, 8, None, None)
    assert doc["tokens_in"] == sum(j["tokens_in"] for j in doc["judges"])
    assert doc["tokens_out"] == 4 * 200 + 4 * 1024
    assert doc["tokens_cached"] == 0 and isinstance(doc["notes"], list)
    assert [j["judge"] for j in doc["judges"]] == ["j1", "j2"]
    assert doc["judges"][0]["cost_live"] is not None and doc["judges"][1]["cost_live"] is None
    assert (ScoringRun.objects.count(), JudgeCall.objects.count()) == (runs, calls)


def test_rescore_dry_run_text_and_audit_key_dry_run(tiny):
    out, _ = _dry_run("--judges", "j1")
    assert "needed 4; about 4 calls" in out and "GBP live" in out
    assert ScoringRun.objects.count() == 0


def test_with_no_judge_able_to_grade_the_estimate_says_so_not_nothing_to_grade(tiny):
    """8 pairs lack a grade but no judge can grade them: "no judge can grade" with why each
    was skipped, not "nothing to grade" (on the Runs page too, which passes every judge of
    the benchmark); with one judge able to grade, its 4 calls."""
    j1, j2 = tiny.judges
    Judge.objects.filter(pk=j1.pk).update(backend="")
    Judge.objects.filter(pk=j2.pk).update(active=False)
    judges = list(Judge.objects.filter(pk__in=[j1.pk, j2.pk]).order_by("judge_id"))
    estimate = estimate_run(edition=tiny.original, judges=judges)
    assert (estimate.needed, estimate.calls) == (0, 0)
    assert estimate_summary(estimate) == (
        "no judge can grade (j1: skipped, no backend (imported grades only); j2: skipped, "
        "inactive): no call, no cost"
    )
    assert estimate.as_json()["notes"][0] == "no judge can grade: each one given was skipped"
    from django.contrib.auth.models import User

    client = Client()
    client.force_login(User.objects.create_superuser("boss", "b@example.com", "pw-not-secret"))
    fragment = client.get(
        reverse("scoring:run-estimate"), {"edition": tiny.original.pk, "kind": "grade"}
    ).content.decode()
    assert "no judge can grade (j1: skipped, no backend (imported grades only); j2:" in fragment
    bare = client.get(reverse("scoring:run-estimate"))  # no edition given: the site's 400 page
    assert bare.status_code == 400 and "<html" in bare.content.decode()
    assert "Give the id of the key edition in the address" in bare.content.decode()
    odd = client.get(reverse("scoring:run-estimate"), {"edition": tiny.original.pk, "kind": "x"})
    assert odd.status_code == 400 and "Unknown run kind &#x27;x&#x27;: grade or audit." in (
        odd.content.decode()
    )
    Judge.objects.filter(pk=j2.pk).update(active=True)
    judges = list(Judge.objects.filter(pk__in=[j1.pk, j2.pk]).order_by("judge_id"))
    assert estimate_summary(estimate_run(edition=tiny.original, judges=judges)).startswith(
        "about 4 calls"
    )


def test_the_estimate_api_and_fragment(tiny, client):
    from django.contrib.auth.models import User

    admin = User.objects.create_superuser("boss", "boss@example.com", "pw-not-a-secret")
    client.force_login(admin)
    url = reverse("scoring:api-run-estimate")
    doc = client.get(url, {"edition": "original", "judges": "j1"}).json()
    assert (doc["needed"], doc["judges"][0]["judge"]) == (4, "j1")
    assert doc["cost_live"] is not None and "run" not in doc
    bad = client.get(url, {"edition": "original", "judges": "j9"})
    assert bad.status_code == 400 and "j9" in bad.json()["judges"][0]
    page = client.get(
        reverse("scoring:run-estimate"), {"edition": tiny.original.pk, "kind": "grade"}
    )
    assert page.status_code == 200
    assert "about 8 calls" in page.content.decode() and "cost unknown" in page.content.decode()
    fragment = client.get(
        reverse("scoring:run-estimate"),
        {"edition": tiny.original.pk, "kind": "grade"},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert "about 8 calls" in fragment and "<html" not in fragment
    assert "judges j1, j2 have no price" not in fragment  # j1 is priced
    assert "cost unknown: judge j2 has no price" in fragment
    runs_page = client.get(reverse("scoring:runs")).content.decode()
    assert f"runs/estimate/?edition={tiny.original.pk}&amp;kind=grade" in runs_page
    assert 'name="budget_cost"' in runs_page and 'name="budget_tokens"' in runs_page
    edition_page = client.get(
        reverse("review:edition", kwargs={"benchmark": tiny.benchmark.name, "name": "original"})
    ).content.decode()
    assert "Re-score original" in edition_page and 'name="budget_cost"' in edition_page
    assert f"runs/estimate/?edition={tiny.original.pk}&amp;kind=grade" in edition_page
    assert ScoringRun.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_calibrated_estimate_is_within_ten_percent_of_what_the_run_spends(monkeypatch, settings):
    """Half the pairs are graded through the loopback API (a token cap stops the run), then
    the estimate of the other half, calibrated on those calls, is compared with what the
    resumed run is billed (the issue's goal: within 10%)."""
    from django.db.models import Sum

    from scoring.runs import services
    from tests.judge_server import JudgeServer, ok
    from tests.test_judge_server import KEY_ENV

    settings.SNAGLIST_RESCORE_CHUNK = 4
    monkeypatch.setenv(KEY_ENV, "sk-estimate-test-not-a-secret")
    data = build_benchmark(n_questions=6, n_models=4, grade_original=False, with_auditors=False)
    judge = data.judges[0]
    Judge.objects.filter(pk=judge.pk).update(**PRICES)
    with JudgeServer() as server:
        judge.refresh_from_db()
        judge.backend, judge.model, judge.api_key_env = "openai", "loopback", KEY_ENV
        judge.base_url = server.url + "/v1"
        judge.backend_settings = {"max_retries": 0, "timeout": 5, "max_tokens": 60}
        judge.save()
        server.default = ok(
            '{"grade": 1, "rationale": "partly right", "flag": false, "flag_reason": ""}'
        )
        first = estimate_run(edition=data.original, judges=[judge])
        run = services.scoring_run_create(
            edition=data.original,
            judges=[judge],
            budget_tokens=(first.tokens_in + first.tokens_out) // 2,
        )
        run.refresh_from_db()
        assert run.status == "stopped" and 0 < run.graded < 24
        rest = estimate_run(edition=data.original, judges=[judge])
        assert rest.needed == 24 - run.graded and "observed on" in rest.judges[0].basis
        before = max(JudgeCall.objects.filter(run=run).values_list("id", flat=True))
        services.scoring_run_resume(run=run, budget_tokens=10**9)
    leg = JudgeCall.objects.filter(run=run, id__gt=before)
    actual = leg.aggregate(i=Sum("input_tokens"), o=Sum("output_tokens"))
    assert leg.count() == rest.calls
    assert abs(rest.tokens_in - actual["i"]) <= 0.10 * actual["i"]
    assert abs(rest.tokens_out - actual["o"]) <= 0.10 * actual["o"]
    billed = (Decimal(actual["i"]) * Decimal("2.50") + Decimal(actual["o"]) * 10) / 10**6
    assert abs(rest.cost_live - billed) <= Decimal("0.10") * billed
