"""Re-scoring runs (methodology rule 8): only what lacks a grade is bought, and only once."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from io import StringIO

import pytest
from celery import shared_task
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from judges import AuditResult, GradeResult, JudgeUnavailable
from scoring.models import AuditVerdict, Grade, JudgeCall, PairLease, RunItem, ScoringRun
from scoring.runs import selectors as runs_selectors
from scoring.runs import services
from scoring.runs.services import backends, ledger, vendor_sql
from scoring.runs.services.batching import BatchSettler
from scoring.runs.services.work import Finished, PairKey, WorkItem
from tests.worker_fixtures import build_benchmark, publish_correction

pytestmark = pytest.mark.django_db

FOLLOW_UPS: list[int] = []


@shared_task(name="tests.record_follow_up")
def record_follow_up(run_id: int) -> None:
    FOLLOW_UPS.append(run_id)


class CountingBackend:
    """A fake judge: grades 2 when the key answer's first figure is in the response, else 0.

    Counts every call; `unavailable_for` first calls raise JudgeUnavailable (a judge
    answering 429 past its own retry cap); `reply` overrides the raw output.
    """

    def __init__(self, *, unavailable_for: int = 0, unparsed: bool = False):
        self.calls: list[tuple] = []
        self.unavailable_for = unavailable_for
        self.unparsed = unparsed
        self.lock = threading.Lock()

    def grade(self, inp):
        with self.lock:
            self.calls.append(("grade", inp.question, inp.response))
            if len(self.calls) <= self.unavailable_for:
                raise JudgeUnavailable("HTTP 429 from fake: rate limited (after 6 attempts)")
        assert "m1" not in inp.question + inp.citation_text  # the model's name is never shown
        if self.unparsed:
            return GradeResult(
                grade=None,
                rationale="",
                flag=False,
                flag_reason="",
                raw_output="I would rather not say.",
                stop_reason="stop",
                prompt_version="judge-v1",
                parse_error="no grade found",
            )
        figure = next((w for w in inp.key_answer.split() if w.isdigit()), "")
        grade = 2 if figure and figure in inp.response else 0
        return GradeResult(
            grade=grade,
            rationale=f"figure {figure}",
            flag=False,
            flag_reason="",
            raw_output=json.dumps({"grade": grade}),
            stop_reason="stop",
            prompt_version="judge-v1",
        )

    def audit(self, inp):
        with self.lock:
            self.calls.append(("audit", inp.question, inp.key_answer))
        verdict = "correct" if any(c.isdigit() for c in inp.key_answer) else "ungradeable"
        return AuditResult(
            verdict=verdict,
            rationale="fake",
            raw_output=verdict,
            stop_reason="stop",
            prompt_version="auditor-v1",
        )


@pytest.fixture
def fake_backend(monkeypatch):
    backend = CountingBackend()
    monkeypatch.setattr(backends, "judge_backend", lambda judge: backend)
    return backend


@pytest.fixture
def data():
    return build_benchmark(n_questions=6, n_models=3)


def _run(edition, judges, capture, **kwargs):
    with capture(execute=True):
        run = services.scoring_run_create(edition=edition, judges=judges, **kwargs)
    run.refresh_from_db()
    return run


def test_one_question_correction_costs_exactly_models_times_judges_calls(
    data, fake_backend, django_capture_on_commit_callbacks
):
    corrected = publish_correction(data, question_index=0)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.rescore_after_publish(corrected.pk)
    run.refresh_from_db()

    n_models, n_judges = len(data.models), len(data.judges)
    assert len(fake_backend.calls) == n_models * n_judges == 6
    assert JudgeCall.objects.filter(run=run).count() == 6
    assert run.status == ScoringRun.Status.COMPLETE
    assert (run.needed, run.done, run.graded, run.failed, run.unparsed) == (6, 6, 6, 0, 0)
    assert run.reused == (len(data.questions) - 1) * n_models * n_judges
    new_entry = corrected.entries.get()
    assert Grade.objects.filter(key_entry=new_entry).count() == 6
    assert set(Grade.objects.filter(key_entry=new_entry).values_list("run_id", flat=True)) == {
        run.pk
    }
    # every other grade is reused untouched: still exactly one per pair, from the import
    assert Grade.objects.filter(key_entry__edition=data.original).count() == 6 * 3 * 2
    # the corrected answer (850) is what the judge saw
    assert all("850" not in r for _, _, r in fake_backend.calls)
    assert services.rescore_needed_pairs(edition=corrected, judges=data.judges) == []


def test_needed_pairs_skip_removals_and_judges_without_backend(data):
    corrected = publish_correction(data, question_index=0, removed_index=1)
    data.judges[1].backend = ""
    data.judges[1].save()
    pairs = services.rescore_needed_pairs(edition=corrected, judges=data.judges)
    entry = corrected.entries.get(removed=False)
    assert pairs == sorted(pairs)
    assert {p[1] for p in pairs} == {data.judges[0].pk}
    assert {p[2] for p in pairs} == {entry.pk}
    assert len(pairs) == len(data.models)
    usable, notes = services.graders_for(data.judges)
    assert usable == [data.judges[0]] and "no backend (imported grades only)" in notes[0]


def test_new_prompt_version_makes_every_pair_needed_again(data):
    judge = data.judges[0]
    judge.prompt_version = "v2"
    judge.save()
    pairs = services.rescore_needed_pairs(edition=data.original, judges=data.judges)
    assert len(pairs) == len(data.responses)
    assert {p[1] for p in pairs} == {judge.pk}


def test_needed_pairs_take_a_fixed_number_of_queries(data, django_assert_max_num_queries):
    corrected = publish_correction(data)
    with django_assert_max_num_queries(6):
        services.rescore_needed_pairs(edition=corrected, judges=data.judges)


def test_rerun_and_duplicate_delivery_write_and_call_nothing_twice(
    data, fake_backend, django_capture_on_commit_callbacks
):
    from scoring.runs.tasks import grade_chunk, run_start

    corrected = publish_correction(data)
    run = _run(corrected, data.judges, django_capture_on_commit_callbacks)
    pairs = [item.pair() for item in run.items.all()]
    before = (len(fake_backend.calls), Grade.objects.count(), JudgeCall.objects.count())

    run.status = ScoringRun.Status.RUNNING  # as if the run were still going when the duplicate came
    run.save(update_fields=["status"])
    grade_chunk.apply(args=(run.pk, pairs))  # a duplicate delivery of a chunk
    grade_chunk.apply(args=(run.pk, pairs))
    run_start.apply(args=(run.pk,))  # a duplicate start: fans out nothing new

    assert (len(fake_backend.calls), Grade.objects.count(), JudgeCall.objects.count()) == before
    run.refresh_from_db()
    assert (run.done, run.graded, run.needed) == (6, 6, 6)
    # a second run for the same edition needs nothing and reuses everything
    again = _run(corrected, data.judges, django_capture_on_commit_callbacks)
    assert (again.needed, again.status) == (0, ScoringRun.Status.COMPLETE)
    assert again.reused == len(data.responses) * 2
    assert len(fake_backend.calls) == before[0]


def test_pair_leased_by_another_worker_is_not_called(data, fake_backend):
    corrected = publish_correction(data)
    run = services.scoring_run_create(edition=corrected, judges=data.judges, enqueue=False)
    item = run.items.first()
    RunItem.objects.filter(pk=item.pk).update(lease_until=timezone.now() + timedelta(minutes=5))
    outcome = services.settle_chunk(run=run, pairs=[item.pair()])
    assert outcome.busy == [item.pair()]
    assert fake_backend.calls == [] and JudgeCall.objects.count() == 0


def _started_call(run, item, prompt_version=None):
    """Write the ledger row a worker writes before it calls the judge for `item`'s pair."""
    return JudgeCall.objects.create(
        run=run,
        judge=item.judge,
        response=item.response,
        key_entry=item.key_entry,
        prompt_version=prompt_version or item.judge.prompt_version,
        outcome=JudgeCall.Outcome.STARTED,
    )


