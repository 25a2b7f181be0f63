"""review.priority: the one rule that turns an item's evidence into its priority and words."""

from __future__ import annotations

from review.priority import evidence_priority


def test_points_sum_distinct_kinds_and_words_list_them_strongest_first():
    p = evidence_priority(
        [
            ("judge_flag", {"both_judges": True}),
            ("consensus_against_key", {"share": 0.8, "models": [1, 2, 3, 4], "n_models": 5}),
            ("single_auditor_flag", {"verdicts": [{"verdict": "wrong"}, {"verdict": "correct"}]}),
        ]
    )
    # 450 (both judges) + 300 + 100 x 0.8 (consensus) + 150 (one auditor)
    assert p.points == 980
    assert p.primary == "judge_flag"
    assert p.reasons == (
        "3 signals: both judges flagged the key; 4 of 5 models at the lowest grade while "
        "scoring well; one auditor adverse"
    )


def test_the_same_kind_twice_counts_once_at_its_strongest():
    weak = ("models_against_key", {"shortfall": 0.5, "marked_down": [1, 2], "n_strongest": 3})
    strong = ("models_against_key", {"shortfall": 0.8, "marked_down": [1, 2, 3], "n_strongest": 3})
    p = evidence_priority([weak, strong])
    assert p.points == 250 + 80
    assert p.reasons == (
        "3 of 3 strongest models marked down against their record (shortfall 0.80)"
    )


def test_queue_order_between_kinds():
    def pts(kind, detail=None):
        return evidence_priority([(kind, detail or {})]).points

    assert pts("judge_flag", {"both_judges": True}) > pts("consensus_against_key", {"share": 1})
    assert pts("consensus_against_key", {"share": 0.6}) > pts(
        "models_against_key", {"shortfall": 1}
    )
    assert pts("responses_agree_against_key", {"basis": "majority"}) == 300
    assert pts("responses_agree_against_key", {"basis": "strongest_half"}) == 250
    assert pts("single_auditor_flag") > pts("judge_flag") > pts("manual")
    assert pts("some_new_check") == 100  # another detector's kind is counted, not dropped


def test_answers_and_manual_reports_in_words():
    p = evidence_priority(
        [
            ("responses_agree_against_key", {"basis": "strongest_half", "n_strongest": 4,
             "models": [1, 2], "suggested_answer": "Alice", "key_answer": "Cheryl"}),
            ("manual", {"note": "The secretary is Alice, not Cheryl."}),
        ]
    )  # fmt: skip
    assert p.reasons == (
        "2 signals: 2 of the 4 strongest models answer Alice, not the key's Cheryl; "
        "reported by hand: The secretary is Alice, not Cheryl."
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
