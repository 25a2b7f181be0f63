"""A run's budget (issue 20 item 4): a cost or token cap, checked before each chunk sends
its calls; the run stops cleanly at the cap (no call half-recorded), says so, is never
restarted by heal_runs, and a resume with a raised cap finishes it, each pair graded once."""

from __future__ import annotations

import io
import json
import math
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db.models import Sum
from django.urls import reverse
from django.utils import timezone

import tests.judge_server as loopback
from core.models import AuditLogEntry
from scoring.models import Grade, Judge, JudgeCall, RunItem, ScoringRun
from scoring.runs import selectors as runs_selectors
from scoring.runs import services
from scoring.runs.budget import BudgetError, last_finish_offer, over_budget, parse_budget
from scoring.runs.estimate import estimate_run
from tests.judge_server import JudgeServer, ok
from tests.test_judge_server import KEY_ENV
from tests.worker_fixtures import build_benchmark

judge_server = loopback.judge_server
GRADE_1 = '{"grade": 1, "rationale": "partly right", "flag": false, "flag_reason": ""}'
PRICES = {
    "price_currency": "GBP",
    "price_input": Decimal("2.50"),
    "price_cached_input": Decimal("1.25"),
    "price_output": Decimal("10.00"),
}


def _point_at(judge: Judge, server: JudgeServer) -> None:
    judge.backend = "openai"
    judge.model = "loopback-openai"
    judge.base_url = server.url + "/v1"
    judge.api_key_env = KEY_ENV
    judge.backend_settings = {"max_retries": 0, "timeout": 5, "max_tokens": 60}
    judge.save()


def _spent_tokens(run: ScoringRun) -> int:
    totals = JudgeCall.objects.filter(run=run).aggregate(
        i=Sum("input_tokens"), o=Sum("output_tokens")
    )
    return (totals["i"] or 0) + (totals["o"] or 0)


def _assert_nothing_half_recorded(run: ScoringRun) -> None:
    """Every call of the run is settled, each answered call has its grade and its item."""
    calls = JudgeCall.objects.filter(run=run)
    assert not calls.filter(outcome__in=["started", "lost"]).exists()
    answered = calls.filter(outcome="ok").count()
    assert answered == RunItem.objects.filter(run=run, state="graded").count() == run.graded
    assert (
        answered
        == Grade.objects.filter(
            response_id__in=calls.values("response_id"), judge_id__in=calls.values("judge_id")
        ).count()
    )


@pytest.mark.django_db(transaction=True)
def test_a_token_cap_stops_the_run_and_a_raised_cap_finishes_it(
    judge_server, monkeypatch, settings
):
    settings.SNAGLIST_RESCORE_CHUNK = 2
    monkeypatch.setenv(KEY_ENV, "sk-budget-test-not-a-secret")
    data = build_benchmark(n_questions=4, n_models=3, grade_original=False, with_auditors=False)
    judge = data.judges[0]
    _point_at(judge, judge_server)
    judge_server.default = ok(GRADE_1)
    whole = estimate_run(edition=data.original, judges=[judge])
    assert whole.needed == 12
    cap = (whole.tokens_in + whole.tokens_out) // 2

    run = services.scoring_run_create(
        edition=data.original, judges=[judge], budget_tokens=cap, enqueue=True
    )
    run.refresh_from_db()
    assert run.status == "stopped"
    assert 0 < run.graded < 12 and run.done == run.graded
    _assert_nothing_half_recorded(run)
    spent = _spent_tokens(run)
    assert spent <= cap  # the estimate admits no chunk past the cap
    assert len(judge_server.requests) == run.graded
    assert "stopped at budget" in run.error and f"{cap:,}-token cap" in run.error
    assert (run.budget_reserved_tokens, run.budget_reserved_cost) == (0, 0)
    assert AuditLogEntry.objects.filter(action="run.budget_set", target_id=str(run.pk)).count() == 1
    stop = AuditLogEntry.objects.get(action="run.budget_stop", target_id=str(run.pk))
    assert stop.after["tokens"] == cap and "token cap" in stop.after["reason"]

    # the leaderboard says why its figures lack grades
    from scoring.board.views import board_staleness

    stale = board_staleness(data.original)
    assert stale["stale"] and f"run {run.pk} stopped at its budget" in stale["stale_reason"]
    assert f"{12 - run.graded} of 12 pairs lack a grade" in stale["stale_reason"]

    # heal_runs never sends a stopped run again, however long since a worker reported
    ScoringRun.objects.filter(pk=run.pk).update(reported_at=timezone.now() - timedelta(hours=1))
    assert run.pk not in services.heal_runs()["resent"]
    run.refresh_from_db()
    assert run.status == "stopped" and run.graded == len(judge_server.requests)

    # a resume with the cap not raised stops again at once, with the reason; nothing sent
    sent = len(judge_server.requests)
    with pytest.raises(BudgetError, match=rf"run {run.pk} would stop again at once: .*token cap"):
        services.scoring_run_resume(run=run)
    run.refresh_from_db()
    assert run.status == "stopped" and len(judge_server.requests) == sent

    out = io.StringIO()
    call_command(
        "rescore",
        "--resume",
        "--run",
        str(run.pk),
        "--budget-tokens",
        str(cap * 10),
        "--format",
        "json",
        stdout=out,
        stderr=io.StringIO(),
    )
    assert json.loads(out.getvalue())["budget_tokens"] == cap * 10
    run.refresh_from_db()
    assert (run.status, run.graded, run.budget_tokens) == ("complete", 12, cap * 10)
    _assert_nothing_half_recorded(run)
    assert len(judge_server.requests) == 12  # each pair sent once over both legs
    assert Grade.objects.filter(judge=judge).count() == 12
    assert runs_selectors.ledger_summary(run)["paid_twice"] == 0
    assert AuditLogEntry.objects.filter(action="run.budget_set", target_id=str(run.pk)).count() == 2