def test_call_in_flight_at_a_kill_is_counted_lost_and_asked_once_more(data, fake_backend):
    corrected = publish_correction(data)
    run = services.scoring_run_create(edition=corrected, judges=data.judges, enqueue=False)
    item = run.items.first()
    # a worker claimed the pair, wrote its ledger row, called the judge and was killed
    RunItem.objects.filter(pk=item.pk).update(
        lease_until=timezone.now() - timedelta(seconds=1), attempts=1
    )
    _started_call(run, item, prompt_version="v1")
    services.settle_chunk(run=run, pairs=[item.pair()])
    ledger = runs_selectors.ledger_summary(run)
    assert ledger["in_flight_at_kill"] == 1 and ledger["ok"] == 1 and ledger["paid_twice"] == 0
    assert (
        Grade.objects.filter(
            response=item.response, judge=item.judge, key_entry=item.key_entry
        ).count()
        == 1
    )
    assert len(fake_backend.calls) == 1


def test_another_runs_call_in_flight_is_marked_lost_when_its_expired_pair_lease_is_taken(
    data, fake_backend
):
    """A run killed with a call in flight and never resumed leaves that call "started" and
    its pair lease held until the lease runs out. A later run grading the same pair first
    waits (the pair is busy), then takes the expired lease over, marks that call lost and
    pays for the pair once more itself; each run's ledger says what it paid. (Changed in
    issue 19: another run's call is no longer marked lost when a chunk merely begins, since
    that run may still be alive with the pair in flight.)"""
    corrected = publish_correction(data)
    killed = services.scoring_run_create(edition=corrected, judges=data.judges, enqueue=False)
    item = killed.items.order_by("pk").first()
    next_item = killed.items.exclude(response=item.response).order_by("pk").first()
    claimed, _ = ledger.claim_pairs(killed.pk, [(item, item.judge), (next_item, next_item.judge)])
    assert set(claimed) == {item.pk, next_item.pk}
    stale = _started_call(killed, item)
    other = _started_call(killed, next_item)  # another pair of the killed run: not in the chunk
    ScoringRun.objects.filter(pk=killed.pk).update(status=ScoringRun.Status.FAILED)

    later = services.scoring_run_create(edition=corrected, judges=data.judges, enqueue=False)
    pair = later.items.get(response=item.response, judge=item.judge, key_entry=item.key_entry)
    outcome = services.settle_chunk(run=later, pairs=[pair.pair()])
    assert outcome.busy == [pair.pair()] and fake_backend.calls == []
    assert JudgeCall.objects.get(pk=stale.pk).outcome == JudgeCall.Outcome.STARTED

    PairLease.objects.update(lease_until=timezone.now() - timedelta(seconds=1))
    services.settle_chunk(run=later, pairs=[pair.pair()])

    assert JudgeCall.objects.get(pk=stale.pk).outcome == JudgeCall.Outcome.LOST
    assert JudgeCall.objects.get(pk=other.pk).outcome == JudgeCall.Outcome.STARTED
    assert runs_selectors.ledger_summary(killed)["in_flight_at_kill"] == 1
    later_ledger = runs_selectors.ledger_summary(later)
    assert (later_ledger["calls"], later_ledger["ok"], later_ledger["in_flight_at_kill"]) == (
        1,
        1,
        0,
    )
    assert len(fake_backend.calls) == 1
    # the settled pair's lease is gone; the other dead pair's is still there
    assert list(PairLease.objects.values_list("item_id", flat=True)) == [next_item.pk]


