"""judges.answers and the responses_agree_against_key detector, without a database."""

from __future__ import annotations

import pytest

from judges.answers import final_answer
from review.detectors.responses_agree import responses_agree_detail

DICE = "When rolling two dice, what is the probability that you roll a total number that is at least 3?"


def test_final_answer_reads_the_conclusion_not_the_working():
    text = "There are 36 outcomes.\nOnly (1,1) is below 3.\nTherefore the probability is 35/36."
    a = final_answer(text, question=DICE)
    assert (a.kind, a.label) == ("number", "35/36")
    assert a.value == pytest.approx(35 / 36)


def test_a_rounded_decimal_equals_the_fraction_to_its_precision():
    key = final_answer("So the probability is 17/18.", question=DICE)
    assert final_answer("So it is about 0.944.", question=DICE).same_as(key)  # 17/18 = 0.9444
    assert not final_answer("So it is about 0.972.", question=DICE).same_as(key)
    # a percentage is a fraction: 94.4% = 0.944
    assert final_answer("So, 94.4%.", question=DICE).same_as(key)


def test_numbers_the_question_states_are_passed_over():
    q = "How many integers are in the solution of the inequality |x + 5| < 10"
    a = final_answer("There are 19 integers in the solution of |x + 5| < 10.", question=q)
    assert a.value == 19.0


def test_counts_of_a_noun_the_question_counts():
    q = "David has three sisters. Each of them has one brother. How many brothers does David have?"
    for text, value in [("So David has 0 brothers.", 0), ("Therefore he has no brothers.", 0),
                        ("David has three brothers.", 3)]:  # fmt: skip
        a = final_answer(text, question=q, kind="count")
        assert (a.kind, a.value, a.unit) == ("count", value, "brother")
    # "one brother" only repeats the question: not an answer
    assert final_answer("Each sister has one brother.", question=q, kind="count").is_read is False


def test_figures_with_units_and_the_keys_unit_only():
    q = "What is the minimum width of a firefighting stair?"
    a = final_answer("The minimum width is 1.1 m.", question=q)
    assert (a.unit, a.value) == ("length", 1100.0)
    assert final_answer("It must be 1100 mm wide.", question=q).same_as(a)
    assert (
        final_answer("Allow 3 months.", question=q, kind="number", unit="length").is_read is False
    )


def test_choice_and_name_and_next_turn_cut():
    q = "Which should be reported?\na) a girl reading\nb) an argument\nc) a backpack taken"
    assert final_answer("The answer is c) the backpack.", question=q).value == "c"
    q2 = "The cars of Alice, Bert and Cheryl are parked. Who is the secretary?"
    text = "Therefore the secretary is Alice.\n### Human: and Bert?"
    assert final_answer(text, question=q2, kind="name").value == "Alice"


def test_detector_majority_suggests_the_agreed_answer():
    q = "The vertices of a triangle are at points (0, 0), (-1, 1), and (3, 3). What is the area?"
    responses = {"m1": "So the area is 3.", "m2": "Thus the area is 3.", "m3": "So it is 3.",
                 "m4": "So 1.5.", "m5": "Answer: 4.5"}  # fmt: skip
    d = responses_agree_detail(question=q, key_answer="The area is 0.", responses=responses)
    assert d["basis"] == "majority" and d["suggested_answer"] == "3" and d["key_answer"] == "0"
    assert [m["model"] for m in d["models"]] == ["m1", "m2", "m3"]
    assert d["n_models"] == 5 and d["n_read"] == 5


def test_detector_strongest_half_needs_two_and_no_equal_rival():
    q = "What is the area?"
    responses = {"s1": "So 3.", "s2": "So 3.", "w1": "So 0.", "w2": "So 0.", "w3": "So 7."}
    scores = {"s1": 90.0, "s2": 85.0, "w1": 30.0, "w2": 20.0, "w3": 10.0}
    # no majority (2 of 5); strongest half = s1, s2, w1: "3" twice, "0" once -> fires
    d = responses_agree_detail(question=q, key_answer="The area is 0.", responses=responses,
                               scores=scores)  # fmt: skip
    assert d["basis"] == "strongest_half" and d["n_strongest"] == 3
    assert [(m["model"], m["overall_score"]) for m in d["models"]] == [("s1", 90.0), ("s2", 85.0)]
    # without scores (no grades) only a majority counts
    assert (
        responses_agree_detail(question=q, key_answer="The area is 0.", responses=responses) is None
    )


def test_detector_silent_when_models_agree_with_the_key_or_the_key_states_nothing():
    q = "What is the area?"
    responses = {"a": "So 3.", "b": "So 3.", "c": "So 3."}
    assert responses_agree_detail(question=q, key_answer="It is 3.", responses=responses) is None
    assert responses_agree_detail(question=q, key_answer="It depends.", responses=responses) is None


# -- issue 27 item 4: the evidence says exactly what the key and the models answer ---------

EV = "A new office building has 20 parking spaces. What electric vehicle charging provision does Approved Document S require?"
Q035 = "For an M4(2) accessible and adaptable dwelling, what minimum clear opening width must the principal communal entrance door provide?"
Q009 = "In an office, what are the maximum travel distances to the nearest storey exit where escape is possible in one direction only, and where it is possible in more than one direction?"


