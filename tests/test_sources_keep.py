"""import_sources (issue 17 item 8): paragraphs opening lower-case or with a figure, and
a stored passage that holds a cited quote is never replaced by a worse one."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from questions.models import Section
from questions.passages import keep_quoted_passages
from questions.sources import ParsedSection, parse_sections
from tests.factories import (
    BenchmarkFactory,
    KeyEditionFactory,
    KeyEntryFactory,
    SectionFactory,
    SourceDocumentFactory,
)

DOCS = Path(__file__).resolve().parents[2] / "shared" / "data" / "approved-documents"


def sections_of(name: str) -> dict[str, ParsedSection]:
    return {s.locator: s for s in parse_sections((DOCS / name).read_text(encoding="utf-8"))}


def test_real_paragraphs_opening_lower_case_or_with_a_figure_are_found():
    c = sections_of("Text-Approved_Document_C-Content.txt")
    assert c["5.5"].text.startswith("requirement if it is built as follows")
    # The paragraph before it no longer swallows 5.5's text.
    assert "requirement if it is built as follows" not in c["5.3"].text
    h = sections_of("Text-Approved_Document_H-Content.txt")
    assert h["3.15"].text.startswith("75mm and 100mm rainwater drains should be laid")
    assert "75mm and 100mm rainwater drains" not in h["3.14"].text
    assert h["3.16"].text.startswith("See paragraph 2.40")


def test_table_cells_that_open_with_a_number_are_not_paragraphs():
    # "1.25 l/place setting" and "8.17 l/kilogram" (AD G) and "12.00  9.60 25.40 12.00"
    # (AD E) are lines of tables, not paragraphs 1.25, 8.17, 12.00.
    g = sections_of("Text-Approved_Document_G-Content.txt")
    assert "1.25" not in g and "8.17" not in g
    e = sections_of("Text-Approved_Document_E-Content.txt")
    assert "12.00" not in e and "0.72" not in e


def p(locator: str, text: str) -> ParsedSection:
    return ParsedSection(locator, "", text, 0)


def test_keep_quoted_passages_keeps_the_stored_passage_holding_the_quote():
    parsed = [p("2.1", "Stairs should be lit."), p("2.2", "garbled"), p("2.4", "Other.")]
    stored = [
        ("2.1", "", "Stairs should be lit."),
        ("2.2", "h", "The rise should be not more than 220mm."),
        ("2.3", "", "Handrails should be 900mm to 1000mm high."),
        ("2.4", "", "Other."),
    ]
    quotes = [
        ("2.1", "stairs should be lit", "Q1 in original"),  # both hold it: new kept
        ("para 2.2", "rise should be not more than 220mm", "Q2 in original"),
        ("2.3", "900mm to 1000mm", "Q3 in original"),
        ("2.3", "Handrails should be", "Q4 in corrected-1"),
        ("2.4", "not in either", "Q5 in original"),  # neither holds it: new kept
    ]
    merged, kept = keep_quoted_passages(parsed, stored, quotes)
    assert [(s.locator, s.text, s.position) for s in merged] == [
        ("2.1", "Stairs should be lit.", 0),
        ("2.2", "The rise should be not more than 220mm.", 1),
        ("2.3", "Handrails should be 900mm to 1000mm high.", 2),
        ("2.4", "Other.", 3),
    ]
    assert merged[1].heading == "h"
    assert kept == [
        {
            "locator": "2.2",
            "cited_by": ["Q2 in original"],
            "why": "the new text's passage does not hold the cited quote",
        },
        {
            "locator": "2.3",
            "cited_by": ["Q3 in original", "Q4 in corrected-1"],
            "why": "the new text has no passage at this locator",
        },
    ]


def test_keep_quoted_passages_without_stored_passages_changes_nothing():
    parsed = [p("1.1", "a"), p("1.2", "b")]
    merged, kept = keep_quoted_passages(parsed, [], [("1.1", "zzz", "Q1 in original")])
    assert [(s.locator, s.position) for s in merged] == [("1.1", 0), ("1.2", 1)] and kept == []


@pytest.mark.django_db
def test_import_sources_keeps_a_bundle_passage_that_holds_the_cited_quote(tmp_path):
    bench = BenchmarkFactory(name="keep")
    doc = SourceDocumentFactory(benchmark=bench, doc_id="ADK", title="Approved Document K")
    for i, (loc, text) in enumerate(
        [
            ("1.1", "Steps should be level."),
            ("1.2", "The rise of a step should be not more than 220mm for a private stair."),
            ("1.3", "Headroom should be at least 2.0m."),
        ]
    ):
        SectionFactory(document=doc, locator=loc, text=text, position=i)
    edition = KeyEditionFactory(benchmark=bench)
    entry = KeyEntryFactory(
        edition=edition,
        citation_document=doc,
        citation_locator="1.2",
        citation_quote="not more than 220mm for a private stair",
    )
    KeyEntryFactory(
        edition=edition,
        citation_document=doc,
        citation_locator="1.3",
        citation_quote="Headroom should be at least 2.0m",
    )
    # The new text has 1.2 with other words, and a 1.3 that holds its quote.
    text = (
        "Approved Document K\n\n1.1  Steps should be level and even.\n\n"
        "1.2  The rise of a step should be limited.\n\n"
        "1.3  Headroom should be at least 2.0m over the whole stair.\n"
    )
    path = tmp_path / "ADK.txt"
    path.write_text(text, encoding="utf-8")
    out = io.StringIO()
    call_command("import_sources", str(path), "--doc-id", "ADK", "--benchmark", "keep", stdout=out)
    qid = entry.question.question_id
    assert (
        f"  kept the stored passage 1.2: it holds the quote cited by {qid} in original; "
        "the new text's passage does not hold the cited quote"
    ) in out.getvalue()
    stored = dict(Section.objects.filter(document=doc).values_list("locator", "text"))
    assert stored == {
        "1.1": "Steps should be level and even.",
        "1.2": "The rise of a step should be not more than 220mm for a private stair.",
        "1.3": "Headroom should be at least 2.0m over the whole stair.",
    }
    out = io.StringIO()
    call_command(
        "import_sources",
        str(path),
        "--doc-id",
        "ADK",
        "--benchmark",
        "keep",
        "--format",
        "json",
        stdout=out,
    )
    [row] = json.loads(out.getvalue())["documents"]
    assert row["kept"] == [
        {
            "locator": "1.2",
            "cited_by": [f"{qid} in original"],
            "why": "the new text's passage does not hold the cited quote",
        }
    ]