def test_only_pairs_claimed_before_look_for_their_unfinished_calls(data):
    """A claim looks up earlier unfinished calls only for the pairs it claims again (this run
    claimed them before: attempts > 1), in one UPDATE; a group claimed for the first time
    costs no lookup at all."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    corrected = publish_correction(data)
    run = services.scoring_run_create(edition=corrected, judges=data.judges, enqueue=False)
    items = list(run.items.select_related("judge", "response", "key_entry").order_by("pk"))

    def entry(item):
        return WorkItem(
            PairKey(*item.pair()), item.judge, item.key_entry, item.response, item, True
        )

    def statements(captured):  # savepoints: the test itself runs in a transaction
        return [
            q["sql"].split()[:3]
            for q in captured.captured_queries
            if q["sql"].split()[0] not in ("SAVEPOINT", "RELEASE")
        ]

    outcome = services.ChunkOutcome()
    with CaptureQueriesContext(connection) as first:
        claimed = ledger.claim_group([entry(i) for i in items[:3]], outcome, threading.Lock())
    assert [w.item.pk for w in claimed] == [i.pk for i in items[:3]]
    # the run's items, their leases across runs (issue 19), the look for grades landed meanwhile
    assert statements(first) == [
        ["UPDATE", '"scoring_runitem"', "SET"],
        ["INSERT", "INTO", '"scoring_pairlease"'],
        ["SELECT", '"scoring_grade"."response_id"', "AS"],
    ]

    # items[3] was claimed by a worker that wrote its call's ledger row and was killed
    RunItem.objects.filter(pk=items[3].pk).update(
        attempts=1, lease_until=timezone.now() - timedelta(seconds=1)
    )
    in_flight = _started_call(run, items[3])
    with CaptureQueriesContext(connection) as again:
        claimed = ledger.claim_group([entry(i) for i in items[3:5]], outcome, threading.Lock())
    assert [w.item.pk for w in claimed] == [items[3].pk, items[4].pk]
    assert statements(again) == [
        ["UPDATE", '"scoring_runitem"', "SET"],
        ["INSERT", "INTO", '"scoring_pairlease"'],
        ["SELECT", '"scoring_grade"."response_id"', "AS"],
        ["UPDATE", '"scoring_judgecall"', "SET"],
    ]
    assert JudgeCall.objects.get(pk=in_flight.pk).outcome == JudgeCall.Outcome.LOST
    assert list(
        RunItem.objects.filter(pk__in=[items[3].pk, items[4].pk])
        .order_by("pk")
        .values_list("attempts", flat=True)
    ) == [2, 1]


@pytest.mark.sqlite
def test_a_grade_written_meanwhile_is_reused_and_the_rest_of_the_batch_is_settled(data):
    """A batch settle whose pair was graded meanwhile (another run or delivery wrote the
    grade after the chunk looked): that pair is settled as reused, with the grade already
    there untouched; the batch's other grades, items, ledger rows and the run counters are
    written in the same transaction, and no error is raised."""
    corrected = publish_correction(data)
    run = services.scoring_run_create(edition=corrected, judges=data.judges, enqueue=False)
    items = list(run.items.select_related("judge").order_by("pk")[:3])
    calls = [
        JudgeCall.objects.create(
            run=run,
            judge=i.judge,
            response_id=i.response_id,
            key_entry_id=i.key_entry_id,
            prompt_version=i.judge.prompt_version,
        )
        for i in items
    ]

    def grade(item, value):
        return {
            "response_id": item.response_id,
            "judge_id": item.judge_id,
            "key_entry_id": item.key_entry_id,
            "prompt_version": item.judge.prompt_version,
            "grade": value,
            "rationale": "r",
            "flag": False,
            "flag_reason": "",
            "raw_output": "{}",
            "stop_reason": "stop",
            "run_id": run.pk,
        }

    earlier = Grade.objects.create(**{**grade(items[1], 0), "rationale": "written meanwhile"})
    batch = [
        Finished(i.pk, RunItem.State.GRADED, c.pk, JudgeCall.Outcome.OK, "", grade(i, 2))
        for i, c in zip(items, calls, strict=True)
    ]
    before = ScoringRun.objects.values_list("done", "graded", "reused", "failed", "unparsed").get(
        pk=run.pk
    )
    outcome = services.ChunkOutcome()
    BatchSettler(run, outcome, threading.Lock()).write(batch)

    assert [RunItem.objects.get(pk=i.pk).state for i in items] == ["graded", "reused", "graded"]
    kept = Grade.objects.get(pk=earlier.pk)
    assert (kept.grade, kept.rationale) == (0, "written meanwhile")
    for item in items:
        assert (
            Grade.objects.filter(
                response_id=item.response_id, judge_id=item.judge_id, key_entry_id=item.key_entry_id
            ).count()
            == 1
        )
    assert [JudgeCall.objects.get(pk=c.pk).outcome for c in calls] == ["ok"] * 3
    after = ScoringRun.objects.values_list("done", "graded", "reused", "failed", "unparsed").get(
        pk=run.pk
    )
    assert [a - b for a, b in zip(after, before, strict=True)] == [3, 2, 1, 0, 0]


def test_unparsed_output_is_stored_as_null_grade_with_raw_output(
    data, monkeypatch, django_capture_on_commit_callbacks
):
    backend = CountingBackend(unparsed=True)
    monkeypatch.setattr(backends, "judge_backend", lambda judge: backend)
    corrected = publish_correction(data)
    run = _run(corrected, data.judges[:1], django_capture_on_commit_callbacks)
    assert (run.status, run.graded, run.unparsed, run.failed) == ("complete", 3, 3, 0)
    grade = Grade.objects.filter(run=run).first()
    assert grade.grade is None
    assert grade.raw_output == "I would rather not say." and grade.stop_reason == "stop"
    assert grade.rationale == "unparsed: no grade found"
    assert set(run.items.values_list("state", flat=True)) == {"unparsed"}


def test_unavailable_judge_marks_pairs_failed_and_the_run_reports_it(
    data, monkeypatch, settings, django_capture_on_commit_callbacks
):
    settings.SNAGLIST_RESCORE_MAX_RETRIES = 0
    backend = CountingBackend(unavailable_for=10**6)
    monkeypatch.setattr(backends, "judge_backend", lambda judge: backend)
    corrected = publish_correction(data)
    run = _run(corrected, data.judges, django_capture_on_commit_callbacks)
    assert (run.status, run.failed, run.graded, run.done) == ("failed", 6, 0, 6)
    assert "6 pairs failed; a new run will retry them" in run.error
    assert set(run.items.values_list("state", flat=True)) == {"failed"}
    assert "HTTP 429" in run.items.first().detail
    assert runs_selectors.ledger_summary(run)["failed"] == 6
    assert not Grade.objects.filter(run=run).exists()
    # the failed pairs still lack a grade: the next run asks for them again
    assert len(services.rescore_needed_pairs(edition=corrected, judges=data.judges)) == 6


def test_judge_answering_429_for_a_while_is_retried_and_the_run_completes(
    data, monkeypatch, settings, django_capture_on_commit_callbacks
):
    from scoring.runs import tasks

    settings.SNAGLIST_RESCORE_MAX_RETRIES = 5
    settings.SNAGLIST_RESCORE_RETRY_BASE_SECONDS = 2.0
    waits: list[float] = []
    monkeypatch.setattr(tasks, "eager_sleep", waits.append)
    backend = CountingBackend(unavailable_for=3)
    monkeypatch.setattr(backends, "judge_backend", lambda judge: backend)
    corrected = publish_correction(data)
    run = _run(corrected, data.judges, django_capture_on_commit_callbacks)
    assert (run.status, run.graded, run.failed) == ("complete", 6, 0)
    # in-process mode waited once, 1-2 s (base 2 s, equal jitter), before asking again
    # (issue 19: it used to ask again at once)
    assert len(waits) == 1 and 1.0 <= waits[0] <= 2.0
    ledger = runs_selectors.ledger_summary(run)
    assert ledger["retries"] == 3 and ledger["ok"] == 6 and ledger["paid_twice"] == 0
    assert Grade.objects.filter(run=run).count() == 6


def test_cancelled_run_grades_nothing_more(data, fake_backend):
    from scoring.runs.tasks import grade_chunk

    corrected = publish_correction(data)
    run = services.scoring_run_create(edition=corrected, judges=data.judges, enqueue=False)
    services.scoring_run_cancel(run=run)
    grade_chunk.apply(args=(run.pk, [i.pair() for i in run.items.all()]))
    assert fake_backend.calls == []
    run.refresh_from_db()
    assert run.status == "cancelled" and run.finished_at is not None


def test_audit_run_stores_verdicts_and_sends_the_follow_up(
    data, fake_backend, django_capture_on_commit_callbacks
):
    FOLLOW_UPS.clear()
    with django_capture_on_commit_callbacks(execute=True):
        run = services.scoring_run_create(
            edition=data.original,
            judges=data.auditors,
            kind="audit",
            on_complete="tests.record_follow_up",
        )
    run.refresh_from_db()
    n = len(data.questions) * len(data.auditors)
    assert (run.kind, run.status, run.needed, run.graded) == ("audit", "complete", n, n)
    assert AuditVerdict.objects.filter(run=run, verdict="correct").count() == n
    assert (
        all(kind == "audit" for kind, _, _ in fake_backend.calls) and len(fake_backend.calls) == n
    )
    assert FOLLOW_UPS == [run.pk]
    again = _run(data.original, data.auditors, django_capture_on_commit_callbacks, kind="audit")
    assert again.needed == 0 and len(fake_backend.calls) == n


def test_grading_input_has_citation_and_no_model_name(data):
    from questions.models import KeyEntry

    entry = (
        KeyEntry.objects.select_related("citation_document").filter(edition=data.original).first()
    )
    assert services.citation_text(entry) == (
        "Approved Document K (2013) Table 1.1: Minimum clear width 800 mm"
    )


def test_reference_backend_config_comes_from_the_judge_row(data):
    judge = data.judges[1]
    judge.backend_settings = {"strictness": "strict", "concurrency": 4, "rpm": 100}
    config = services.judge_backend_config(judge)
    assert config == {"backend": "reference", "strictness": "strict", "concurrency": 4, "rpm": 100}
    judge.backend_settings["typo_key"] = 1  # unknown keys are dropped, not fatal
    backend = services.judge_backend(judge)
    assert backend.config.strictness == "strict"
    judge.backend_settings, judge.model = {}, "reference-strict"  # as imported from a bundle
    assert services.judge_backend_config(judge)["strictness"] == "strict"
    judge.model = "reference-lenient"
    assert services.judge_backend_config(judge)["strictness"] == "lenient"


# -- commands --------------------------------------------------------------------------------


def _command(*args) -> dict:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return json.loads(out.getvalue())


@pytest.mark.django_db(transaction=True)
def test_rescore_command_json_with_wait(fake_backend):
    data = build_benchmark(n_questions=6, n_models=3)
    publish_correction(data)
    document = _command("rescore", "--wait", "--format", "json")
    assert {
        k: document[k]
        for k in ("edition", "status", "needed", "graded", "reused", "failed", "unparsed")
    } == {
        "edition": "corrected-1",
        "status": "complete",
        "needed": 6,
        "graded": 6,
        "reused": 30,
        "failed": 0,
        "unparsed": 0,
    }
    assert isinstance(document["run"], int)
    document = _command("rescore", "--edition", "corrected-1", "--judges", "j2", "--format", "json")
    assert (document["needed"], document["reused"], document["judges"]) == (0, 18, ["j2"])


@pytest.mark.django_db(transaction=True)
def test_audit_key_command_json(fake_backend):
    build_benchmark(n_questions=4, n_models=2)
    document = _command("audit_key", "--wait", "--format", "json", "--auditors", "a1")
    assert (document["status"], document["needed"], document["graded"], document["edition"]) == (
        "complete",
        4,
        4,
        "original",
    )


def test_rescore_command_errors(data):
    with pytest.raises(CommandError) as exc:
        call_command("rescore", "--judges", "nope", stdout=StringIO(), stderr=StringIO())
    assert exc.value.returncode == 1 and "unknown judge(s) nope" in str(exc.value)
    with pytest.raises(CommandError) as exc:
        call_command("rescore", "--resume", stdout=StringIO(), stderr=StringIO())
    assert exc.value.returncode == 1 and "no unfinished grade run" in str(exc.value)
    with pytest.raises(CommandError) as exc:
        call_command("rescore", "--edition", "nope", stdout=StringIO(), stderr=StringIO())
    assert exc.value.returncode == 1


def test_rescore_resume_sends_the_remaining_pairs(
    data, fake_backend, django_capture_on_commit_callbacks
):
    corrected = publish_correction(data)
    run = services.scoring_run_create(edition=corrected, judges=data.judges, enqueue=False)
    services.settle_chunk(run=run, pairs=[i.pair() for i in run.items.order_by("id")[:2]])
    assert len(fake_backend.calls) == 2
    with django_capture_on_commit_callbacks(execute=True):
        document = _command("rescore", "--resume", "--format", "json")
    assert document["run"] == run.pk  # printed before the test's transaction "commits"
    run.refresh_from_db()
    assert (run.status, run.graded, run.done) == ("complete", 6, 6)
    assert len(fake_backend.calls) == 6


def test_chunks_cover_every_pair_once_and_ramp_up_on_long_runs():
    """Long runs start with 1/4, 2/4, 3/4 chunks (staggered worker boundaries), short ones do not."""
    from engine.chunking import chunk_bounds

    long_run = chunk_bounds(5000, 1000)
    assert [end - start for start, end in long_run] == [250, 500, 750, 1000, 1000, 1000, 500]
    assert [end - start for start, end in chunk_bounds(2000, 1000)] == [1000, 1000]
    for n, size in ((5000, 1000), (36, 3), (7, 50), (1, 1), (2001, 1000)):
        bounds = chunk_bounds(n, size)
        covered = [i for start, end in bounds for i in range(start, end)]
        assert covered == list(range(n))
        assert all(0 < end - start <= size for start, end in bounds)
    assert chunk_bounds(0, 10) == []


@pytest.mark.sqlite
def test_started_ledger_rows_are_one_insert_in_the_entries_order(data, django_assert_num_queries):
    """The event-loop path writes a chunk's "started" ledger rows with ONE INSERT ... RETURNING
    (the rows as one JSON parameter on PostgreSQL, a VALUES list on SQLite) and hands back their ids
    in the entries' order: each id's row names that entry's judge, response and key entry."""
    from questions.models import Response

    run = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)
    entries_of = {e.question_id: e for e in data.original.entries.all()}
    responses = list(
        Response.objects.filter(question__benchmark=data.benchmark).order_by("-pk")[:5]
    )
    assert len(responses) == 5
    judges = [data.judges[n % 2] for n in range(5)]
    work = [
        WorkItem(
            PairKey(r.pk, j.pk, entries_of[r.question_id].pk),
            j,
            entries_of[r.question_id],
            r,
            None,
            False,
        )
        for j, r in zip(judges, responses, strict=True)
    ]
    with django_assert_num_queries(1):
        refs = ledger.started_rows(run, work)
    rows = {c.pk: c for c in JudgeCall.objects.filter(pk__in=[r.pk for r in refs])}
    assert len(rows) == 5
    for ref, judge, response in zip(refs, judges, responses, strict=True):
        call = rows[ref.pk]
        assert (call.run_id, call.judge_id, call.response_id, call.key_entry_id) == (
            run.pk,
            judge.pk,
            response.pk,
            entries_of[response.question_id].pk,
        )
        assert call.outcome == JudgeCall.Outcome.STARTED
        assert call.prompt_version == judge.prompt_version
        assert call.created_at is not None