@pytest.fixture
def admin_client(client):
    admin = User.objects.create_superuser("boss", "boss@example.com", "pw-not-a-secret")
    client.force_login(admin)
    return client


@pytest.mark.django_db(transaction=True)
def test_a_cost_cap_from_the_api_stops_before_any_call_and_resumes_raised(admin_client):
    data = build_benchmark(n_questions=2, n_models=3, grade_original=False, with_auditors=False)
    Judge.objects.filter(pk__in=[j.pk for j in data.judges]).update(**PRICES)
    made = admin_client.post(
        reverse("scoring:api-runs"),
        {"edition": "original", "budget_cost": "0.001"},
        content_type="application/json",
    )
    assert made.status_code == 201, made.content
    run = ScoringRun.objects.get(pk=made.json()["id"])
    # 1,024 output tokens a call (max_tokens: no usage observed) at 10.00 GBP a million:
    # the first chunk's estimate alone is over 0.001 GBP
    assert (run.status, run.budget_cost, run.budget_currency) == (
        "stopped",
        Decimal("0.001"),
        "GBP",
    )
    assert JudgeCall.objects.filter(run=run).count() == 0
    assert "0.000000 GBP spent of the 0.001000 GBP cap" in run.error
    detail = admin_client.get(reverse("scoring:api-run-detail", args=[run.pk])).json()
    assert (detail["status"], detail["budget_cost"]) == ("stopped", "0.001000")

    page = admin_client.get(reverse("scoring:run-detail", args=[run.pk])).content.decode()
    assert "stopped at budget" in page and "Resume with this cap" in page

    refused = admin_client.post(
        reverse("scoring:api-run-resume", args=[run.pk]), {}, content_type="application/json"
    )
    assert refused.status_code == 409 and "would stop again at once" in refused.json()["detail"]
    resumed = admin_client.post(
        reverse("scoring:api-run-resume", args=[run.pk]),
        {"budget_cost": "5"},
        content_type="application/json",
    )
    assert resumed.status_code == 200
    run.refresh_from_db()
    # the offline reference judges report no usage: nothing is counted as spent
    assert (run.status, run.graded) == ("complete", 12)


@pytest.mark.django_db
def test_a_cost_cap_refuses_mixed_currencies_and_unpriced_judges():
    data = build_benchmark(n_questions=1, n_models=1, grade_original=False, with_auditors=False)
    j1, j2 = data.judges
    Judge.objects.filter(pk=j1.pk).update(**PRICES)
    Judge.objects.filter(pk=j2.pk).update(**{**PRICES, "price_currency": "USD"})
    judges = list(Judge.objects.filter(pk__in=[j1.pk, j2.pk]).order_by("judge_id"))
    with pytest.raises(BudgetError, match="cannot mix currencies: .*j1 in GBP, j2 in USD"):
        services.scoring_run_create(edition=data.original, judges=judges, budget_cost="1")
    Judge.objects.filter(pk=j2.pk).update(price_output=None)
    judges = list(Judge.objects.filter(pk__in=[j1.pk, j2.pk]).order_by("judge_id"))
    with pytest.raises(BudgetError, match="judge j2 has none"):
        services.scoring_run_create(edition=data.original, judges=judges, budget_cost="1")
    assert ScoringRun.objects.count() == 0
    # a token cap needs no price
    run = services.scoring_run_create(
        edition=data.original, judges=judges, budget_tokens=10**9, enqueue=False
    )
    assert (run.budget_tokens, run.budget_cost) == (10**9, None)
    # A batch run takes no cap (its calls are billed when the vendor ends the batch), at
    # creation or on resume; nothing is created or changed.
    with pytest.raises(BudgetError, match="a budget cap is for live runs"):
        services.scoring_run_create(
            edition=data.original, judges=judges, budget_tokens=10, mode="batch", enqueue=False
        )
    batch = services.scoring_run_create(
        edition=data.original, judges=judges, mode="batch", enqueue=False
    )
    with pytest.raises(BudgetError, match=f"run {batch.pk} is a batch run"):
        services.scoring_run_resume(run=batch, budget_tokens=10)
    assert ScoringRun.objects.count() == 2
    batch.refresh_from_db()
    assert (batch.budget_tokens, batch.budget_cost) == (None, None)


