"""Triage: audit rules (methodology rule 4), judge flags (rule 3) and the two detectors."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from core.models import AuditLogEntry
from questions.models import AuditExclusion, Question, SourceDocument
from review.models import Evidence, ReviewItem
from review.triage import triage_run
from scoring.models import Grade
from tests.review_fixtures import *  # noqa: F403
from tests.review_fixtures import build_world, set_grades, set_verdicts

pytestmark = pytest.mark.django_db


def items_by_question(world):
    return {i.question.question_id: i for i in ReviewItem.objects.filter(benchmark=world.benchmark)}


def excluded_question_ids() -> list[str]:
    return sorted(AuditExclusion.objects.values_list("key_entry__question__question_id", flat=True))


def test_clean_benchmark_queues_nothing(world):
    counts = triage_run(benchmark=world.benchmark)
    assert counts["items_created"] == 0
    assert counts["excluded"] == 0
    assert counts["edition"] == "original"
    assert ReviewItem.objects.count() == 0


def test_both_auditors_adverse_excludes_with_reason_auditors_agree(world):
    set_verdicts(world, 0, "wrong", "ungradeable")
    counts = triage_run(benchmark=world.benchmark)
    q = Question.objects.get(pk=world.q(0).pk)
    exclusion = AuditExclusion.objects.get()
    assert exclusion.key_entry.question == q
    assert exclusion.key_entry.edition.name == "original"
    assert exclusion.reason == "auditors_agree"
    assert counts["excluded"] == 1
    assert not ReviewItem.objects.filter(question=q).exists()
    log = AuditLogEntry.objects.get(action="question.exclude")
    assert log.target_label == "demo/Q0000"
    assert log.after["excluded_reason"] == "auditors_agree"
    assert log.actor_label == "system"


def test_same_verdict_rule_queues_mixed_adverse_verdicts_instead(world, settings):
    settings.SNAGLIST_AUDIT_EXCLUSION_RULE = "same_verdict"
    set_verdicts(world, 0, "wrong", "ungradeable")
    set_verdicts(world, 1, "wrong", "wrong")
    triage_run(benchmark=world.benchmark)
    assert excluded_question_ids() == ["Q0001"]
    item = items_by_question(world)["Q0000"]
    assert item.source == "single_auditor_flag"


def test_exactly_one_adverse_auditor_queues_the_question_unchanged(world):
    set_verdicts(world, 2, "correct", "wrong")
    counts = triage_run(benchmark=world.benchmark)
    item = items_by_question(world)["Q0002"]
    assert item.source == "single_auditor_flag"
    assert item.status == "open"
    assert excluded_question_ids() == []
    evidence = item.evidence.get()
    verdicts = {v["auditor"]: v["verdict"] for v in evidence.detail["verdicts"]}
    assert verdicts == {"a1": "correct", "a2": "wrong"}
    assert counts["by_source"]["single_auditor_flag"] == 1


def test_judge_flag_queues_and_both_judges_flagging_ranks_highest(world):
    set_verdicts(world, 1, "wrong", "correct")  # single auditor
    Grade.objects.filter(response__question=world.q(3), judge=world.judges[0]).update(
        flag=True, flag_reason="Key cites withdrawn table"
    )
    Grade.objects.filter(response__question=world.q(4)).update(flag=True, flag_reason="Wrong")
    triage_run(benchmark=world.benchmark)
    items = items_by_question(world)
    assert items["Q0003"].source == "judge_flag"
    assert items["Q0004"].source == "judge_flag"
    detail = items["Q0004"].evidence.get().detail
    assert detail["both_judges"] is True and detail["judges"] == ["j1", "j2"]
    order = [i.question.question_id for i in ReviewItem.objects.order_by("-priority", "id")]
    assert order[0] == "Q0004"  # both judges flagged > single auditor > one judge
    assert order.index("Q0001") < order.index("Q0003")


def test_consensus_against_key_detector_lists_strong_models(db):
    world = build_world(n_questions=6, n_models=5)
    # Every model scores 2 elsewhere (strong); on Q0005 four of five get 0 from both judges.
    set_grades(world, 5, 0, models=world.models[:4])
    triage_run(benchmark=world.benchmark)
    item = items_by_question(world)["Q0005"]
    detail = item.evidence.get(kind="consensus_against_key").detail
    assert [m["model"] for m in detail["models"]] == ["m00", "m01", "m02", "m03"]
    # Overall score from agreed grades: 5 questions at 2 and one at 0 -> 10/12 = 83.33%.
    assert detail["models"][0]["overall_score"] == pytest.approx(83.33)
    assert detail["share"] == 0.8
    # Issue 27: the panel fires here too (a second piece of evidence on the same item):
    # four of five graded 0 of the 0-2 scale, m04 graded 2 -> mean normalised grade
    # (0 * 4 + 1) / 5 = 0.2.
    panel = item.evidence.get(kind="panel_against_key").detail
    assert panel["n_graded"] == 5
    assert panel["mean_grade"] == 0.2
    assert panel["p_wrong"] > 0.5 and panel["log10_bf"] > 0
    # the heaviest evidence is the panel's; consensus is read off the same grades, so
    # the two count once (review.priority.RESPONSE_KINDS)
    assert item.source == "panel_against_key"


def test_an_item_consensus_raised_carries_the_panels_figure_which_orders_but_raises_nothing(
    db, settings
):
    """Issue 27 item 3: consensus (here at a 0.4 share) fires on Q0005 where two of five
    strong models get 0 and three get 2; the panel, reading the same grades, sides with
    the key. Its figure is filed on the item and weighs the group (the fixed 1.0 ban is
    not counted), but it is not counted as raising the item."""
    from review.priority import evidence_weight
    from review.scorecard import detector_scorecard

    settings.SNAGLIST_CONSENSUS_SHARE = 0.4
    world = build_world(n_questions=6, n_models=5)
    set_grades(world, 5, 0, models=world.models[:2])
    counts = triage_run(benchmark=world.benchmark)
    item = items_by_question(world)["Q0005"]
    panel = item.evidence.get(kind="panel_against_key").detail
    assert panel["p_wrong"] <= 0.5 and panel["threshold"] == 0.5
    assert item.evidence.filter(kind="consensus_against_key").count() == 1
    assert item.priority == round(1000 * evidence_weight("panel_against_key", panel))
    assert item.priority < 1000  # not the fixed weight of consensus
    assert item.source == "consensus_against_key"
    assert counts["by_source"]["panel_against_key"] == 0
    assert counts["by_source"]["consensus_against_key"] == 1
    rows = {r["name"]: r for r in detector_scorecard(world.benchmark)["detectors"]}
    assert rows["panel_against_key"]["raised"] == 0
    assert rows["consensus_against_key"]["raised"] == 1


def test_consensus_needs_both_judges_and_strong_models(db):
    world = build_world(n_questions=6, n_models=5)
    # Q0004: four models 0 by one judge only -> no consensus.
    set_grades(world, 4, 0, models=world.models[:4], judges=[world.judges[0]])
    # Q0005: two of five models at 0 (40% < 60%).
    set_grades(world, 5, 0, models=world.models[:2])
    triage_run(benchmark=world.benchmark)
    assert not ReviewItem.objects.filter(source="consensus_against_key").exists()


def test_consensus_ignores_weak_models(db, settings):
    world = build_world(n_questions=4, n_models=5, grade=0)  # every model scores 0 overall
    settings.SNAGLIST_CONSENSUS_MIN_MODEL_SCORE = 50.0
    triage_run(benchmark=world.benchmark)
    assert not ReviewItem.objects.filter(source="consensus_against_key").exists()


def test_superseded_document_and_missing_locator_detector(world):
    e1 = world.entry(1)
    e2 = world.entry(2)
    # KeyEntry rows of a published edition are immutable: point documents instead.
    SourceDocument.objects.filter(pk=world.documents["ADA"].pk).update(status="current")
    from questions.models import Section

    Section.objects.filter(document=world.documents["ADA"], locator="1.2").update(locator="1.20")
    doc = world.documents["ADA"]
    triage_run(benchmark=world.benchmark)
    item = items_by_question(world)["Q0002"]
    assert item.source == "superseded_citation"
    detail = item.evidence.get().detail
    assert detail["problem"] == "locator_not_found"
    assert detail["locator"] == e2.citation_locator == "1.2"
    assert "1.20" in detail["nearest"]
    assert e1.citation_document_id == doc.pk


def test_superseded_edition_is_flagged(world):
    SourceDocument.objects.filter(pk=world.documents["ADA"].pk).update(status="superseded")
    triage_run(benchmark=world.benchmark)
    assert ReviewItem.objects.filter(source="superseded_citation").count() == len(world.questions)
    detail = Evidence.objects.filter(kind="superseded_citation").first().detail
    assert detail["problem"] == "superseded" and detail["doc_id"] == "ADA"


def test_rerun_creates_no_duplicates_and_attaches_new_evidence(world):
    set_verdicts(world, 2, "correct", "wrong")
    first = triage_run(benchmark=world.benchmark)
    again = triage_run(benchmark=world.benchmark)
    assert first["items_created"] == 1
    assert again["items_created"] == 0 and again["evidence_added"] == 0
    assert ReviewItem.objects.count() == 1 and Evidence.objects.count() == 1
    # New evidence on the same question: a judge flags it -> attached to the open item.
    Grade.objects.filter(response__question=world.q(2), judge=world.judges[1]).update(flag=True)
    third = triage_run(benchmark=world.benchmark)
    item = ReviewItem.objects.get()
    assert third["items_created"] == 0 and third["items_updated"] == 1
    assert item.sources == ["single_auditor_flag", "judge_flag"]
    assert item.source == "single_auditor_flag"  # one judge ranks below a single auditor
    assert item.evidence.count() == 2
    assert item.version == 2


def test_reviewed_question_is_not_queued_again_for_the_same_evidence(world, reviewer, editor):
    from review import services

    set_verdicts(world, 2, "correct", "wrong")
    triage_run(benchmark=world.benchmark)
    item = ReviewItem.objects.get()
    item = services.review_item_claim(item=item, user=reviewer)
    # a confirmation closes the item without approval (issue 18, rule 6)
    services.proposal_create(item=item, user=reviewer, version=item.version, action="confirm")
    again = triage_run(benchmark=world.benchmark)
    assert again["skipped_closed"] == 1 and again["items_created"] == 0
    assert ReviewItem.objects.count() == 1


def test_command_prints_counts_and_json(world, capsys):
    set_verdicts(world, 0, "wrong", "wrong")
    set_verdicts(world, 1, "wrong", "correct")
    call_command("triage", "--benchmark", "demo", "--format", "json")
    out = json.loads(capsys.readouterr().out)
    assert out["excluded"] == 1
    assert out["items_created"] == 1
    assert out["by_source"]["single_auditor_flag"] == 1
    assert out["open_items"] == 1
    call_command("triage")
    text = capsys.readouterr().out
    assert "Triage of demo / key edition original" in text
    assert "1 already excluded" in text


def test_command_unknown_edition_is_bad_input(world):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError) as exc:
        call_command("triage", "--edition", "nope")
    assert exc.value.returncode == 1
    assert "nope" in str(exc.value)


def test_first_triage_scores_models_without_the_questions_it_excludes():
    """The consensus detector's model scores (rule 2) leave out what the same run excludes.

    On the demo, two questions have both auditors adverse. The demo's two auditors are
    both the vendor "snaglist" (not independent, rule 4), so import excludes nothing; made
    independent here (as after an audit run by two vendors' auditors), the scores a first
    triage computes must equal those of a later run, which sees the exclusions.
    """
    from questions.models import Benchmark, KeyEdition
    from review.triage import findings
    from scoring.models import Judge
    from tests.conftest import DEMO_BUNDLE

    call_command("import_bundle", str(DEMO_BUNDLE), verbosity=0)
    assert AuditExclusion.objects.count() == 0
    for n, auditor in enumerate(Judge.objects.filter(role="auditor").order_by("judge_id")):
        Judge.objects.filter(pk=auditor.pk).update(vendor=f"vendor-{n}")
    benchmark = Benchmark.objects.get()
    original = KeyEdition.objects.get(benchmark=benchmark, name="original")
    first = findings(benchmark, original)
    assert len(first["exclusions"]) == 2

    counts = triage_run(benchmark=benchmark, edition=original)

    assert counts["excluded"] == 2
    again = findings(benchmark, original)
    assert again["model_scores"] == first["model_scores"]
    assert again["items"].keys() == first["items"].keys()


# ------------------------------------------------- rules 1-2 and 4 decided once (issue 16)
def leaderboard_scores(edition) -> dict[str, float]:
    from scoring.selectors import board_for_edition

    board = board_for_edition(edition, n_bootstrap=0, use_cache=False).leaderboard
    return {m.model_id: m.score for m in board.models}


def test_triage_model_scores_are_the_leaderboards_on_a_1_to_3_scale(db):
    """Rule 2 on a 1..3 scale: every grade 2 is the middle of the scale, 50 %.

    By hand: the engine scores 100 * sum(g - 1) / ((3 - 1) * n) = 100 * 6 / 12 = 50.0 for
    each model (six questions, every grade 2). Triage's own copy, deleted, computed
    100 * sum(g) / (3 * n) = 100 * 12 / 18 = 66.67 for the same grades.
    """
    from review.triage import findings

    world = build_world(n_questions=6, n_models=3, grade=2)
    world.benchmark.grade_scale = [1, 2, 3]
    world.benchmark.save()
    found = findings(world.benchmark, world.original)
    assert found["model_scores"] == {"m00": 50.0, "m01": 50.0, "m02": 50.0}
    assert found["model_scores"] != {m: 66.67 for m in ("m00", "m01", "m02")}
    assert leaderboard_scores(world.original) == pytest.approx(found["model_scores"])


def test_consensus_against_key_fires_on_a_one_judge_benchmark(db):
    """With one judge its grade is the counted grade (rule 1 as the leaderboard counts it).

    Triage's own copy asked for two judges, so on a one-judge benchmark the detector never
    fired; now Q0005 (four of five models at 0) is queued, with the leaderboard's scores:
    5 questions at 2 and one at 0 -> 100 * 10 / (2 * 6) = 83.33.
    """
    world = build_world(n_questions=6, n_models=5)
    Grade.objects.filter(judge=world.judges[1]).delete()
    world.judges[1].delete()
    set_grades(world, 5, 0, models=world.models[:4])
    triage_run(benchmark=world.benchmark)
    item = items_by_question(world)["Q0005"]
    assert item.source == "panel_against_key"
    detail = item.evidence.get(kind="consensus_against_key").detail
    assert [m["model"] for m in detail["models"]] == ["m00", "m01", "m02", "m03"]
    assert [m["overall_score"] for m in detail["models"]] == [83.33] * 4
    # Issue 27: one judge is enough for the panel as well (0/1-type grades of one judge).
    assert item.evidence.filter(kind="panel_against_key").count() == 1
    assert detail["share"] == 0.8 and detail["n_models"] == 5
    board = leaderboard_scores(world.original)
    assert board["m00"] == pytest.approx(100 * 10 / 12)
    assert board["m04"] == pytest.approx(100.0)


def test_after_an_auditor_prompt_bump_the_queue_and_the_report_agree(db):
    """Rule 4 counts each auditor's verdict at its current prompt version only.

    a2 moves from prompt v1 to v2 and has re-audited only Q0001 so far. Q0000: a1 wrong,
    a2 wrong at v1 -> one opinion that counts, adverse: a single-auditor flag (the old
    triage took a2's v1 verdict as newest and excluded Q0000). Q0002: a1 correct, a2 wrong
    at v1 -> nothing (the old triage queued it). Q0001: a2's v2 verdict `correct` counts.
    """
    from scoring.board.report import build_report
    from scoring.models import AuditVerdict

    world = build_world(n_questions=4, n_models=2)
    set_verdicts(world, 0, "wrong", "wrong")
    set_verdicts(world, 1, "correct", "wrong")
    set_verdicts(world, 2, "correct", "wrong")
    a2 = world.auditors[1]
    a2.prompt_version = "v2"
    a2.save()
    AuditVerdict.objects.create(
        key_entry=world.entry(1), auditor=a2, verdict="correct", prompt_version="v2"
    )

    counts = triage_run(benchmark=world.benchmark)

    assert counts["excluded"] == 0 and excluded_question_ids() == []
    queued = sorted(
        i.question.question_id
        for i in ReviewItem.objects.filter(benchmark=world.benchmark)
        if "single_auditor_flag" in i.sources
    )
    assert queued == ["Q0000"]
    verdicts = items_by_question(world)["Q0000"].evidence.get().detail["verdicts"]
    assert [(v["auditor"], v["verdict"]) for v in verdicts] == [("a1", "wrong")]
    doc = build_report(world.original)
    assert doc["single_auditor_flags"] == len(queued) == 1
    assert doc["excluded_by_audit"] == 0


# ------------------------------------------------- rule 4: independent auditors (issue 17)
def test_not_independent_says_why_for_each_case():
    from scoring.audit_rule import AuditorIdentity as A
    from scoring.audit_rule import not_independent

    openai = A("a1", "OpenAI", "openai", "gpt-4o")
    assert not_independent(openai, A("a2", "Anthropic", "anthropic", "claude")) == ""
    assert (
        not_independent(openai, A("a2", " openai ", "openai", "gpt-4o-mini"))
        == "a1 and a2 are both from vendor OpenAI"
    )
    # Different vendors recorded, but the same backend and model: one opinion twice.
    assert (
        not_independent(openai, A("a2", "Azure", "openai", "GPT-4o"))
        == "a1 and a2 are the same model (gpt-4o)"
    )
    assert not_independent(openai, A("a2", "Azure", "reference", "gpt-4o")) == ""
    assert not_independent(A("a1", "", "", ""), openai) == "the vendor of a1 is not recorded"


def test_two_adverse_auditors_of_one_vendor_queue_both_verdicts_instead_of_excluding(world):
    from scoring.models import Judge

    Judge.objects.filter(pk=world.auditors[1].pk).update(vendor="a")  # a1 is vendor "A"
    set_verdicts(world, 0, "wrong", "ungradeable")
    counts = triage_run(benchmark=world.benchmark)
    assert excluded_question_ids() == [] and counts["excluded"] == 0
    item = items_by_question(world)["Q0000"]
    assert item.source == "single_auditor_flag"
    detail = item.evidence.get().detail
    assert [(v["auditor"], v["verdict"]) for v in detail["verdicts"]] == [
        ("a1", "wrong"),
        ("a2", "ungradeable"),
    ]
    assert detail["note"] == (
        "every auditor adverse, but not independent opinions (rule 4): "
        "a1 and a2 are both from vendor A"
    )


def test_same_backend_and_model_under_two_vendor_names_is_not_independent(world):
    from scoring.models import Judge

    Judge.objects.filter(pk__in=[a.pk for a in world.auditors]).update(
        backend="openai", model="gpt-4o"
    )
    set_verdicts(world, 1, "wrong", "wrong")
    triage_run(benchmark=world.benchmark)
    assert excluded_question_ids() == []
    note = items_by_question(world)["Q0001"].evidence.get().detail["note"]
    assert note.endswith("a1 and a2 are the same model (gpt-4o)")


def test_an_auditor_with_no_vendor_recorded_never_excludes(world):
    from scoring.models import Judge

    Judge.objects.filter(pk=world.auditors[0].pk).update(vendor="")
    set_verdicts(world, 1, "wrong", "wrong")
    triage_run(benchmark=world.benchmark)
    assert excluded_question_ids() == []
    assert (
        items_by_question(world)["Q0001"]
        .evidence.get()
        .detail["note"]
        .endswith("the vendor of a1 is not recorded")
    )


def test_three_adverse_auditors_exclude_when_two_of_them_are_independent(world):
    from scoring.audit_rule import EXCLUDE, NOT_INDEPENDENT, audit_decisions
    from scoring.models import AuditVerdict, Judge

    a3 = Judge.objects.create(
        benchmark=world.benchmark, judge_id="a3", name="Auditor Three", vendor="A", role="auditor"
    )
    entry = world.entry(2)
    AuditVerdict.objects.create(key_entry=entry, auditor=a3, verdict="wrong", rationale="x")
    set_verdicts(world, 2, "wrong", "wrong")
    assert audit_decisions([entry.pk])[entry.pk].outcome == EXCLUDE  # a1/a3 "A", a2 "B"
    Judge.objects.filter(pk=world.auditors[1].pk).update(vendor="A")
    decision = audit_decisions([entry.pk])[entry.pk]
    assert decision.outcome == NOT_INDEPENDENT
    assert decision.why_not_independent == (
        "a1 and a2 are both from vendor A; a1 and a3 are both from vendor A; "
        "a2 and a3 are both from vendor A"
    )


def test_the_demo_reference_auditors_queue_what_they_both_reject():
    """The demo's two auditors are offline reference auditors of one vendor ("snaglist"):
    the two questions both reject are queued with both verdicts, not excluded."""
    import io

    from questions.models import Benchmark
    from tests.conftest import DEMO_BUNDLE

    err = io.StringIO()
    call_command("import_bundle", str(DEMO_BUNDLE), stdout=io.StringIO(), stderr=err)
    assert (
        "auditors ref-auditor-a, ref-auditor-b are from the same vendor (snaglist); "
        "methodology asks for auditors from different vendors (rule 4: their agreeing "
        "adverse verdicts go to the review queue, they never exclude a question by themselves)"
    ) in err.getvalue()
    assert not AuditExclusion.objects.exists()
    triage_run(benchmark=Benchmark.objects.get())
    notes = [
        e.detail.get("note", "")
        for e in Evidence.objects.filter(kind="single_auditor_flag").order_by("id")
    ]
    both = [n for n in notes if "not independent" in n]
    assert len(both) == 2
    assert all(
        n.endswith("ref-auditor-a and ref-auditor-b are both from vendor snaglist") for n in both
    )
    assert not AuditExclusion.objects.exists()


def test_the_report_counts_every_question_the_key_audit_sends_to_review(world):
    """Triage queues single, mixed and not-independent outcomes (scoring.audit_rule.TO_REVIEW);
    the report's `audit_sent_to_review` counts the same questions, while
    `single_auditor_flags` keeps the write-up's meaning (exactly one adverse verdict)."""
    from scoring.board.report import build_report
    from scoring.models import Judge

    Judge.objects.filter(pk=world.auditors[1].pk).update(vendor="a")  # not independent
    set_verdicts(world, 0, "wrong", "ungradeable")  # both adverse, one vendor
    set_verdicts(world, 1, "correct", "wrong")  # one adverse
    triage_run(benchmark=world.benchmark)
    queued = [
        i.question.question_id
        for i in ReviewItem.objects.filter(benchmark=world.benchmark)
        if "single_auditor_flag" in i.sources
    ]
    doc = build_report(world.original)
    assert sorted(queued) == ["Q0000", "Q0001"]
    assert doc["audit_sent_to_review"] == 2
    assert doc["single_auditor_flags"] == 1