@pytest.mark.sqlite
def test_grades_written_in_one_insert_keep_awkward_text_and_null_grades(data):
    """vendor_sql.insert_rows (one JSON parameter on PostgreSQL, VALUES rows on SQLite) stores text with
    quotes, backslashes, braces, commas, newlines and non-ASCII exactly, and a null grade as
    null (unparsed), not 0."""
    from questions.models import Response

    run = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)
    entry_of = {e.question_id: e.pk for e in data.original.entries.all()}
    responses = list(Response.objects.filter(question__benchmark=data.benchmark).order_by("pk")[:3])
    awkward = [
        '{"grade": 2, "rationale": "a \\\\ b, {c}"}',
        "line one\nline two — 1100 mm ≥ “x”",
        "NULL",
    ]
    columns = (
        "response_id",
        "judge_id",
        "key_entry_id",
        "prompt_version",
        "grade",
        "rationale",
        "flag",
        "flag_reason",
        "raw_output",
        "stop_reason",
        "run_id",
    )
    rows = [
        (
            r.pk,
            data.judges[0].pk,
            entry_of[r.question_id],
            "judge-v1",
            grade,
            text,
            flag,
            "",
            text,
            "stop",
            run.pk,
        )
        for r, grade, text, flag in zip(
            responses, [2, None, 0], awkward, [False, True, False], strict=True
        )
    ]
    ids = vendor_sql.insert_rows(Grade, columns, rows)
    stored = [Grade.objects.get(pk=pk) for pk in ids]
    assert [(g.response_id, g.grade, g.raw_output, g.rationale, g.flag) for g in stored] == [
        (r.pk, grade, text, text, flag)
        for r, grade, text, flag in zip(
            responses, [2, None, 0], awkward, [False, True, False], strict=True
        )
    ]
    assert all(g.created_at is not None for g in stored)