def test_bad_budget_values_name_the_field():
    assert parse_budget("2.5", "1,000") == (Decimal("2.5"), 1000)
    assert parse_budget(None, "") == (None, None)
    with pytest.raises(BudgetError, match="budget cost: 'ten' is not a number"):
        parse_budget("ten")
    with pytest.raises(BudgetError, match="budget cost: '-1' must be 0 or more"):
        parse_budget("-1")
    with pytest.raises(BudgetError, match="budget tokens: '1.5' is not a whole number"):
        parse_budget(None, "1.5")


@pytest.mark.django_db
def test_chunks_admitted_together_cannot_pass_the_cap_between_them():
    """Two chunks checked before either sends: the second sees the first's reservation.
    A stalled run's reservations (its chunks were killed) are freed by heal_runs."""
    from types import SimpleNamespace

    from scoring.runs.budget import RunBudget

    data = build_benchmark(n_questions=2, n_models=2, grade_original=False, with_auditors=False)
    judge = data.judges[0]
    entries = {e.question_id: e for e in data.original.entries.select_related("question")}
    rows = [
        SimpleNamespace(judge=judge, key_entry=entries[r.question_id], response=r)
        for r in data.responses
    ]
    first, second = rows[:2], rows[2:]
    probe = RunBudget(ScoringRun(benchmark=data.benchmark))
    need = [probe.estimate(chunk) for chunk in (first, second)]
    tokens = [e.tokens_in + e.tokens_out for e in need]
    run = services.scoring_run_create(
        edition=data.original,
        judges=[judge],
        budget_tokens=tokens[0] + tokens[1] - 1,  # one chunk fits, both do not
        enqueue=False,
    )
    a, b = RunBudget(run), RunBudget(run)
    assert a.admit(first) == first
    run.refresh_from_db()
    assert run.budget_reserved_tokens == tokens[0]
    # spent 0 + reserved + its own > cap: the second chunk is cut to what is left (its
    # first pair: one pair's tokens are under half of the chunk's), and the run goes on
    # until that pair is settled (issue 30 item 13)
    one = probe.estimate(second[:1])
    assert tokens[0] + one.tokens_in + one.tokens_out <= tokens[0] + tokens[1] - 1
    assert b.admit(second) == second[:1]
    run.refresh_from_db()
    assert run.status == "pending"
    assert run.budget_reserved_tokens == tokens[0] + one.tokens_in + one.tokens_out
    run = ScoringRun.objects.select_related("benchmark").get(pk=run.pk)
    assert f"({run.budget_reserved_tokens:,} held for calls in flight, part of them spent" in (
        over_budget(run, probe.estimate(second))
    )
    b.release()  # its pair settled: the run stops, saying what finishing would take
    run.refresh_from_db()
    assert run.status == "stopped"
    # (b's pair spent nothing here - no call was made - so the rest would fit now: the note
    # says why the run stopped all the same)
    assert "the chunk was cut to what was left of the budget; its other 1 call was not sent" in (
        run.error
    )
    left = probe.estimate(rows)  # nothing was spent: every pair is still pending
    need = left.tokens_in + left.tokens_out
    offer = math.ceil(need * 1.05)
    assert (
        f"to finish: 4 pairs left, a cost unknown (a judge has no live price) ({need:,} tokens)"
        f" more; resume with a token cap of {offer:,} (the estimate plus 5%)" in run.error
    )
    assert last_finish_offer(run) == {
        "pairs": 4,
        "cost": None,
        "tokens": need,
        "cap_cost": None,
        "cap_tokens": offer,
    }
    a.release()
    run.refresh_from_db()
    assert run.budget_reserved_tokens == 0

    # a killed chunk never releases: heal_runs frees what a stalled run reserved
    ScoringRun.objects.filter(pk=run.pk).update(status="running", budget_reserved_tokens=99)
    ScoringRun.objects.filter(pk=run.pk).update(reported_at=timezone.now() - timedelta(hours=1))
    assert run.pk in services.heal_runs()["resent"]
    run.refresh_from_db()
    assert run.budget_reserved_tokens == 0


