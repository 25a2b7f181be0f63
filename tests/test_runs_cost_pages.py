"""What the runs pages say about a run's calls and cost (issue 30 item 14): a run with calls
of unknown usage is marked partial on the runs list as on its page; a cancelled batch
run's requests without a reply are not called "retried (judge unavailable)" nor "sent
again live"; a batch the vendor failed gives the vendor's reason; a run mixing batch and
live calls splits them; token counts have thousands separators."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client

import tests.judge_server as loopback
from scoring.models import JudgeBatch, JudgeCall
from scoring.runs import selectors as runs_selectors
from scoring.runs import services
from scoring.runs.tasks import poll_batches, run_start
from tests.judge_batches import BatchPlan
from tests.test_batch_mode import GRADE_1, PAIRS, _batch_run, _point_at, data  # noqa: F401

judge_server = loopback.judge_server
pytestmark = pytest.mark.django_db(transaction=True)
PRICES = {
    "price_currency": "USD",
    "price_input": Decimal("2.50"),
    "price_cached_input": Decimal("1.25"),
    "price_output": Decimal("10.00"),
    "batch_price_input": Decimal("1.25"),
    "batch_price_cached_input": Decimal("0.625"),
    "batch_price_output": Decimal("5.00"),
}


def _admin() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("cost-admin", password="x-long-enough-1"))
    return client


def _page(client: Client, run) -> str:
    return client.get(f"/runs/{run.pk}/").content.decode()


def test_a_cancelled_batch_runs_requests_are_not_called_retried_or_sent_again(
    data,  # noqa: F811
    judge_server,
):
    judge_server.default = loopback.ok(GRADE_1)
    judge_server.plan_batches(BatchPlan(polls=5, ran_before_cancel=2))
    run = _batch_run(data, judge_server, "anthropic")
    client = _admin()
    client.post(f"/runs/{run.pk}/cancel/")
    poll_batches.delay()  # the cancel is sent
    poll_batches.delay()  # ended: settled
    ledger = runs_selectors.ledger_summary(run)
    assert (ledger["retries"], ledger["batch_no_reply"]) == (0, PAIRS - 2)
    assert ledger["batch_not_sent_again"] == PAIRS - 2
    page = _page(client, run)
    assert "<dt>Retried (judge unavailable)</dt><dd>0</dd>" in page
    assert (
        "<dt>Batch requests without a reply (not billed)</dt><dd>4 "
        '<span class="muted">(4 not sent again: the run was cancelled)</span>' in page
    )
    assert "the requests they brought no answer for were not sent again (4)." in page
    assert "sent again live" not in page and "are sent again" not in page


def test_a_failed_batch_gives_the_vendors_reason_and_a_mixed_run_splits_its_calls(
    data,  # noqa: F811
    judge_server,
):
    """OpenAI fails a batch whose input it refuses: its reason is on the batch; its
    requests go again live (SNAGLIST_BATCH_FAILED_RETRY "live"). The run's calls are then
    split into batch and live, each at its own prices."""
    judge = data.judges[0]
    for name, value in PRICES.items():
        setattr(judge, name, value)  # saved by _batch_run
    judge_server.default = loopback.ok(GRADE_1)
    reason = "The input file's line 3 has a body over the size limit."
    judge_server.plan_batches(BatchPlan(fail=reason))
    run = _batch_run(data, judge_server, "openai")
    polled = poll_batches.delay().get()  # failed: every request sent again live
    batch = JudgeBatch.objects.get(run=run)
    assert batch.status == "failed" and batch.vendor_status == "failed"
    assert batch.detail == f"failed at the vendor: invalid_request: {reason}"
    assert sorted(polled["again"]["live"][str(run.pk)]) == sorted(
        [i.pair() for i in run.items.all()]
    )
    run.refresh_from_db()
    assert (run.status, run.graded) == ("complete", PAIRS)
    client = _admin()
    page = _page(client, run)
    assert f"failed at the vendor: invalid_request: {reason}" in page.replace("&#x27;", "'")
    ledger = runs_selectors.ledger_summary(run)
    assert (ledger["batch_no_reply"], ledger["batch_not_sent_again"]) == (PAIRS, 0)
    assert ledger["modes"] == ["batch", "live"]
    # no billed batch call: the split needs both; a second run on another edition mixes
    # them (2 answered in the batch, 4 expired and answered live)
    second = _mixed_run(data, judge_server)
    calls = JudgeCall.objects.filter(run=second, outcome="ok")
    assert sorted(calls.values_list("mode", flat=True)) == ["batch"] * 2 + ["live"] * 4
    (row,) = runs_selectors.run_costs(second)["run"]["judges"]
    split = {m["mode"]: m for m in row["by_mode"]}
    assert (split["batch"]["calls"], split["live"]["calls"]) == (2, 4)
    parts = Decimal(split["batch"]["cost"]) + Decimal(split["live"]["cost"])
    assert abs(parts - Decimal(row["cost"])) <= Decimal("0.000001")  # each rounded to 6 places
    page = _page(client, second)
    assert "of which in vendor batches" in page and "of which sent live" in page
    # thousands separators on token counts
    assert row["input_tokens"] >= 1000
    assert f'<td class="num">{row["input_tokens"]:,}</td>' in page


def _mixed_run(data, judge_server):  # noqa: F811
    """A batch run of the same pairs again (a new prompt version: none is graded there)
    whose batch runs 2 requests before the rest expire; those are answered live."""
    judge = data.judges[0]
    type(judge).objects.filter(pk=judge.pk).update(prompt_version="judge-v2")
    judge.refresh_from_db()
    judge_server.plan_batches(BatchPlan(expire_after=2))
    run = services.scoring_run_create(
        edition=data.original, judges=[judge], enqueue=False, mode="batch"
    )
    run_start.delay(run.pk)
    poll_batches.delay()
    run.refresh_from_db()
    assert (run.status, run.graded) == ("complete", PAIRS), run.error
    return run


def test_the_runs_list_marks_a_cost_with_calls_of_unknown_usage_as_partial(
    data,  # noqa: F811
    judge_server,
):
    judge = data.judges[0]
    for name, value in PRICES.items():
        setattr(judge, name, value)
    _point_at(judge, judge_server, "openai")
    judge_server.default = loopback.ok(GRADE_1)
    judge_server.script(loopback.no_usage(GRADE_1), loopback.no_usage(GRADE_1))
    run = services.scoring_run_create(edition=data.original, judges=[judge])
    run.refresh_from_db()
    assert run.status == "complete"
    cost = runs_selectors.run_costs(run)["run"]
    assert cost["unknown_usage"] == 2 and cost["cost"] is not None
    page = _admin().get("/runs/").content.decode()
    assert (
        f'{cost["cost"]} USD <span class="badge warn" title="2 paid calls reported no usage: '
        'not in this cost">partial</span> <span class="muted">2 calls with usage unknown</span>'
    ) in page