@pytest.mark.sqlite
def test_lost_calls_are_marked_only_for_the_claimed_pairs_at_their_prompt_version(data):
    """ledger.mark_lost_many (one UPDATE against arrays on PostgreSQL, SELECT + UPDATE elsewhere)
    marks "started" and "ok" rows of exactly the given (judge, response, key entry, prompt
    version) pairs as lost, and nothing else."""
    from questions.models import Response

    run = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)
    entry_of = {e.question_id: e.pk for e in data.original.entries.all()}
    r1, r2 = Response.objects.filter(question__benchmark=data.benchmark).order_by("pk")[:2]
    j1, j2 = data.judges
    v1 = j1.prompt_version

    def call(judge, response, outcome, version=None):
        return JudgeCall.objects.create(
            run=run,
            judge=judge,
            response=response,
            key_entry_id=entry_of[response.question_id],
            prompt_version=version or judge.prompt_version,
            outcome=outcome,
        )

    lost = [call(j1, r1, "started"), call(j1, r1, "ok")]
    kept = [
        call(j1, r1, "failed"),  # settled: not in flight
        call(j1, r1, "started", version=v1 + "-old"),  # another prompt version
        call(j2, r1, "started"),  # the same response with the other judge: not claimed
        call(j1, r2, "started"),  # another response: not claimed
    ]
    marked = ledger.mark_lost_many(
        [(j1, r1.pk, entry_of[r1.question_id]), (j2, r2.pk, entry_of[r2.question_id])]
    )
    assert marked == 2
    assert {c.pk for c in JudgeCall.objects.filter(outcome="lost")} == {c.pk for c in lost}
    assert all(c.detail == services.LOST_DETAIL for c in JudgeCall.objects.filter(outcome="lost"))
    assert [JudgeCall.objects.get(pk=c.pk).outcome for c in kept] == [
        "failed",
        "started",
        "started",
        "started",
    ]

    # other_than_run leaves that run's own calls as they are
    later = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)
    mine = JudgeCall.objects.create(
        run=later,
        judge=j1,
        response=r2,
        key_entry_id=entry_of[r2.question_id],
        prompt_version=v1,
        outcome="started",
    )
    marked = ledger.mark_lost_many([(j1, r2.pk, entry_of[r2.question_id])], other_than_run=later.pk)
    assert marked == 1
    assert JudgeCall.objects.get(pk=kept[3].pk).outcome == "lost"
    assert JudgeCall.objects.get(pk=mine.pk).outcome == "started"


