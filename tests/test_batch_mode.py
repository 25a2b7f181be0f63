"""Batch mode (issue 20 item 6): a run's judge calls through the vendors' batch APIs, with the
real openai / anthropic SDKs against the loopback judge API (tests/judge_server.py,
tests/judge_batches.py), settled through the live path's ledger and settler.

Exactly once: a batch polled twice, its results fetched twice, or a worker that crashed
between the vendor accepting a batch and the batch's id being recorded, stores each grade
once and has one billed ledger row per answered request.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.db.models import Sum
from django.test import Client
from django.utils import timezone

import tests.judge_server as loopback
from judges import GradingInput
from judges.prompts import render_judge_prompt
from scoring.models import Grade, JudgeBatch, JudgeCall, PairLease, RunItem, ScoringRun
from scoring.runs import services
from scoring.runs.services import batch_mode
from scoring.runs.services.backends import citation_text, judge_backend
from scoring.runs.tasks import poll_batches, run_start
from tests.judge_batches import BatchPlan
from tests.judge_server import JudgeServer, count_tokens, malformed, status
from tests.test_judge_server import KEY_ENV, SDKS
from tests.worker_fixtures import build_benchmark

judge_server = loopback.judge_server
GRADE_1 = '{"grade": 1, "rationale": "partly right", "flag": false, "flag_reason": ""}'
PAIRS = 6  # 3 questions x 2 models, one judge


@pytest.fixture
def data(monkeypatch, judge_server: JudgeServer):
    monkeypatch.setenv(KEY_ENV, "sk-batch-test-not-a-secret")
    return build_benchmark(
        n_questions=3, n_models=2, grade_original=False, with_auditors=False, name="batch"
    )


def _point_at(judge, server: JudgeServer, sdk: str) -> None:
    judge.backend = sdk
    judge.model = f"loopback-{sdk}"
    judge.base_url = server.url + "/v1" if sdk == "openai" else server.url
    judge.api_key_env = KEY_ENV
    judge.backend_settings = {"max_retries": 0, "timeout": 5}
    judge.save()


def _batch_run(data, server, sdk) -> ScoringRun:
    judge = data.judges[0]
    _point_at(judge, server, sdk)
    run = services.scoring_run_create(
        edition=data.original, judges=[judge], enqueue=False, mode="batch"
    )
    run_start.delay(run.pk)
    run.refresh_from_db()
    return run


def _ledger(run):
    calls = JudgeCall.objects.filter(run=run)
    return {
        "ok": calls.filter(outcome="ok").count(),
        "batch_ok": calls.filter(outcome="ok", mode="batch").count(),
        "live_ok": calls.filter(outcome="ok", mode="live").count(),
        "retry": calls.filter(outcome="retry").count(),
        "started": calls.filter(outcome="started").count(),
    }


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sdk", SDKS)
def test_a_batch_round_trip_through_the_sdk_grades_each_pair_once(sdk, data, judge_server):
    judge_server.default = loopback.ok(GRADE_1)
    run = _batch_run(data, judge_server, sdk)
    # submitted, nothing graded yet; no live call was made
    assert run.status == "running" and run.done == 0
    assert not [p for p in judge_server.paths if p.endswith(("/chat/completions", "/messages"))]
    batch = JudgeBatch.objects.get(run=run)
    assert (batch.status, batch.vendor, batch.requests) == ("submitted", sdk, PAIRS)
    assert batch.vendor_batch_id in judge_server.batch_api.batches
    assert len(judge_server.batch_lines) == PAIRS
    assert RunItem.objects.filter(run=run, holder=f"batch:{batch.pk}").count() == PAIRS

    # each line is the live builder's request for its pair: same prompt, same parameters
    item = RunItem.objects.select_related("response", "key_entry__question").get(
        run=run, pk=batch.pairs[judge_server.batch_lines[0]["custom_id"]][0]
    )
    prompt = render_judge_prompt(
        GradingInput(
            question=item.key_entry.question.text,
            key_answer=item.key_entry.answer,
            citation_text=citation_text(item.key_entry),
            response=item.response.text,
        )
    )
    backend = judge_backend(data.judges[0])
    live = (
        backend._body(prompt, backend.config.max_tokens)
        if sdk == "openai"
        else {
            k: v
            for k, v in backend._request(prompt, backend.config.max_tokens).items()
            if k != "extra_body"
        }
    )
    line = judge_server.batch_lines[0]["body"]
    assert {k: v for k, v in line.items() if k != "temperature"} == {
        k: v for k, v in live.items() if k != "temperature"
    }
    content = line["messages"][0]["content"]
    if sdk == "anthropic":  # the prefix a question's responses share, marked for the cache
        assert content[0]["cache_control"] == {"type": "ephemeral"}
        content = "".join(block["text"] for block in content)
    assert item.response.text.strip() in content

    done = poll_batches.delay().get()
    assert done["settled"] == [batch.pk]
    run.refresh_from_db()
    assert (run.status, run.done, run.graded) == ("complete", PAIRS, PAIRS)
    assert Grade.objects.filter(run=run, grade=1).count() == PAIRS
    assert _ledger(run) == {"ok": PAIRS, "batch_ok": PAIRS, "live_ok": 0, "retry": 0, "started": 0}
    calls = JudgeCall.objects.filter(run=run)
    assert calls.aggregate(o=Sum("output_tokens"))["o"] == PAIRS * count_tokens(GRADE_1)
    assert calls.filter(input_tokens__gt=100).count() == PAIRS  # the rendered prompts' tokens
    assert not PairLease.objects.filter(run=run).exists()
    batch.refresh_from_db()
    assert batch.status == "settled" and batch.counts == {"succeeded": PAIRS}


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_batch_run_settles_on_sqlite_too(data, judge_server):
    """The same path on SQLite (no row locks there; one writer at a time)."""
    run = _batch_run(data, judge_server, "anthropic")
    assert JudgeBatch.objects.get(run=run).status == "submitted"
    poll_batches.delay()
    poll_batches.delay()
    run.refresh_from_db()
    assert (run.status, run.graded) == ("complete", PAIRS)
    assert _ledger(run) == {"ok": PAIRS, "batch_ok": PAIRS, "live_ok": 0, "retry": 0, "started": 0}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sdk", SDKS)
def test_a_batch_polled_twice_and_settled_twice_stores_and_pays_once(sdk, data, judge_server):
    judge_server.plan_batches(BatchPlan(polls=2))
    run = _batch_run(data, judge_server, sdk)
    batch = JudgeBatch.objects.get(run=run)
    for _ in range(2):  # in progress at the vendor: nothing settled
        poll_batches.delay()
        run.refresh_from_db()
        assert run.done == 0
    batch.refresh_from_db()
    assert (batch.status, batch.polls) == ("submitted", 2)
    poll_batches.delay()
    poll_batches.delay()  # an ended, settled batch is not looked at again
    # the results fetched and settled a second time (a poller that died after settling
    # but before its status was seen, say): nothing is stored or paid again
    JudgeBatch.objects.filter(pk=batch.pk).update(status="submitted")
    poll_batches.delay()
    run.refresh_from_db()
    assert (run.status, run.done, run.graded, run.reused) == ("complete", PAIRS, PAIRS, 0)
    assert Grade.objects.filter(run=run).count() == PAIRS
    assert JudgeCall.objects.filter(run=run).count() == PAIRS
    assert _ledger(run)["batch_ok"] == PAIRS
    assert len(judge_server.batch_api.batches) == 1


class _Crash(Exception):
    """A worker killed between the vendor accepting a batch and its id being recorded."""


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sdk", SDKS)
def test_a_worker_killed_after_submitting_resumes_without_sending_again(
    sdk, data, judge_server, monkeypatch
):
    def crash(*args, **kwargs):
        raise _Crash

    monkeypatch.setattr(batch_mode, "record_submitted", crash)
    with pytest.raises(_Crash):
        _batch_run(data, judge_server, sdk)
    monkeypatch.undo()
    monkeypatch.setenv(KEY_ENV, "sk-batch-test-not-a-secret")
    batch = JudgeBatch.objects.get()
    assert (batch.status, batch.vendor_batch_id) == ("preparing", "")
    assert len(judge_server.batch_api.batches) == 1  # the vendor has it
    # the pairs stay leased to the batch: heal_runs past a pair lease does not free them
    later = timezone.now() + timedelta(seconds=90)
    assert services.heal_runs(now=later)["leases"] == 0
    for _ in range(3):  # adopt the vendor's batch (found by its tag), then settle it
        poll_batches.delay()
    batch.refresh_from_db()
    assert batch.status == "settled"
    assert len(judge_server.batch_api.batches) == 1  # never sent twice
    run = batch.run
    run.refresh_from_db()
    assert (run.status, run.graded) == ("complete", PAIRS)
    assert Grade.objects.filter(run=run).count() == PAIRS
    assert _ledger(run) == {"ok": PAIRS, "batch_ok": PAIRS, "live_ok": 0, "retry": 0, "started": 0}


@pytest.mark.django_db(transaction=True)
def test_a_batch_the_vendor_never_got_is_sent_by_the_poller(data, judge_server, monkeypatch):
    from judges import JudgeUnavailable
    from judges.batch import OpenAIBatchAPI

    real = OpenAIBatchAPI.submit

    def down(self, requests, tag):
        raise JudgeUnavailable("connection error calling the vendor")

    monkeypatch.setattr(OpenAIBatchAPI, "submit", down)
    run = _batch_run(data, judge_server, "openai")
    batch = JudgeBatch.objects.get(run=run)
    assert batch.status == "preparing" and "not sent yet" in batch.detail
    monkeypatch.setattr(OpenAIBatchAPI, "submit", real)
    poll_batches.delay()  # not at the vendor: sent now
    assert len(judge_server.batch_api.batches) == 1
    poll_batches.delay()
    run.refresh_from_db()
    assert (run.status, run.graded) == ("complete", PAIRS)
    assert _ledger(run)["batch_ok"] == PAIRS


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sdk", SDKS)
def test_failed_requests_are_retried_live_by_default(sdk, data, judge_server, settings):
    settings.SNAGLIST_BATCH_FAILED_RETRY = "live"
    # request 1 errors (HTTP 500), request 2 is unparseable, the last 2 expire
    judge_server.script(status(500), malformed())
    judge_server.plan_batches(BatchPlan(expire_after=4))
    run = _batch_run(data, judge_server, sdk)
    poll_batches.delay()
    run.refresh_from_db()
    live_calls = [p for p in judge_server.paths if p.endswith(("/chat/completions", "/messages"))]
    assert len(live_calls) == 3  # the errored and the 2 expired, asked again live
    assert (run.status, run.done, run.graded, run.unparsed) == ("complete", PAIRS, PAIRS, 1)
    assert _ledger(run) == {"ok": 6, "batch_ok": 3, "live_ok": 3, "retry": 3, "started": 0}
    batch = JudgeBatch.objects.get(run=run)
    assert batch.counts == {"succeeded": 3, "errored": 1, "expired": 2}
    assert Grade.objects.filter(run=run).count() == PAIRS


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sdk", SDKS)
def test_failed_requests_go_in_the_next_batch_when_set(sdk, data, judge_server, settings):
    settings.SNAGLIST_BATCH_FAILED_RETRY = "batch"
    judge_server.script(status(500))
    judge_server.plan_batches(BatchPlan(expire_after=4), BatchPlan(polls=1))
    run = _batch_run(data, judge_server, sdk)
    poll_batches.delay()  # settles 3, sends 3 again in a second batch
    assert not [p for p in judge_server.paths if p.endswith(("/chat/completions", "/messages"))]
    first, second = JudgeBatch.objects.filter(run=run).order_by("pk")
    assert (first.status, second.status, second.requests) == ("settled", "submitted", 3)
    run.refresh_from_db()
    assert (run.status, run.done) == ("running", 3)
    poll_batches.delay()  # in progress
    poll_batches.delay()
    run.refresh_from_db()
    assert (run.status, run.done, run.graded) == ("complete", PAIRS, PAIRS)
    assert _ledger(run) == {"ok": 6, "batch_ok": 6, "live_ok": 0, "retry": 3, "started": 0}


@pytest.mark.django_db(transaction=True)
def test_a_pair_failing_in_every_batch_is_given_up(data, judge_server, settings):
    settings.SNAGLIST_BATCH_FAILED_RETRY = "batch"
    judge_server.default = status(500)
    run = _batch_run(data, judge_server, "anthropic")
    for _ in range(4):
        poll_batches.delay()
    run.refresh_from_db()
    assert (run.status, run.done, run.failed) == ("failed", PAIRS, PAIRS)
    assert JudgeBatch.objects.filter(run=run).count() == 3  # BATCH_MAX_ATTEMPTS
    assert not JudgeCall.objects.filter(run=run, outcome__in=["ok", "lost", "started"]).exists()
    item = RunItem.objects.filter(run=run).first()
    assert "given up after 3 attempts" in item.detail


@pytest.mark.django_db(transaction=True)
def test_an_expired_openai_batch_settles_what_ran(data, judge_server, settings):
    settings.SNAGLIST_BATCH_FAILED_RETRY = "live"
    judge_server.plan_batches(BatchPlan(expire_after=0))
    run = _batch_run(data, judge_server, "openai")
    poll_batches.delay()
    batch = JudgeBatch.objects.get(run=run)
    assert batch.vendor_status == "expired" and batch.counts == {"expired": PAIRS}
    run.refresh_from_db()
    assert (run.status, run.graded) == ("complete", PAIRS)
    assert _ledger(run) == {"ok": 6, "batch_ok": 0, "live_ok": 6, "retry": 6, "started": 0}


@pytest.mark.django_db(transaction=True)
def test_the_poller_renews_a_batch_lease_and_the_run_is_not_stalled(data, judge_server):
    judge_server.plan_batches(BatchPlan(polls=5))
    run = _batch_run(data, judge_server, "openai")
    soon = timezone.now() + timedelta(seconds=5)
    RunItem.objects.filter(run=run).update(lease_until=soon)
    PairLease.objects.filter(run=run).update(lease_until=soon)
    ScoringRun.objects.filter(pk=run.pk).update(reported_at=timezone.now() - timedelta(hours=1))
    poll_batches.delay()
    held = RunItem.objects.filter(run=run, lease_until__gt=soon + timedelta(seconds=60))
    assert held.count() == PAIRS
    assert PairLease.objects.filter(run=run, lease_until__gt=soon + timedelta(seconds=60)).count()
    run.refresh_from_db()
    assert run.reported_at > timezone.now() - timedelta(seconds=30)
    # a run sent again while its batch is out claims nothing and sends nothing
    run_start.delay(run.pk)
    assert JudgeBatch.objects.filter(run=run).count() == 1
    assert len(judge_server.batch_lines) == PAIRS


@pytest.mark.django_db(transaction=True)
def test_a_judge_without_a_batch_api_is_graded_live_in_a_batch_run(data):
    # the offline reference judges have no vendor batch API
    run = services.scoring_run_create(
        edition=data.original, judges=data.judges, mode="batch", enqueue=False
    )
    run_start.delay(run.pk)
    run.refresh_from_db()
    assert (run.status, run.graded) == ("complete", 2 * PAIRS)
    assert not JudgeBatch.objects.exists()


@pytest.mark.django_db
def test_a_run_mode_is_checked(data):
    from questions.errors import DomainError

    with pytest.raises(DomainError, match="unknown run mode 'cheap'"):
        services.scoring_run_create(edition=data.original, judges=data.judges, mode="cheap")
    with pytest.raises(DomainError, match="batch mode is for re-scoring runs"):
        services.scoring_run_create(
            edition=data.original, judges=data.auditors or data.judges, kind="audit", mode="batch"
        )


def test_custom_ids_carry_the_pair_and_fit_the_vendors_rules():
    from judges.batch import custom_id

    assert custom_id("snaglist-b7", 12, 3, 45, "v2") == "snaglist-b7-r12-j3-e45-vv2"
    assert (
        custom_id("snaglist-b7", 12, 3, 45, "2024.1 beta") == "snaglist-b7-r12-j3-e45-v2024_1_beta"
    )
    long = custom_id("snaglist-b7", 12, 3, 45, "x" * 80)
    assert len(long) == 64
    with pytest.raises(ValueError, match="not a valid batch request id"):
        custom_id("bad tag!", 1, 2, 3, "v1")


# -- costs: batch calls at batch prices ---------------------------------------------------

PRICES = {
    "price_currency": "USD",
    "price_input": "2.00",
    "price_cached_input": "0.50",
    "price_output": "8.00",
    "batch_price_input": "1.00",
    "batch_price_cached_input": "0.25",
    "batch_price_output": "4.00",
}


@pytest.mark.django_db
def test_each_call_is_priced_at_the_prices_of_the_way_it_was_sent(data):
    from scoring.models import Judge
    from scoring.runs.costs import calls_cost, costs_of_runs

    judge = data.judges[0]
    Judge.objects.filter(pk=judge.pk).update(**PRICES)
    run = ScoringRun.objects.create(benchmark=data.benchmark, edition=data.original, mode="batch")
    entry = data.original.entries.order_by("id").first()
    for mode, response in zip(("batch", "live"), data.responses[:2], strict=True):
        JudgeCall.objects.create(
            run=run,
            judge=judge,
            response=response,
            key_entry=entry,
            prompt_version=judge.prompt_version,
            outcome="ok",
            mode=mode,
            input_tokens=1_000_000,
            cached_tokens=200_000,
            output_tokens=50_000,
        )
    # by hand, per million tokens: batch 0.8 x 1.00 + 0.2 x 0.25 + 0.05 x 4.00 = 1.05;
    # live 0.8 x 2.00 + 0.2 x 0.50 + 0.05 x 8.00 = 2.10; together 3.15
    summary = calls_cost(JudgeCall.objects.filter(run=run))
    assert summary["cost"] == "3.150000"
    assert summary["judges"][0]["calls"] == 2
    # split by the way the calls were sent (issue 30 item 14), each at its own prices
    split = {m["mode"]: (m["calls"], m["cost"]) for m in summary["judges"][0]["by_mode"]}
    assert split == {"batch": (1, "1.050000"), "live": (1, "2.100000")}
    assert costs_of_runs([run.pk])[run.pk] == {
        "calls": 2,
        "outcome_unknown": 0,
        "unknown_usage": 0,
        "cost": "3.150000",
        "currency": "USD",
    }
    # every call at one mode's prices (what-if): 2 x 1.05 and 2 x 2.10
    assert calls_cost(JudgeCall.objects.filter(run=run), mode="batch")["cost"] == "2.100000"
    assert calls_cost(JudgeCall.objects.filter(run=run), mode="live")["cost"] == "4.200000"
    # a batch call whose judge has no batch price: unknown, said so
    Judge.objects.filter(pk=judge.pk).update(batch_price_output=None)
    unpriced = calls_cost(JudgeCall.objects.filter(run=run))
    assert unpriced["cost"] is None
    assert any("no batch or live price" in n for n in unpriced["notes"])


@pytest.mark.django_db(transaction=True)
def test_a_batch_run_costs_half_the_same_run_live(data, judge_server):
    from scoring.models import Judge
    from scoring.runs.costs import calls_cost

    run = _batch_run(data, judge_server, "openai")
    poll_batches.delay()
    Judge.objects.filter(pk=data.judges[0].pk).update(**PRICES)
    calls = JudgeCall.objects.filter(run=run)
    totals = calls.aggregate(i=Sum("input_tokens"), o=Sum("output_tokens"))
    # no cached tokens: input x 1.00 + output x 4.00 per million, at batch prices
    by_hand = (Decimal(totals["i"]) * 1 + Decimal(totals["o"]) * 4) / 1_000_000
    assert calls_cost(calls)["cost"] == f"{by_hand.quantize(Decimal('0.000001'))}"
    live = Decimal(calls_cost(calls, mode="live")["cost"])
    assert Decimal(calls_cost(calls)["cost"]) * 2 == live


# -- the Runs page, the API and `rescore --batch` -------------------------------------------


@pytest.fixture
def admin_client(client):
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user("batch-admin", password="x-very-long-pass-1")
    user.groups.add(Group.objects.get(name="admin"))
    client.force_login(user)
    return client


@pytest.mark.django_db(transaction=True)
def test_the_runs_page_starts_a_batch_run_and_shows_its_batches(admin_client, data, judge_server):
    from django.urls import reverse

    _point_at(data.judges[0], judge_server, "anthropic")
    data.judges[1].active = False
    data.judges[1].save()
    page = admin_client.get(reverse("scoring:runs")).content.decode()
    assert '<option value="batch">Batch API (half price, within 24 h)</option>' in page
    response = admin_client.post(
        reverse("scoring:run-create"),
        {"edition": data.original.pk, "kind": "grade", "mode": "batch"},
    )
    run = ScoringRun.objects.get()
    assert response.status_code == 303 and run.mode == "batch"
    batch = JudgeBatch.objects.get(run=run)
    detail = admin_client.get(reverse("scoring:run-detail", kwargs={"pk": run.pk})).content
    detail = detail.decode()
    assert "sent through the vendors' batch APIs" in detail
    assert "Vendor batches" in detail and batch.vendor_batch_id in detail
    assert f"{PAIRS} pairs are waiting in a vendor batch." in detail
    poll_batches.delay()
    detail = admin_client.get(reverse("scoring:run-detail", kwargs={"pk": run.pk})).content
    assert f"succeeded {PAIRS}" in detail.decode()
    refused = admin_client.post(
        reverse("scoring:run-create"),
        {"edition": data.original.pk, "kind": "grade", "mode": "cheap"},
        follow=True,
    )
    assert "Unknown run mode &#x27;cheap&#x27;" in refused.content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_api_starts_a_batch_run_and_lists_its_batches(admin_client, data, judge_server):
    _point_at(data.judges[0], judge_server, "openai")
    created = admin_client.post(
        "/api/scoring/runs/",
        {"benchmark": "batch", "judges": ["j1"], "mode": "batch"},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["mode"] == "batch"
    detail = admin_client.get(f"/api/scoring/runs/{created.json()['id']}/").json()
    (batch,) = detail["batches"]
    assert (batch["judge"], batch["vendor"], batch["status"], batch["requests"]) == (
        "j1",
        "openai",
        "submitted",
        PAIRS,
    )
    assert batch["vendor_batch_id"] in judge_server.batch_api.batches
    bad = admin_client.post(
        "/api/scoring/runs/", {"mode": "cheap"}, content_type="application/json"
    )
    assert bad.status_code == 400 and "mode" in bad.json()


@pytest.mark.django_db(transaction=True)
def test_rescore_batch_makes_a_batch_run(data, judge_server):
    import json
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    _point_at(data.judges[0], judge_server, "openai")
    out = StringIO()
    call_command("rescore", "--judges", "j1", "--batch", "--format", "json", stdout=out)
    document = json.loads(out.getvalue())
    assert (document["mode"], document["status"], document["needed"]) == ("batch", "running", 6)
    assert JudgeBatch.objects.get().requests == PAIRS
    with pytest.raises(CommandError, match="--batch is for a new run"):
        call_command("rescore", "--resume", "--batch", stdout=StringIO(), stderr=StringIO())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sdk", SDKS)
def test_a_cancelled_runs_batch_is_cancelled_at_the_vendor_and_what_ran_is_kept(
    sdk, data, judge_server
):
    """Cancelling a batch-mode run cancels its batch at the vendor at the next poll (once);
    the requests the vendor had run come back, are stored and paid once; the others are
    not billed and not sent again (the run is cancelled)."""
    judge_server.default = loopback.ok(GRADE_1)
    judge_server.plan_batches(BatchPlan(polls=5, ran_before_cancel=2))
    run = _batch_run(data, judge_server, sdk)
    batch = JudgeBatch.objects.get(run=run)
    admin = User.objects.create_superuser("runs-admin", password="x-long-enough-pass-1")
    client = Client()
    client.force_login(admin)
    page = client.post(f"/runs/{run.pk}/cancel/", follow=True).content.decode()
    assert (
        f"Run {run.pk} cancelled. Its 1 vendor batch still out will be cancelled at the vendor"
        " at the next poll (every 60 s)." in page
    )
    assert not [p for p in judge_server.paths if p.endswith("/cancel")]
    poll_batches.delay()  # cancel sent; the vendor says it is cancelling
    batch.refresh_from_db()
    cancels = [p for p in judge_server.paths if p.endswith("/cancel")]
    assert cancels == [f"{'/v1/batches' if sdk == 'openai' else '/v1/messages/batches'}"
                       f"/{batch.vendor_batch_id}/cancel"]  # fmt: skip
    assert batch.status == "submitted"
    assert batch.vendor_status == ("cancelling" if sdk == "openai" else "canceling")
    assert "its run was cancelled: cancel sent to" in batch.detail
    settled = poll_batches.delay().get()  # ended: settled
    assert settled["settled"] == [batch.pk]
    assert settled["again"] == {"live": {}, "batch": {}}  # nothing queued
    poll_batches.delay()  # nothing left to look at
    batch.refresh_from_db()
    assert [p for p in judge_server.paths if p.endswith("/cancel")] == cancels  # once
    assert batch.status == "settled"
    assert batch.counts == {"succeeded": 2, "canceled": PAIRS - 2}
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert Grade.objects.filter(run=run).count() == 2
    ledger = _ledger(run)
    assert (ledger["batch_ok"], ledger["live_ok"], ledger["retry"]) == (2, 0, PAIRS - 2)
    for call in JudgeCall.objects.filter(run=run, outcome="retry"):
        assert call.detail.endswith("; not sent again: its run was cancelled"), call.detail
    pending = RunItem.objects.filter(run=run, state="pending")
    assert pending.count() == PAIRS - 2 and not pending.exclude(holder="").exists()  # released
    assert not PairLease.objects.filter(run=run).exists()
    # no live call and no second batch for the cancelled pairs
    assert not [p for p in judge_server.paths if p.endswith(("/chat/completions", "/messages"))]
    assert len(judge_server.batch_api.batches) == 1


@pytest.mark.django_db(transaction=True)
def test_a_cancelled_runs_batch_the_vendor_never_got_is_not_sent(data, judge_server, monkeypatch):
    """A batch the vendor never got (its submit failed), of a run cancelled meanwhile: the
    poller finds no such batch at the vendor and closes it instead of sending it."""
    from judges import JudgeUnavailable
    from judges.batch import OpenAIBatchAPI

    def down(self, requests, tag):
        raise JudgeUnavailable("connection error calling the vendor")

    monkeypatch.setattr(OpenAIBatchAPI, "submit", down)
    run = _batch_run(data, judge_server, "openai")
    monkeypatch.undo()
    monkeypatch.setenv(KEY_ENV, "sk-batch-test-not-a-secret")
    assert JudgeBatch.objects.get(run=run).status == "preparing"
    services.scoring_run_cancel(run=run)
    poll_batches.delay()
    batch = JudgeBatch.objects.get(run=run)
    assert batch.status == "failed" and "not sent: its run was cancelled" in batch.detail
    assert judge_server.batch_api.batches == {}
    assert not [p for p in judge_server.paths if p.endswith(("/chat/completions", "/messages"))]
    assert Grade.objects.filter(run=run).count() == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sdk", SDKS)
def test_a_batch_that_ended_before_its_cancel_is_settled_not_cancelled(sdk, data, judge_server):
    """The run is cancelled after the vendor ended its batch (between two polls): the poll
    sees the batch ended, sends no cancel and settles it; nothing is left open."""
    judge_server.default = loopback.ok(GRADE_1)
    run = _batch_run(data, judge_server, sdk)  # the loopback batch ends at the first look
    services.scoring_run_cancel(run=run)
    poll_batches.delay()
    batch = JudgeBatch.objects.get(run=run)
    assert batch.status == "settled" and batch.counts == {"succeeded": PAIRS}
    assert not [p for p in judge_server.paths if p.endswith("/cancel")]
    assert Grade.objects.filter(run=run).count() == PAIRS


@pytest.mark.django_db(transaction=True)
def test_a_refused_cancel_is_noted_and_the_batch_still_settles(data, judge_server, monkeypatch):
    """A cancel the vendor refuses (it ended the batch between our look and our cancel)
    does not keep the batch open: noted, and settled at the next poll."""
    from judges import JudgeConfigError
    from judges.batch import OpenAIBatchAPI

    judge_server.plan_batches(BatchPlan(polls=1))
    run = _batch_run(data, judge_server, "openai")
    services.scoring_run_cancel(run=run)

    def refused(self, batch_id):
        raise JudgeConfigError("batch API: HTTP 409 batch has ended")

    monkeypatch.setattr(OpenAIBatchAPI, "cancel", refused)
    poll_batches.delay()  # in progress: cancel refused, noted
    batch = JudgeBatch.objects.get(run=run)
    assert batch.status == "submitted"
    assert "the vendor refused the cancel: batch API: HTTP 409 batch has ended" in batch.detail
    poll_batches.delay()  # ended: settled
    batch.refresh_from_db()
    assert batch.status == "settled" and Grade.objects.filter(run=run).count() == PAIRS
