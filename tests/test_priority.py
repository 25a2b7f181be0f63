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


def test_the_panels_figure_orders_items_the_answers_raised_and_unequal_evidence_never_ties():
    """Issue 27 item 3: two items raised by the same fixed-weight kind (consensus, 1.0 ban)
    tied at 1000 before triage carried the panel's figure onto them; with it, the group of
    kinds read off the same responses weighs the panel's fitted log10 Bayes factor."""
    from review.detectors.panel import panel_fired

    consensus = ("consensus_against_key", {"share": 0.9, "models": [1, 2], "n_models": 2})
    below = {"p_wrong": 0.3, "log10_bf": 0.338, "threshold": 0.5, "n_read": 2, "n_key": 1,
             "key_answer": "7", "suggested_answer": "8", "models": [{"model": "m1"}]}  # fmt: skip
    against = {"p_wrong": 0.01, "log10_bf": -3.0, "threshold": 0.5}
    a = evidence_priority([consensus, ("panel_against_key", below)])
    b = evidence_priority([consensus, ("panel_against_key", against)])
    # a: the panel's +0.338 ban stands for the group -> 338; b: -3 squashed to
    # 0.1 x -3 / (1 + 3) = -0.075 ban -> -75
    assert (a.points, b.points) == (338, -75)
    # words: each kind by its own weight, heaviest first (consensus's fixed 1.0 first)
    assert a.reasons == (
        "2 signals: 2 of 2 models at the lowest grade while scoring well; panel of models: "
        "key wrong with probability 0.30, not above its line of 0.50 (1 of 2 answers read "
        "say 8, 1 the key's 7)"
    )
    # the figure orders the item but did not raise it
    assert not panel_fired("panel_against_key", below)
    assert panel_fired("panel_against_key", {**below, "p_wrong": 0.51})
    assert panel_fired("consensus_against_key", {})
    # a reader's report keeps its own weight beside the figure: 0.5 + (-0.075) -> 425
    with_report = [("reported", {}), consensus, ("panel_against_key", against)]
    assert evidence_priority(with_report).points == 425


def test_a_key_the_models_answers_alone_disfavour_is_raised_low_with_the_reason_in_words():
    """The panel's second line (review.detectors.panel): p_wrong under 1/2 but another
    answer models gave likelier than the key's on their evidence alone (log10_lr_best > 0):
    raised, weighted by its Bayes factor -0.5 -> 0.1 x -0.5 / 1.5 = -0.0333 ban -> -33."""
    from review.detectors.panel import panel_fired

    detail = {"p_wrong": 0.04, "log10_bf": -0.5, "log10_lr_best": 0.301, "threshold": 0.5,
              "n_read": 10, "n_key": 6, "key_answer": "'d'", "suggested_answer": "'d.'",
              "models": [{"model": m} for m in "abcd"]}  # fmt: skip
    assert panel_fired("panel_against_key", detail)
    assert not panel_fired("panel_against_key", {**detail, "log10_lr_best": -0.1})
    assert not panel_fired("panel_against_key", {**detail, "models": []})
    p = evidence_priority([("panel_against_key", detail)])
    assert p.points == -33
    assert p.reasons == (
        "panel of models: key wrong with probability 0.04, not above its line of 0.50; the "
        "models' answers alone favour 'd.' 2.0 to 1 over the key's (4 of 10 answers read say "
        "'d.', 6 the key's 'd')"
    )


def test_an_unparsed_verdict_is_not_adverse():
    # rule 4's adverse verdicts are `wrong` and `ungradeable` (scoring.models.ADVERSE_VERDICTS);
    # an auditor whose reply could not be parsed (verdict None) says nothing against the key.
    unparsed = {"verdicts": [{"verdict": "wrong"}, {"verdict": None}]}
    p = evidence_priority([("single_auditor_flag", unparsed)])
    assert (p.points, p.reasons) == (500, "one auditor adverse")  # 0.5 ban, not 0.7
    two = {"verdicts": [{"verdict": "wrong"}, {"verdict": "ungradeable"}]}
    assert evidence_priority([("single_auditor_flag", two)]).points == 700