@pytest.mark.django_db
def test_spent_counts_the_ledger_and_never_prices_cached_tokens_as_free():
    from scoring.runs.budget import spent

    data = build_benchmark(n_questions=1, n_models=2, grade_original=False, with_auditors=False)
    j1, j2 = data.judges
    Judge.objects.filter(pk=j1.pk).update(**{**PRICES, "price_cached_input": None})
    run = ScoringRun.objects.create(benchmark=data.benchmark, edition=data.original)
    entry = data.original.entries.get()
    usage = [(j1, "ok", 1000, 400, 100), (j1, "lost", None, None, None), (j2, "ok", 500, 0, 50)]
    responses = [*data.responses, data.responses[0]]
    for (judge, outcome, i, c, o), response in zip(usage, responses, strict=True):
        JudgeCall.objects.create(
            run=run,
            judge=judge,
            response=response,
            key_entry=entry,
            prompt_version="v1",
            outcome=outcome,
            input_tokens=i,
            cached_tokens=c,
            output_tokens=o,
        )
    now = spent(run)
    assert now.tokens == 1000 + 100 + 500 + 50  # usage of the calls that reported it
    # j1: 1,000 input (the 400 cached at the input price: no cached price) x 2.50 + 100 x
    # 10.00 per million = 0.0025 + 0.001; j2 has no price: nothing to add
    assert now.cost == Decimal("0.0035")


@pytest.mark.django_db(transaction=True)
def test_a_chunk_near_the_cap_is_cut_to_what_is_left_and_the_offered_cap_finishes(
    judge_server, monkeypatch, settings, admin_client
):
    """Issue 30 item 13: one chunk of 12 pairs and a cost cap at half the estimate: the
    chunk is cut to the pairs that fit, so the run stops within a pair's cost of its cap
    (it stopped a whole chunk below it); the note says what finishing costs and the cap
    that finishes it, the run page fills that cap in, and resuming with it finishes."""
    settings.SNAGLIST_RESCORE_CHUNK = 500
    monkeypatch.setenv(KEY_ENV, "sk-budget-test-not-a-secret")
    data = build_benchmark(n_questions=4, n_models=3, grade_original=False, with_auditors=False)
    judge = data.judges[0]
    _point_at(judge, judge_server)
    Judge.objects.filter(pk=judge.pk).update(**PRICES)
    judge.refresh_from_db()
    judge_server.default = ok(GRADE_1)
    whole = estimate_run(edition=data.original, judges=[judge])
    assert whole.needed == 12
    cap = (whole.cost_live / 2).quantize(Decimal("0.000001"))
    run = services.scoring_run_create(edition=data.original, judges=[judge], budget_cost=cap)
    run.refresh_from_db()
    assert run.status == "stopped" and 0 < run.graded < 12
    _assert_nothing_half_recorded(run)
    spent = Decimal(runs_selectors.run_costs(run)["run"]["cost"])
    per_pair = whole.cost_live / 12
    assert spent <= cap and cap - spent < 2 * per_pair  # a pair or so short, not a chunk
    offer = last_finish_offer(run)
    assert offer["pairs"] == 12 - run.graded
    cap_offered = Decimal(offer["cap_cost"])
    # spend + the estimate of what is left + 5 %, rounded up (4 places below 1)
    assert cap_offered == (spent + Decimal(offer["cost"]) * Decimal("1.05")).quantize(
        Decimal("0.0001"), rounding="ROUND_UP"
    )
    assert f"{spent.quantize(Decimal('0.000001'))} GBP spent of the {cap} GBP cap" in run.error
    assert f"the next {12 - run.graded} calls cost about" in run.error
    assert f"resume with a cost cap of {offer['cap_cost']} GBP" in run.error
    assert "more on their way" not in run.error
    page = admin_client.get(reverse("scoring:run-detail", args=[run.pk])).content.decode()
    assert f'name="budget_cost" size="8" value="{offer["cap_cost"]}"' in page
    assert f"a cost cap of {offer['cap_cost']} GBP (the estimate plus 5%, filled in below)" in page
    services.scoring_run_resume(run=run, budget_cost=offer["cap_cost"])
    run.refresh_from_db()
    assert (run.status, run.graded) == ("complete", 12)
    assert len(judge_server.requests) == 12