def test_lost_call_lookup_uses_the_pair_index_on_a_ledger_without_statistics(data):
    """On PostgreSQL the claim's lookup of unfinished earlier calls probes call_pair_idx once
    per pair. Before that index, with the ledger freshly written and not yet analysed (as
    during a big run), the planner combined the judge and key-entry indexes and read half the
    ledger per pair: 3-5 ms per claim at 12,000 rows, growing with the table."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from questions.models import Response

    run = services.scoring_run_create(edition=data.original, judges=data.judges, enqueue=False)
    entry_of = {e.question_id: e.pk for e in data.original.entries.all()}
    responses = list(Response.objects.filter(question__benchmark=data.benchmark).order_by("pk"))
    j1, j2 = data.judges
    JudgeCall.objects.bulk_create(
        JudgeCall(
            run=run,
            judge=judge,
            response=r,
            key_entry_id=entry_of[r.question_id],
            prompt_version=judge.prompt_version,
            outcome="ok",
        )
        for _ in range(150)
        for r in responses
        for judge in (j1, j2)
    )
    with connection.cursor() as cursor:  # as a fresh table is: never analysed
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'scoring_judgecall'")
        assert cursor.fetchone()[0] < 1
    pairs = [(j1, r.pk, entry_of[r.question_id]) for r in responses[:8]]
    with CaptureQueriesContext(connection) as captured:
        marked = ledger.mark_lost_many(pairs)
    assert marked == 150 * 8
    (update,) = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("UPDATE")]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + update)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "call_pair_idx" in plan, plan
    assert "BitmapAnd" not in plan and "Seq Scan on scoring_judgecall" not in plan, plan


def test_tables_updated_in_place_keep_room_for_hot_updates_and_no_redundant_index(data):
    """PostgreSQL schema of the run's hot tables (migration scoring 0004): run items and
    ledger rows keep a quarter of each page free, so a claim's UPDATE (lease, attempts) and
    a call's settle (outcome, detail) can be HOT updates, with no index entry written; the
    single-column indexes that a composite index starts with are gone."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, reloptions FROM pg_class WHERE relname IN "
            "('scoring_runitem', 'scoring_judgecall', 'scoring_grade')"
        )
        options = dict(cursor.fetchall())
        cursor.execute(
            "SELECT t.relname, a.attname FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid "
            "JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = i.indkey[0] "
            "WHERE i.indnatts = 1 AND t.relname IN ('scoring_runitem', 'scoring_grade')"
        )
        single = sorted(cursor.fetchall())
    assert options == {
        "scoring_runitem": ["fillfactor=75"],
        "scoring_judgecall": ["fillfactor=75"],
        "scoring_grade": None,
    }
    assert single == [
        ("scoring_grade", "id"),
        ("scoring_grade", "judge_id"),
        ("scoring_grade", "run_id"),
        ("scoring_runitem", "id"),
        ("scoring_runitem", "judge_id"),
        ("scoring_runitem", "key_entry_id"),
        ("scoring_runitem", "response_id"),
    ]