def test_the_keys_answer_is_the_figure_the_question_asks_about():
    # Demo Q043: "at least 4 of the other 19" answers 4; 19 is the total it is taken of.
    key = "One charge point for the building, plus cable routes to at least one in five of the remaining spaces (so at least 4 of the other 19)."
    a = final_answer(key, question=EV, strict=True)
    assert (a.label, a.ambiguous) == ("4", False)
    # Demo Q035: the opening width (850 mm), not the landing (1500 mm) said after it.
    key = "At least 850 mm clear opening width (measured per Diagram 2.2), with a level landing of at least 1500 mm × 1500 mm outside."
    a = final_answer(key, question=Q035, strict=True)
    assert (a.label, a.unit, a.value, a.ambiguous) == ("850 mm", "length", 850.0, False)
    # Demo Q009 asks two things: no one figure is the key's answer.
    key = "18 m where escape is possible in one direction only, and 45 m where it is possible in more than one direction."
    assert final_answer(key, question=Q009, strict=True).ambiguous


def test_no_evidence_when_the_key_reading_is_ambiguous():
    key = "18 m where escape is possible in one direction only, and 45 m where it is possible in more than one direction."
    responses = {f"m{i}": "The limit is 18 m." for i in range(5)}
    assert responses_agree_detail(question=Q009, key_answer=key, responses=responses) is None


def test_the_suggested_correction_keeps_sign_and_unit():
    q = "What is the value of x?"
    responses = {
        "m1": "So x = \u221214.",
        "m2": "Answer: -14",
        "m3": "x = \u201314",
        "m4": "So 14.",
    }
    d = responses_agree_detail(question=q, key_answer="The answer is 14.", responses=responses)
    assert (d["key_answer"], d["suggested_answer"], d["n_key"]) == ("14", "-14", 1)
    # the same sign as the key is agreement, whatever dash each model types
    agree = {"m1": "So x = \u221214.", "m2": "Answer: -14", "m3": "x = \u201314"}
    assert (
        responses_agree_detail(question=q, key_answer="So x is \u221214.", responses=agree) is None
    )
    w = "What is the minimum clear width?"
    resp = {"m1": "So the width is 0.3 m.", "m2": "It is 300 mm.", "m3": "So 30 cm."}
    d = responses_agree_detail(question=w, key_answer="At least 850 mm.", responses=resp)
    assert (d["key_answer"], d["suggested_answer"]) == ("850 mm", "0.3 m")
    assert [m["answer"] for m in d["models"]] == ["0.3 m", "300 mm", "30 cm"]


def test_unread_answers_are_never_a_disagreement():
    q = "How many are left?"
    responses = {"m1": "So 3.", "m2": "I cannot tell.", "m3": "Unclear.", "m4": "No idea.",
                 "m5": '{"reasoning": "too hard"}'}  # fmt: skip
    assert (
        responses_agree_detail(question=q, key_answer="The answer is 3.", responses=responses)
        is None
    )
    scores = {"m1": 10.0, "m2": 90.0, "m3": 80.0, "m4": 70.0, "m5": 60.0}
    assert (
        responses_agree_detail(
            question=q, key_answer="The answer is 3.", responses=responses, scores=scores
        )
        is None
    )
    assert not final_answer("I cannot tell.", question=q).differs_from(
        final_answer("3", question=q)
    )


def test_describe_gives_the_readings_with_counts():
    from review.detectors.responses_agree import describe

    q = "What is the area?"
    responses = {"m1": "So the area is 3.", "m2": "Thus the area is 3.", "m3": "So it is 3.",
                 "m4": "The area is 0.", "m5": "I am not sure.", "m6": "So 3."}  # fmt: skip
    d = responses_agree_detail(question=q, key_answer="The area is 0.", responses=responses)
    assert describe(d) == (
        "4 of 6 models answer 3, not the key's 0 (1 gives the key's answer, 1 unread)"
    )


def test_the_reference_judge_grades_choice_literal_and_explicit_number_keys_by_the_reader():
    from judges import GradingInput, get_backend

    judge = get_backend({"backend": "reference", "strictness": "lenient"})
    mc = "Which term?\n(A) Schein\n(B) Pre\n(C) Kotter"

    def grade(question, key, response):
        return judge.grade(GradingInput(question, key, "", response, [0, 1, 2])).grade

    assert grade(mc, "(B) Pre", "The answer is **B**.") == 2
    assert grade(mc, "(B) Pre", "Answer: C") == 0
    assert grade("crux", "[(4, 1), (2, 3)]", '{"answer": "[(4, 1), (2, 3)]"}') == 2
    assert grade("crux", "[(4, 1), (2, 3)]", '{"answer": "[(4, 1)]"}') == 0
    # "The answer is 3.": a response that states 3 on the way to 5 is wrong, not right
    assert grade("How many?", "The answer is 3.", "First 3 + 2 = 5. So the answer is 5.") == 0
    assert grade("How many?", "The answer is \u22123.", '```json\n{"answer": "-3"}\n```') == 2


def test_the_reference_judge_grades_numbered_options_true_false_and_tags_by_the_reader():
    """Conventions none of the corpora uses (issue 27): options numbered 1-5 keyed "Option
    N", True/False keys, and answers in <answer> tags."""
    from judges import GradingInput, get_backend

    judge = get_backend({"backend": "reference", "strictness": "lenient"})
    numbered = "Which planet is closest to the Sun?\n1. Venus\n2. Earth\n3. Mercury\n4. Mars"

    def grade(question, key, response):
        return judge.grade(GradingInput(question, key, "", response, [0, 1, 2])).grade

    assert grade(numbered, "Option 3", "Venus is second.\n<answer>Option 3</answer>") == 2
    assert grade(numbered, "Option 3", "Final answer: option 1") == 0
    assert grade(numbered, "Option 3", "Mercury") == 2
    tf = "True or false: bats are birds."
    assert grade(tf, "False", "Bats are mammals. The statement is false.") == 2
    assert grade(tf, "False", "<answer>True</answer>") == 0
    assert grade("What is 6 times 7?", "The answer is 42.", "<answer>42</answer>") == 2
