"""Issue 17 detectors on real data (MT-Bench) and on the demo bundle.

The MT-Bench ground truth (docs/detectors.md) was fixed by solving every question by hand
before any detector ran: the GPT-4 reference key is wrong and the strongest models right on
104, 105, 111 and 114. Thresholds are the detectors' documented first-principles defaults.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command

from review.models import ReviewItem

pytestmark = pytest.mark.django_db

SHARED = Path(__file__).resolve().parent.parent / ".." / "shared" / "data" / "bundles"
MTBENCH = SHARED / "mtbench-reference"
DEMO = Path(__file__).resolve().parent.parent / "questions" / "fixtures" / "demo-bundle"
KEY_WRONG_MODELS_RIGHT = {"104", "105", "111", "114"}


def queue(benchmark: str) -> list[ReviewItem]:
    return list(ReviewItem.objects.filter(benchmark__name=benchmark).order_by("-priority", "id"))


def test_mtbench_wrong_keys_rank_top_of_the_queue():
    """Issue 27: the panel (answers read by judges.answers, grades 1-10 of one judge).

    The four positives take the first four places. 104 ("how many brothers does David
    have", key "David has only one brother", right answer none) is found since the reader
    reads counts for "how many" questions (it read every answer as the name "David"
    before): both Claude models answer 0 brothers, four others 3 and one 4, none the key's
    1 (checked by hand in responses.jsonl).
    """
    call_command("import_bundle", str(MTBENCH), verbosity=0)
    call_command("triage", benchmark="mtbench-reference", verbosity=0)
    items = queue("mtbench-reference")
    top8 = [i.question.question_id for i in items[:8]]
    assert top8[:4] == ["111", "105", "114", "104"]
    by_q = {i.question.question_id: i for i in items}
    panel_104 = by_q["104"].evidence.get(kind="panel_against_key").detail
    assert (panel_104["key_answer"], panel_104["suggested_answer"], panel_104["n_key"]) == (
        "1 brother",
        "0 brothers",
        0,
    )
    panel = by_q["111"].evidence.get(kind="panel_against_key").detail
    # 111: the key's area 0; 4 of the 7 models answer 3, none the key's 0
    assert (panel["key_answer"], panel["suggested_answer"], panel["n_key"]) == ("0", "3", 0)
    assert panel["p_wrong"] > 0.9
    assert by_q["111"].priority == round(1000 * panel["log10_bf"])  # one group, counted once
    agree = by_q["111"].evidence.get(kind="responses_agree_against_key").detail
    assert (agree["suggested_answer"], agree["key_answer"], agree["basis"]) == (
        "3",
        "0",
        "majority",
    )


def test_demo_still_puts_class_ma_on_top():
    call_command("import_bundle", str(DEMO), verbosity=0)
    call_command("triage", benchmark="uk-construction-demo", verbosity=0)
    top = queue("uk-construction-demo")[0]
    assert top.question.question_id == "Q046"
    assert top.source == "panel_against_key"
    assert "both judges flagged the key" in top.reasons


def test_demo_evidence_quotes_the_key_and_the_excerpt_exactly():
    """Issue 27 item 4 on the demo: Q043 (key "at least 4 of the other 19") and Q035 (key
    850 mm; 1500 mm is the landing) are no longer said to disagree with the models; Q009's
    key answers two distances, so no one of them is quoted as the key's; Q028's 50 m is
    "not found in the stored excerpt", which stops after clause (b)."""
    call_command("import_bundle", str(DEMO), verbosity=0)
    call_command("triage", benchmark="uk-construction-demo", verbosity=0)
    by_q = {i.question.question_id: i for i in queue("uk-construction-demo")}
    agree = {
        q: i.evidence.get(kind="responses_agree_against_key").detail
        for q, i in by_q.items()
        if i.evidence.filter(kind="responses_agree_against_key").exists()
    }
    assert "Q043" not in agree and "Q035" not in agree and "Q009" not in agree
    assert by_q["Q043"].reasons == "one auditor adverse"  # was "... answer 4, not the key's 19"
    assert "Q035" not in by_q  # was "300 mm, not the key's 1500 mm"
    q037 = agree["Q037"]
    assert (q037["key_answer"], q037["suggested_answer"], q037["n_key"]) == ("650 mm", "450 mm", 4)
    cite = by_q["Q028"].evidence.get(kind="superseded_citation").detail
    assert (cite["figure"], cite["excerpt_ends"]) == (
        "50 m",
        "…cated within 10m of inland freshwaters or coastal waters; or",
    )
    assert (
        "50 m is not found in the stored excerpt of ADJ 5.8, which ends at" in by_q["Q028"].reasons
    )
    assert "not stated in ADJ 5.8" not in by_q["Q028"].reasons


#: Q104 read by hand as the answer reader is to read it once it counts a noun the question
#: counts (the `detread` branch): the key "David has only one brother" is 1 brother; the
#: Claude models say 0 ("zero brothers"; Sonnet before its made-up next turn), llama2_7b 4,
#: the other four 3. No model gives the key's 1.
Q104_BY_HAND = {
    "claude-3-5-sonnet-20240620": 0.0,
    "claude-3-opus-20240229": 0.0,
    "llama2_7b": 4.0,
    "llama2_chat_7b": 3.0,
    "finetune_llama2_chat_7b": 3.0,
    "finetune_llama2_chat_7b_Attention": 3.0,
    "finetune_llama2_chat_7b_FFNet": 3.0,
}


def test_mtbench_q104_ranks_in_the_top_8_once_its_count_is_read(monkeypatch):
    """The ranking side of Q104: with the counts read (by hand above), all four known-wrong
    keys are in the top 8, Q104 among them, while the reader itself is another branch's."""
    from judges.answers import Answer
    from review.detectors import panel, responses_agree

    real = panel.read_key_and_responses

    def count(n: float) -> Answer:
        return Answer("count", n, f"{n:g} brother{'' if n == 1 else 's'}", "brother", 0)

    def reader(key_text, responses, *, question):
        if "How many brothers does David have" not in question:
            return real(key_text, responses, question=question)
        return count(1.0), {m: count(Q104_BY_HAND[m]) for m in responses}

    monkeypatch.setattr(panel, "read_key_and_responses", reader)
    monkeypatch.setattr(responses_agree, "read_key_and_responses", reader)
    call_command("import_bundle", str(MTBENCH), verbosity=0)
    call_command("triage", benchmark="mtbench-reference", verbosity=0)
    top8 = [i.question.question_id for i in queue("mtbench-reference")[:8]]
    assert KEY_WRONG_MODELS_RIGHT <= set(top8), top8
