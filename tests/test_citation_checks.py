"""Citation checks in triage (issue 17 item 3): unit tests and the measurement on real text.

The measurement imports tests/data/citation-testset (built by
scripts/build_citation_testset.py from ../shared/data/approved-documents), indexes the
real Approved Document text with `import_sources`, runs triage with no auditor and no
grades, and counts which planted defects reach the queue and how many sound entries do.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest
from django.core.management import call_command

from questions.models import SourceDocument
from questions.passages import locate_quote
from review.citation_checks import describe, figure_findings
from review.models import Evidence, ReviewItem
from review.triage import triage_run
from tests.review_fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db

DATA = Path(__file__).resolve().parent / "data"
TESTSET = DATA / "citation-testset"
LABELS = json.loads((DATA / "citation-testset-labels.json").read_text(encoding="utf-8"))
DOCS = Path(__file__).resolve().parents[2] / "shared" / "data" / "approved-documents"
FILES = {
    "ADB-V1": "Text-Approved_Document_B_vol_1-Content.txt",
    "ADC": "Text-Approved_Document_C-Content.txt",
    "ADF-V1": "Text-Approved_Document_F_V1-Content.txt",
    "ADG": "Text-Approved_Document_G-Content.txt",
    "ADH": "Text-Approved_Document_H-Content.txt",
    "ADJ": "Text-Approved_Document_J-Content.txt",
    "ADK": "Text-Approved_Document_K-Content.txt",
    "ADM-V1": "Text-Approved_Document_M_vol_1-Content.txt",
}


# --------------------------------------------------------------------------- pure parts


def test_locate_quote_finds_an_elided_quote_and_names_the_passage_that_holds_it():
    passage = "The stair should have a rise of not more than 220mm and a going of 220mm."
    where = locate_quote("rise of not more than 220mm ... going of 220mm", passage)
    assert where.found and passage[where.span[0] : where.span[1]].startswith("rise of")
    others = [("1.1", "nothing here"), ("1.3", "A RISE of  not more than 220mm here")]
    where = locate_quote("rise of not more than 220mm", "a different passage", others)
    assert not where.found and where.elsewhere == ("1.3",)
    assert locate_quote("  ", passage).found is False


def test_figure_findings_converts_units_and_names_the_passage_figure_of_that_unit():
    passage = "The minimum clear width should be 1.1m and the landing at least 900 mm long."
    assert figure_findings("A clear width of 1100 mm.", passage) == []
    assert figure_findings("A width of 1.2 m; the landing 900mm.", passage) == [
        {
            "problem": "figure_not_in_passage",
            "figure": "1.2 m",
            "passage_figures": ["1.1 m", "900 mm"],
        }
    ]
    # A figure of a unit the passage never gives: named, with no passage figure.
    assert figure_findings("Within 30 minutes.", passage) == [
        {"problem": "figure_not_in_passage", "figure": "30 minutes", "passage_figures": []}
    ]
    # Bare numbers are not compared (a class, a count, a list item).
    assert figure_findings("Class 2 and item 3.", passage) == []


def test_figure_findings_names_a_limit_the_key_reverses():
    passage = "The landing should be at least 900mm long and not more than 2m wide."
    assert figure_findings("A landing a maximum of 900 mm long.", passage) == [
        {
            "problem": "figure_limit_reversed",
            "figure": "900 mm",
            "key_limit": "max",
            "passage_limit": "min",
        }
    ]
    # Same limit, or no limit stated by the key: nothing to say.
    assert figure_findings("A landing at least 900 mm long, 2 m wide.", passage) == []
    # The passage states the figure both ways somewhere: not reversed.
    both = passage + " A step of at least 2m is needed."
    assert figure_findings("not more than 2 m", both) == []
    assert figure_findings("at least 2 m", passage)[0]["passage_limit"] == "max"


def test_describe_says_each_failure_in_words():
    assert describe(
        {"doc_id": "ADK", "locator": "1.2", "problem": "quote_not_in_passage", "found_in": ["1.3"]}
    ) == ("Quoted words are not in ADK 1.2 but in 1.3")
    assert describe(
        {
            "doc_id": "ADK",
            "locator": "1.2",
            "problem": "figure_not_in_passage",
            "figure": "950 mm",
            "passage_figures": ["900 mm"],
        }
    ) == ("Key answer's 950 mm is not stated in ADK 1.2, which gives 900 mm")
    assert describe(
        {
            "doc_id": "ADK",
            "locator": "1.2",
            "problem": "figure_limit_reversed",
            "figure": "1200 mm",
            "key_limit": "max",
            "passage_limit": "min",
        }
    ) == ("Key answer gives 1200 mm as a maximum; ADK 1.2 gives it as a minimum")
    assert (
        describe(
            {
                "doc_id": "ADA",
                "problem": "superseded",
                "document_edition": "2004",
                "superseded_by": "ADA-2013",
            }
        )
        == "Cited edition of ADA (2004) is superseded by ADA-2013"
    )


# --------------------------------------------------------------------------- in triage


def test_triage_counts_entries_whose_document_has_no_indexed_text_as_not_checked(world):
    from questions.models import Section

    Section.objects.filter(document=world.documents["ADA"]).delete()
    counts = triage_run(benchmark=world.benchmark)
    checks = counts["citation_checks"]
    assert checks["checked"] == 0
    assert checks["not_checked"] == len(world.questions)
    assert checks["failed"] == {}
    assert not ReviewItem.objects.exists()


def test_quote_moved_to_another_passage_is_evidence_and_the_item_page_names_it(
    client, reviewer, world
):
    from questions.models import Section

    last = Section.objects.filter(document=world.documents["ADA"]).order_by("-position").first()
    Section.objects.filter(document=world.documents["ADA"], locator="1.1").update(
        text="Paragraph 1: the maximum span is 3 m."
    )
    Section.objects.filter(pk=last.pk).update(text="Moved: the minimum bearing is 101 mm here.")
    counts = triage_run(benchmark=world.benchmark)
    item = ReviewItem.objects.get(question=world.q(1))
    details = sorted(item.evidence.values_list("detail", flat=True), key=lambda d: d["problem"])
    assert [d["problem"] for d in details] == ["figure_not_in_passage", "quote_not_in_passage"]
    assert details[0]["figure"] == "101 mm" and details[0]["passage_figures"] == ["3 m"]
    assert details[1]["found_in"] == [last.locator] and details[1]["locator"] == "1.1"
    assert counts["citation_checks"]["failed"] == {
        "figure_not_in_passage": 1,
        "quote_not_in_passage": 1,
    }
    assert ReviewItem.objects.count() == 1  # the other entries pass every check
    client.force_login(reviewer)
    body = client.get(f"/review/items/{item.pk}/").content.decode()
    assert f"The quoted words were not found in this passage. They are in {last.locator}." in body
    assert f"Quoted words are not in ADA 1.1 but in {last.locator}" in body
    assert "Key answer&#x27;s 101 mm is not stated in ADA 1.1, which gives 3 m" in body


def test_item_page_says_not_checked_when_the_document_has_no_indexed_text(client, reviewer, world):
    from questions.models import Section
    from tests.factories import ReviewItemFactory

    Section.objects.filter(document=world.documents["ADA"]).delete()
    item = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    client.force_login(reviewer)
    body = client.get(f"/review/items/{item.pk}/").content.decode()
    assert "Citation not checked: the text of AD A has not been indexed" in body
    assert "was not found in" not in body


# --------------------------------------------------------------------------- measurement


def _load_testset() -> None:
    call_command("import_bundle", str(TESTSET), stdout=io.StringIO(), stderr=io.StringIO())
    files = [str(DOCS / FILES[d]) for d in sorted(FILES)]
    call_command("import_sources", *files, stdout=io.StringIO())


def measure() -> dict:
    """Run triage on the test set and return recall per kind and false flags per 10 sound."""
    from questions.models import Benchmark

    _load_testset()
    counts = triage_run(benchmark=Benchmark.objects.get(name="citation-testset"))
    flagged: dict[str, list[str]] = {}
    for qid, problem in Evidence.objects.values_list(
        "item__question__question_id", "detail__problem"
    ):
        flagged.setdefault(qid, []).append(problem)
    kinds = Counter(LABELS.values())
    caught = Counter(LABELS[q] for q in flagged)
    return {
        "counts": counts,
        "flagged": flagged,
        "kinds": dict(kinds),
        "caught": dict(caught),
        "false_flags_per_10_sound": round(10 * caught["sound"] / kinds["sound"], 2),
    }


def test_citation_checks_on_real_approved_document_text_with_planted_defects():
    result = measure()
    kinds, caught, flagged = result["kinds"], result["caught"], result["flagged"]
    assert kinds == {
        "sound": 48,
        "nonexistent_locator": 4,
        "wrong_paragraph": 4,
        "wrong_figure": 4,
        "wrong_condition": 4,
    }
    assert result["counts"]["citation_checks"]["checked"] == 64
    assert result["counts"]["citation_checks"]["not_checked"] == 0
    # Every non-existent locator, wrong paragraph and wrong figure surfaced...
    for kind in ("nonexistent_locator", "wrong_paragraph", "wrong_figure"):
        assert caught.get(kind, 0) == kinds[kind], (kind, flagged)
    # ...by the check made for it, naming what it found.
    for qid, kind in LABELS.items():
        if kind == "nonexistent_locator":
            assert "locator_not_found" in flagged[qid]
        elif kind == "wrong_paragraph":
            assert "quote_not_in_passage" in flagged[qid]
        elif kind == "wrong_figure":
            assert "figure_not_in_passage" in flagged[qid]
    # Wrong conditions may be missed (issue 17); a reversed limit catches 3 of the 4
    # (CT016 "not more than 328mm" for "at least", CT048 and CT064 "a maximum of" for
    # "a minimum of"); CT032 ("need not" for "should") changes no figure's limit.
    assert caught.get("wrong_condition", 0) == 3, flagged
    for qid in ("CT016", "CT048", "CT064"):
        assert LABELS[qid] == "wrong_condition" and "figure_limit_reversed" in flagged[qid]
    # At most one false flag per 10 sound entries (goal of issue 17).
    assert result["false_flags_per_10_sound"] <= 1.0, {
        q: p for q, p in flagged.items() if LABELS[q] == "sound"
    }
    print(json.dumps({k: result[k] for k in ("kinds", "caught", "false_flags_per_10_sound")}))


def test_wrong_paragraph_evidence_names_the_paragraph_that_holds_the_quote():
    _load_testset()
    from questions.models import Benchmark

    triage_run(benchmark=Benchmark.objects.get(name="citation-testset"))
    questions = {
        json.loads(line)["question_id"]: json.loads(line)
        for line in (TESTSET / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    }
    qid = next(q for q, k in sorted(LABELS.items()) if k == "wrong_paragraph")
    ev = Evidence.objects.get(
        item__question__question_id=qid, detail__problem="quote_not_in_passage"
    )
    assert ev.detail["locator"] == questions[qid]["citation"]["locator"]
    # The builder took the locator of the paragraph after the one quoted: the evidence
    # names the quoted paragraph, which precedes the cited one in the document.
    doc = SourceDocument.objects.get(doc_id=questions[qid]["citation"]["doc_id"])
    sections = list(doc.sections.order_by("position").values_list("locator", flat=True))
    [found_in] = ev.detail["found_in"]
    assert sections.index(found_in) < sections.index(ev.detail["locator"])


def test_citation_checks_on_the_demo_bundle_reindexed_from_the_real_text():
    """The demo's 46 hand-written questions, with every Approved Document it cites
    re-indexed from ../shared/data by `import_sources` (the GPDO and the 2006 AD B
    summary keep the bundle's passages). Its deliberate defects (manifest demo_defects)
    Q004 wrong figure, Q009 missing locator, Q005 superseded edition are found; Q046
    (amended requirement, Class MA) is not a citation fault. One sound entry is flagged:
    Q024 "100 mm for up to 10 dwellings" - the figure parser reads "up to" as 100 mm's
    limit, so the key seems to make the passage's minimum a maximum: 1 false flag in 42
    sound entries (0.24 per 10)."""
    from questions.models import Benchmark
    from tests.conftest import DEMO_BUNDLE

    call_command("import_bundle", str(DEMO_BUNDLE), stdout=io.StringIO(), stderr=io.StringIO())
    demo = Benchmark.objects.get()
    files = sorted(
        str(DOCS / f"Text-Approved_Document_{part}-Content.txt")
        for part in "7 A B_vol_1 B_vol_2 C D E F_V1 G H J K M_vol_1 O P Q R_vol_1 S".split()
    )
    out = io.StringIO()
    call_command("import_sources", *files, "--benchmark", demo.name, stdout=out)
    assert "kept the stored passage" not in out.getvalue()  # every cited quote is in the text
    counts = triage_run(benchmark=demo)
    assert counts["citation_checks"]["checked"] == 46
    found = sorted(
        Evidence.objects.filter(kind="superseded_citation").values_list(
            "item__question__question_id", "detail__problem"
        )
    )
    assert found == [
        ("Q004", "figure_not_in_passage"),
        ("Q005", "superseded"),
        ("Q009", "locator_not_found"),
        ("Q024", "figure_limit_reversed"),
    ]


def test_a_figure_missing_from_a_cut_off_excerpt_is_not_said_to_be_missing_from_the_document():
    """Demo Q028: the stored ADJ 5.8 stops after clause (b) ("...; or"), so the key's
    50 m (clause (c), not stored) is "not found in the stored excerpt, which ends at ..."."""
    from review.citation_checks import excerpt_cut_off

    passage = (
        "there is a significant risk of pollution if the oil storage installation:\n\n"
        "a.  has a total capacity of more than 2500 litres; or\n\n"
        "b.  is located within 10m of inland freshwaters or coastal waters; or"
    )
    assert (
        excerpt_cut_off(passage) == "…cated within 10m of inland freshwaters or coastal waters; or"
    )
    assert excerpt_cut_off("The width should be at least 850mm.") is None
    assert (
        excerpt_cut_off("Secure doorsets should be either:") == "Secure doorsets should be either:"
    )
    detail = {
        "doc_id": "ADJ",
        "locator": "5.8",
        "problem": "figure_not_in_passage",
        "figure": "50 m",
        "passage_figures": ["10 m"],
        "excerpt_ends": excerpt_cut_off(passage),
    }
    assert describe(detail) == (
        "Key answer's 50 m is not found in the stored excerpt of ADJ 5.8, which ends at "
        '"…cated within 10m of inland freshwaters or coastal waters; or"; it gives 10 m'
    )