def test_in_process_retries_back_off_exponentially_up_to_a_cap(
    data, monkeypatch, settings, django_capture_on_commit_callbacks
):
    """A judge that stays unavailable (529) in eager mode: one wait per retry round, each
    in [ceiling / 2, ceiling] with ceiling = base x 2**retry, capped at 60 s; then the pairs
    fail. Before issue 19 the rounds followed each other with no pause."""
    from scoring.runs import tasks

    settings.SNAGLIST_RESCORE_MAX_RETRIES = 4
    settings.SNAGLIST_RESCORE_RETRY_BASE_SECONDS = 10.0
    settings.SNAGLIST_EAGER_RETRY_SECONDS = 1000.0  # the waits add up to 130 s at most
    waits: list[float] = []
    monkeypatch.setattr(tasks, "eager_sleep", waits.append)
    backend = CountingBackend(unavailable_for=10**6)
    monkeypatch.setattr(backends, "judge_backend", lambda judge: backend)
    run = _run(publish_correction(data), data.judges, django_capture_on_commit_callbacks)
    assert (run.status, run.failed) == ("failed", 6)
    ceilings = [10.0, 20.0, 40.0, 60.0]  # 80 capped at 60
    assert len(waits) == len(ceilings)
    for wait, ceiling in zip(waits, ceilings, strict=True):
        assert ceiling / 2 <= wait <= ceiling, (wait, ceiling)
    assert len(backend.calls) == 6 * 5  # first round + 4 retries, each pair each round


