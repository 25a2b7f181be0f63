"""Prices per judge and cost reported (issue 20 items 2 and 5): the cost formula by hand,
empty prices and unknown usage shown as unknown, per judge, run and edition on the run page
and in the API, "paid twice" in money, and price changes in the audit log."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.test import RequestFactory
from django.urls import reverse

from core.models import AuditLogEntry
from scoring.admin import JudgeAdmin
from scoring.models import Judge, JudgeCall, ScoringRun
from scoring.runs import selectors as runs_selectors
from scoring.runs.costs import Prices, calls_cost, tokens_cost
from tests.worker_fixtures import build_benchmark

pytestmark = pytest.mark.django_db

PRICED = {
    "price_currency": "USD",
    "price_input": Decimal("2.50"),
    "price_cached_input": Decimal("1.25"),
    "price_output": Decimal("10.00"),
    "batch_price_input": Decimal("1.25"),
    "batch_price_cached_input": Decimal("0.625"),
    "batch_price_output": Decimal("5.00"),
}


def test_cost_by_hand():
    prices = Prices(Decimal("2.50"), Decimal("1.25"), Decimal("10.00"), "USD")
    # 800k uncached x 2.50 + 200k cached x 1.25 + 50k out x 10, per million: 2 + 0.25 + 0.5
    cost = tokens_cost(prices, input_tokens=1_000_000, cached_tokens=200_000, output_tokens=50_000)
    assert cost == Decimal("2.75")
    # 1,234 in, 56 out at the same prices: 0.003085 + 0.00056
    assert tokens_cost(prices, input_tokens=1234, cached_tokens=0, output_tokens=56) == Decimal(
        "0.003645"
    )


def test_anthropic_cache_writes_cost_a_quarter_more_than_input_and_reads_the_cached_price():
    # Anthropic-like prices per million: input 3.00, cache read 0.30, output 15.00.
    prices = Prices(Decimal("3.00"), Decimal("0.30"), Decimal("15.00"), "USD")
    # 10,000 input of which 6,000 written to the cache and 0 read, 200 out:
    # 4,000 x 3 + 6,000 x 3.75 (1.25 x 3) + 200 x 15 = 12,000 + 22,500 + 3,000 = 37,500 / 1e6
    first = tokens_cost(
        prices, input_tokens=10_000, cached_tokens=0, cache_write_tokens=6_000, output_tokens=200
    )
    assert first == Decimal("0.0375")
    # The same prompt again: 6,000 read at 0.30 = 1,800; 4,000 x 3 = 12,000; out 3,000
    again = tokens_cost(prices, input_tokens=10_000, cached_tokens=6_000, output_tokens=200)
    assert again == Decimal("0.0168")
    with pytest.raises(ValueError, match="cache writes 6"):
        tokens_cost(prices, input_tokens=10, cached_tokens=5, cache_write_tokens=6, output_tokens=0)
    # A cache write needs the input price only.
    no_cached = Prices(Decimal("3.00"), None, None, "USD")
    assert tokens_cost(
        no_cached, input_tokens=100, cached_tokens=0, cache_write_tokens=100, output_tokens=0
    ) == Decimal("0.000375")


def test_an_empty_price_makes_the_cost_unknown_only_when_it_is_needed():
    no_cached = Prices(Decimal("3"), None, Decimal("15"), "GBP")
    assert tokens_cost(no_cached, input_tokens=100, cached_tokens=0, output_tokens=10) == Decimal(
        "0.00045"
    )
    assert tokens_cost(no_cached, input_tokens=100, cached_tokens=40, output_tokens=10) is None
    no_output = Prices(Decimal("3"), None, None, "GBP")
    assert tokens_cost(no_output, input_tokens=100, cached_tokens=0, output_tokens=10) is None


def test_bad_token_counts_are_refused():
    prices = Prices(Decimal(1), Decimal(1), Decimal(1), "USD")
    with pytest.raises(ValueError, match="cached 20"):
        tokens_cost(prices, input_tokens=10, cached_tokens=20, output_tokens=0)
    with pytest.raises(ValueError, match="price mode"):
        Prices.of(Judge(), "cheap")


def test_a_negative_price_is_refused_by_the_form_and_the_database():
    data = build_benchmark(n_questions=1, n_models=1, grade_original=False, with_auditors=False)
    judge = data.judges[0]
    judge.price_output = Decimal("-1")
    with pytest.raises(ValidationError) as error:
        judge.full_clean()
    assert "price_output" in error.value.message_dict
    with pytest.raises(IntegrityError), transaction.atomic():
        judge.save()


@pytest.fixture
def ledger():
    """One run: j1 (priced, USD) answered 2 calls with usage; j2 (no prices) answered 1 with
    usage, lost 1 at a kill (sent, outcome unknown) and had 1 retried."""
    data = build_benchmark(n_questions=2, n_models=1, grade_original=False, with_auditors=False)
    j1, j2 = data.judges
    Judge.objects.filter(pk=j1.pk).update(**PRICED)
    run = ScoringRun.objects.create(benchmark=data.benchmark, edition=data.original)
    entries = list(data.original.entries.order_by("id"))
    responses = list(data.responses)

    def call(judge, n, outcome="ok", **tokens):
        return JudgeCall.objects.create(
            run=run,
            judge=judge,
            response=responses[n],
            key_entry=entries[n],
            prompt_version=judge.prompt_version,
            outcome=outcome,
            **tokens,
        )

    call(j1, 0, input_tokens=1000, output_tokens=40, cached_tokens=0)
    call(j1, 1, input_tokens=3000, output_tokens=60, cached_tokens=2000)
    call(j2, 0, input_tokens=500, output_tokens=20, cached_tokens=0)
    call(j2, 1, outcome="lost")
    call(j2, 1, outcome="retry")  # an HTTP error: not billed
    return data, run


def test_cost_per_judge_and_in_total(ledger):
    data, run = ledger
    summary = calls_cost(JudgeCall.objects.filter(run=run))
    j1, j2 = summary["judges"]
    # j1: 2000 uncached x 2.50 + 2000 cached x 1.25 + 100 out x 10, per million
    assert j1 == {
        "judge": "j1",
        "currency": "USD",
        "calls": 2,
        "outcome_unknown": 0,
        "unknown_usage": 0,
        "input_tokens": 4000,
        "cached_tokens": 2000,
        "cache_write_tokens": 0,
        "output_tokens": 100,
        "cost": "0.008500",
        "by_mode": [],  # every call sent live: no split
    }
    # the lost call is sent, outcome unknown: not a paid call (issue 26 item 3)
    assert (j2["calls"], j2["outcome_unknown"], j2["unknown_usage"]) == (1, 1, 0)
    assert (j2["input_tokens"], j2["cost"]) == (500, None)
    assert (summary["calls"], summary["outcome_unknown"]) == (3, 1)
    assert summary["cost"] is None  # j2's cost is unknown, so the total is too
    assert any("j2 has no live price" in n for n in summary["notes"])
    assert not any("reported no usage" in n for n in summary["notes"])
    batch = calls_cost(JudgeCall.objects.filter(run=run, judge__judge_id="j1"), mode="batch")
    assert batch["cost"] == "0.004250"  # the batch prices are half the live ones


def test_calls_that_reported_no_usage_have_unknown_tokens_not_zero(ledger):
    data, run = ledger
    only_lost = calls_cost(JudgeCall.objects.filter(run=run, outcome="lost"))
    assert only_lost["judges"][0]["input_tokens"] is None
    assert only_lost["input_tokens"] is None
    assert only_lost["cost"] is None


def _admin(client):
    user = User.objects.create_user("admin1", password="x-very-long-pass-1")
    user.groups.add(Group.objects.get(name="admin"))
    client.force_login(user)
    return user


def test_the_run_page_and_api_report_cost_per_judge_and_unknowns(client, ledger):
    data, run = ledger
    _admin(client)
    page = client.get(reverse("scoring:run-detail", args=[run.pk])).content.decode()
    assert "Tokens and cost" in page
    assert "0.008500 USD" in page  # j1
    assert "unknown" in page  # j2's cost, and the lost call's usage
    assert '<th scope="col" class="num">Sent, outcome unknown</th>' in page
    # j2: 1 call paid, 1 sent with outcome unknown; the run: 3 paid, 1 unknown
    assert '<td class="num">1</td>\n        <td class="num">1</td>' in page
    assert '<th scope="row">This run</th><td class="num">3</td><td class="num">1</td>' in page
    body = client.get(reverse("scoring:api-run-detail", args=[run.pk])).json()
    assert body["costs"]["run"]["judges"][0]["cost"] == "0.008500"
    assert body["costs"]["run"]["judges"][1]["cost"] is None
    assert (body["costs"]["edition"]["calls"], body["costs"]["edition"]["outcome_unknown"]) == (
        3,
        1,
    )
    listing = client.get(reverse("scoring:runs")).content.decode()
    assert "+ 1 sent, outcome unknown" in listing


def test_calls_in_flight_and_lost_at_a_kill_are_never_counted_as_paid(ledger):
    """A call is written "started" before it goes out and counts as paid only once its reply is
    recorded ("ok"): one in flight, or in flight at a kill, is sent, outcome unknown (the
    chaos bench's loopback judge received 566 calls where the ledger counted 614 paid)."""
    from scoring.runs.costs import costs_of_runs

    data, run = ledger
    j1 = data.judges[0]
    JudgeCall.objects.create(
        run=run,
        judge=j1,
        response=data.responses[0],
        key_entry=data.original.entries.order_by("id").first(),
        prompt_version=j1.prompt_version,
        outcome="started",
    )
    summary = calls_cost(JudgeCall.objects.filter(run=run))
    assert (summary["calls"], summary["outcome_unknown"]) == (3, 2)
    assert summary["judges"][0]["cost"] == "0.008500"  # j1's in-flight call costs nothing yet
    assert costs_of_runs([run.pk])[run.pk]["calls"] == 3
    assert costs_of_runs([run.pk])[run.pk]["outcome_unknown"] == 2


def test_paid_twice_is_reported_in_money(client, ledger):
    data, run = ledger
    j1 = Judge.objects.get(pk=data.judges[0].pk)
    first = JudgeCall.objects.filter(run=run, judge=j1).order_by("id").first()
    again = ScoringRun.objects.create(benchmark=data.benchmark, edition=data.original)
    JudgeCall.objects.create(
        run=again,
        judge=j1,
        response=first.response,
        key_entry=first.key_entry,
        prompt_version=first.prompt_version,
        outcome="ok",
        input_tokens=1000,
        output_tokens=40,
        cached_tokens=0,
    )
    costs = runs_selectors.run_costs(again)
    # 1000 x 2.50 + 40 x 10, per million
    assert (costs["paid_twice"]["calls"], costs["paid_twice"]["cost"]) == (1, "0.002900")
    assert costs["edition_paid_twice"]["cost"] == "0.002900"
    assert runs_selectors.ledger_summary(again)["paid_twice"] == 1
    _admin(client)
    page = client.get(reverse("scoring:run-detail", args=[again.pk])).content.decode()
    assert "1 call, 0.002900 USD" in page


def test_a_price_change_in_the_admin_is_audit_logged():
    data = build_benchmark(n_questions=1, n_models=1, grade_original=False, with_auditors=False)
    judge = Judge.objects.get(pk=data.judges[0].pk)
    user = User.objects.create_superuser("root", password="x-very-long-pass-1")
    request = RequestFactory().post("/admin/")
    request.user = user
    admin = JudgeAdmin(Judge, None)
    judge.price_input, judge.price_currency = Decimal("3.00"), "GBP"
    admin.save_model(request, judge, form=None, change=True)
    entry = AuditLogEntry.objects.get(action="judge.prices_set")
    assert entry.before["price_input"] is None
    assert (entry.after["price_input"], entry.after["price_currency"]) == ("3.000000", "GBP")
    assert entry.actor == user
    judge.name = "renamed, prices unchanged"
    admin.save_model(request, judge, form=None, change=True)
    assert AuditLogEntry.objects.filter(action="judge.prices_set").count() == 1


def test_the_runs_list_shows_each_runs_cost(client, ledger):
    data, run = ledger
    j1 = data.judges[0]
    priced = ScoringRun.objects.create(benchmark=data.benchmark, edition=data.original)
    first = JudgeCall.objects.filter(run=run, judge=j1).first()
    JudgeCall.objects.create(
        run=priced,
        judge=j1,
        response=first.response,
        key_entry=first.key_entry,
        prompt_version=first.prompt_version,
        outcome="ok",
        input_tokens=1000,
        output_tokens=40,
        cached_tokens=0,
    )
    ScoringRun.objects.create(benchmark=data.benchmark, edition=data.original)  # no call yet
    _admin(client)
    page = client.get(reverse("scoring:runs")).content.decode()
    assert "0.002900 USD" in page  # the priced run
    assert "unknown" in page  # the first run: j2 has no prices
    assert "no call" in page


def test_the_report_carries_the_editions_cost(ledger):
    from scoring.board.report import build_report, report_markdown

    data, run = ledger
    doc = build_report(data.original)
    spent = doc["judge_costs"]["spent"]
    assert [j["cost"] for j in spent["judges"]] == ["0.008500", None]
    assert spent["cost"] is None and (spent["calls"], spent["outcome_unknown"]) == (3, 1)
    assert doc["judge_costs"]["paid_twice"]["calls"] == 0
    md = report_markdown(doc)
    assert "## Judge calls and cost" in md
    assert "| j1 | 2 | 0 | 0 | 4000 | 2000 | 100 | 0.008500 USD |" in md
    assert "| j2 | 1 | 1 | 0 | 500 | 0 | 20 | unknown |" in md
    assert "for 3 paid calls (1 more sent, outcome unknown: not counted as paid)" in md


def test_judges_in_two_currencies_get_no_total(ledger):
    data, run = ledger
    j2 = data.judges[1]
    Judge.objects.filter(pk=j2.pk).update(**{**PRICED, "price_currency": "GBP"})
    summary = calls_cost(JudgeCall.objects.filter(run=run))
    # j2 priced now: 500 x 2.50 + 20 x 10, per million = 0.00145 GBP (its lost call left out)
    assert [j["cost"] for j in summary["judges"]] == ["0.008500", "0.001450"]
    assert summary["cost"] is None and summary["currency"] == ""
    assert any("different currencies" in n for n in summary["notes"])
    Judge.objects.filter(pk=j2.pk).update(price_currency="USD")
    summary = calls_cost(JudgeCall.objects.filter(run=run))
    assert (summary["cost"], summary["currency"]) == ("0.009950", "USD")
