"""review.priority: the one rule that turns an item's evidence into its priority and words."""

from __future__ import annotations

import pytest

from review.priority import evidence_priority


def test_weights_in_bans_add_and_words_list_them_heaviest_first():
    p = evidence_priority(
        [
            ("judge_flag", {"both_judges": True}),
            ("consensus_against_key", {"share": 0.8, "models": [1, 2, 3, 4], "n_models": 5}),
            ("single_auditor_flag", {"verdicts": [{"verdict": "wrong"}, {"verdict": "correct"}]}),
        ]
    )
    # 1.0 (both judges) + 1.0 (consensus, no panel figure) + 0.5 (one auditor) bans
    assert p.points == 2500
    assert p.primary == "consensus_against_key"  # ties at 1.0 ban: by kind name
    assert p.reasons == (
        "3 signals: 4 of 5 models at the lowest grade while scoring well; both judges "
        "flagged the key; one auditor adverse"
    )


def test_the_same_kind_twice_counts_once_at_its_strongest():
    weak = ("responses_agree_against_key", {"basis": "strongest_half", "models": [1, 2]})
    strong = ("responses_agree_against_key", {"basis": "majority", "models": [1, 2, 3]})
    assert evidence_priority([weak, strong]).points == 1000
    assert evidence_priority([weak]).points == 700


PANEL = {"p_wrong": 0.97, "log10_bf": 2.345, "n_read": 7, "n_key": 0, "key_answer": "0",
         "suggested_answer": "3", "models": [1, 2, 3, 4]}  # fmt: skip


def test_the_panel_counts_its_bayes_factor_and_stands_for_the_same_responses():
    # the panel alone: 2.345 bans -> 2345 milli-bans
    assert evidence_priority([("panel_against_key", PANEL)]).points == 2345
    # consensus and the answers are read off the same responses: counted once, the
    # panel's figure standing for the group; an auditor's verdict adds (+0.5)
    p = evidence_priority(
        [
            ("consensus_against_key", {"share": 1, "models": [1], "n_models": 1}),
            ("responses_agree_against_key", {"basis": "majority", "models": [1]}),
            ("panel_against_key", PANEL),
            ("single_auditor_flag", {"verdicts": [{"verdict": "wrong"}]}),
        ]
    )
    assert p.points == 2345 + 500
    assert p.primary == "panel_against_key"
    assert p.reasons.startswith(
        "4 signals: panel of models: key wrong with probability 0.97 (4 of 7 answers read "
        "say 3, 0 the key's 0); "
    )
    # a re-fit's figure replaces the old one (the latest counts, not the largest)
    later = {**PANEL, "log10_bf": 0.5}
    assert (
        evidence_priority([("panel_against_key", PANEL), ("panel_against_key", later)]).points
        == 500
    )


def test_a_panel_siding_with_the_key_lowers_by_less_than_the_cap():
    from review.priority import PANEL_FOR_KEY_CAP, evidence_weight

    # -1 ban squashed to 0.1 * -1 / (1 + 1) = -0.05; -9 bans to -0.09
    assert evidence_weight("panel_against_key", {"log10_bf": -1.0}) == -0.05
    assert evidence_weight("panel_against_key", {"log10_bf": -9.0}) == pytest.approx(-0.09)
    assert evidence_weight("panel_against_key", {"log10_bf": -1e9}) > -PANEL_FOR_KEY_CAP


def test_queue_order_between_kinds():
    def pts(kind, detail=None):
        return evidence_priority([(kind, detail or {})]).points

    assert pts("superseded_citation", {"problem": "superseded"}) == 1500
    assert pts("judge_flag", {"both_judges": True}) == pts("manual") == 1000
    assert pts("superseded_citation", {"problem": "locator_not_found"}) == 700
    assert pts("responses_agree_against_key", {"basis": "majority"}) == 1000
    assert pts("responses_agree_against_key", {"basis": "strongest_half"}) == 700
    # a reader's report is evidence of its own weight, equal to one adverse auditor
    assert pts("reported") == pts("single_auditor_flag") == 500 > pts("judge_flag") == 400
    assert pts("reported", {"spam": True}) == 0
    assert pts("some_new_check") == 300  # another detector's kind is counted, not dropped


def test_answers_and_manual_reports_in_words():
    p = evidence_priority(
        [
            ("responses_agree_against_key", {"basis": "strongest_half", "n_strongest": 4,
             "models": [1, 2], "suggested_answer": "Alice", "key_answer": "Cheryl"}),
            ("manual", {"note": "The secretary is Alice, not Cheryl."}),
        ]
    )  # fmt: skip
    assert p.points == 1000 + 700
    assert p.reasons == (
        "2 signals: reported by hand: The secretary is Alice, not Cheryl.; 2 of the 4 "
        "strongest models answer Alice, not the key's Cheryl"
    )
    assert evidence_priority([]).reasons == "no evidence"


def test_citation_problems_read_as_words_in_the_queue_not_as_codes():
    """The queue's reasons used "cited document ADB is figure_not_in_passage": each failed
    citation check now reads as the item page says it (review.citation_checks.describe)."""
    from review.models import Source
    from review.priority import evidence_words

    kind = Source.SUPERSEDED_CITATION
    assert evidence_words(
        kind,
        {"doc_id": "ADB-V1", "locator": "3.5", "problem": "figure_not_in_passage",
         "figure": "900 mm", "passage_figures": ["1100 mm"]},
    ) == "key answer's 900 mm is not stated in ADB-V1 3.5, which gives 1100 mm"  # fmt: skip
    assert evidence_words(
        kind,
        {"doc_id": "ADH", "locator": "2.1", "problem": "figure_limit_reversed",
         "figure": "1200 mm", "key_limit": "max", "passage_limit": "min"},
    ) == "key answer gives 1200 mm as a maximum; ADH 2.1 gives it as a minimum"  # fmt: skip
    assert (
        evidence_words(kind, {"doc_id": "ADA", "locator": "1.1", "problem": "locator_not_found"})
        == "locator 1.1 is not in ADA"
    )
    assert "_" not in evidence_words(
        kind, {"doc_id": "ADB", "problem": "superseded", "document_edition": "2006"}
    )


def test_a_report_note_is_cut_at_a_word_in_the_queue():
    """Issue 30 item 9: the reader's note was cut at 80 characters, mid-word."""
    from review.priority import note_excerpt

    note = (
        "The key says 900 mm but Approved Document K 2013 clause 5.8(a) says the landing "
        "must be 1100 mm."
    )
    assert len(note) > 80
    reasons = evidence_priority([("reported", {"note": note})]).reasons
    assert reasons == (
        "reported by a reader: The key says 900 mm but Approved Document K 2013 clause "
        "5.8(a) says the …"
    )
    assert len(note_excerpt(note)) <= 80
    assert note_excerpt("short   note\n here") == "short note here"
    assert note_excerpt("x" * 200) == "x" * 79 + "…"


def test_an_unparsed_verdict_is_not_adverse():
    # rule 4's adverse verdicts are `wrong` and `ungradeable` (scoring.models.ADVERSE_VERDICTS);
    # an auditor whose reply could not be parsed (verdict None) says nothing against the key.
    unparsed = {"verdicts": [{"verdict": "wrong"}, {"verdict": None}]}
    p = evidence_priority([("single_auditor_flag", unparsed)])
    assert (p.points, p.reasons) == (500, "one auditor adverse")  # 0.5 ban, not 0.7
    two = {"verdicts": [{"verdict": "wrong"}, {"verdict": "ungradeable"}]}
    assert evidence_priority([("single_auditor_flag", two)]).points == 700