def test_in_process_retries_are_bounded_in_time_and_the_wait_says_what_for(
    data, monkeypatch, settings, django_capture_on_commit_callbacks, caplog
):
    """Issue 30 item 15: without Redis a judge that always fails kept `rescore --wait` for
    12 min 26 s (9 rounds). The waits of a run add up to at most
    SNAGLIST_EAGER_RETRY_SECONDS (the last one cut to what is left, then a final round),
    and each wait is logged with the judges, their reason and when the pairs fail."""
    import logging

    from scoring.runs import tasks

    settings.SNAGLIST_RESCORE_MAX_RETRIES = 8
    settings.SNAGLIST_RESCORE_RETRY_BASE_SECONDS = 10.0
    settings.SNAGLIST_EAGER_RETRY_SECONDS = 45.0
    waits: list[float] = []
    monkeypatch.setattr(tasks, "eager_sleep", waits.append)
    backend = CountingBackend(unavailable_for=10**6)
    monkeypatch.setattr(backends, "judge_backend", lambda judge: backend)
    with caplog.at_level(logging.WARNING, logger="scoring.runs.tasks"):
        run = _run(publish_correction(data), data.judges, django_capture_on_commit_callbacks)
    assert (run.status, run.failed) == ("failed", 6)
    # ceilings 10, 20, 40, 80: the waits add up to the 45 s exactly, the last one cut to
    # what was left (after 5-10 + 10-20 s the third, 20-40 s, may or may not reach it)
    assert len(waits) in (3, 4) and abs(sum(waits) - 45.0) < 1e-9, waits
    for wait, ceiling in zip(waits, [10.0, 20.0, 40.0, 80.0], strict=False):
        assert wait <= ceiling, (wait, ceiling)
    assert 5.0 <= waits[0] and 10.0 <= waits[1]
    assert len(backend.calls) == 6 * (len(waits) + 1)  # a round after each wait, not 9 rounds
    said = [r.getMessage() for r in caplog.records if "waiting" in r.getMessage()]
    assert len(said) == len(waits)
    judges = ", ".join(sorted(j.judge_id for j in data.judges))
    assert f"run {run.pk}: waiting" in said[0] and f"for judge {judges} (unavailable: " in said[0]
    assert "before asking its 6 pair(s) again at " in said[0]
    assert "retry 1 of at most 8, within 45 s in all (SNAGLIST_EAGER_RETRY_SECONDS)" in said[0]
    assert "that is the last try: pairs still unavailable then fail" in said[-1]
    assert not any("last try" in line for line in said[:-1])


def test_a_completed_rescore_sends_the_boards_refresh_by_name(
    data, fake_backend, django_capture_on_commit_callbacks, monkeypatch
):
    # The run machinery names the board's task (it may not import the board above it);
    # the task keeps its registered name from before it moved, so queued messages resolve.
    from config.celery import app
    from scoring.board import tasks as board_tasks
    from scoring.runs.services.runs import BOARD_REFRESH_TASK

    app.loader.import_default_modules()
    assert app.tasks[BOARD_REFRESH_TASK].name == "scoring.refresh_leaderboard"
    assert app.tasks[BOARD_REFRESH_TASK].run.__module__ == board_tasks.__name__
    warmed: list[int] = []
    monkeypatch.setattr(board_tasks, "leaderboard_refresh", lambda run: warmed.append(run.pk))
    corrected = publish_correction(data, question_index=0)
    run = _run(corrected, data.judges, django_capture_on_commit_callbacks)
    assert run.status == "complete" and warmed == [run.pk]
