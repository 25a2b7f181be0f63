"""Issue 27, last "Done when" point: a benchmark in conventions none of the corpora uses.

bench/data/numbered-options (written by bench/data/make_numbered_options.py): options
numbered 1-5 closing each question and keyed "Option N", true/false questions keyed
"True"/"False", 12 models answering in <answer> tags, "Final answer:", "ANSWER:", bold
and bare option text. Six keys are planted wrong (labels.json). Imported and triaged as a
new user would, with its exact-match grades and with the answers alone; the counts in the
reasons were checked by hand against responses.jsonl and grades.jsonl (N27: 11 of the 12
models chose option 3, Japan; the key says option 2, Korea).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command

from review.models import ReviewItem

pytestmark = pytest.mark.django_db

CORPUS = Path(__file__).resolve().parent.parent / "bench" / "data" / "numbered-options"
PLANTED = {
    q for q, label in json.loads((CORPUS / "labels.json").read_text())["labels"].items()
    if label == "planted"
}  # fmt: skip


def _triaged_queue(bundle: Path) -> list[ReviewItem]:
    call_command("import_bundle", str(bundle), verbosity=0)
    call_command("triage", benchmark="numbered-options", verbosity=0)
    return list(
        ReviewItem.objects.filter(benchmark__name="numbered-options").order_by("-priority", "id")
    )


def _check(items: list[ReviewItem]) -> None:
    assert len(PLANTED) == 6
    assert {i.question.question_id for i in items[:6]} == PLANTED
    by_q = {i.question.question_id: i for i in items}
    assert "11 of 12 models answer (3) Japan, not the key's (2) Korea" in by_q["N27"].reasons
    assert "8 of 12 answers read say True, 4 the key's False" in by_q["T03"].reasons
    agree = by_q["N04"].evidence.get(kind="responses_agree_against_key").detail
    assert (agree["key_answer"], agree["suggested_answer"]) == ("(2) 130", "(4) 140")


def test_planted_keys_top_the_queue_with_grades():
    _check(_triaged_queue(CORPUS / "bundle"))


def test_planted_keys_top_the_queue_from_answers_alone(tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(CORPUS / "bundle", bundle)
    (bundle / "grades.jsonl").unlink()
    (bundle / "judges.csv").unlink()
    items = _triaged_queue(bundle)
    _check(items)
    assert "lowest grade" not in items[0].reasons  # no grades: the answers alone
