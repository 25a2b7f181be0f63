"""Tests for questions.sources: the pure-Python Approved Document indexer (no DB)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from questions.sources import (
    ParsedSection,
    clean_text,
    fold,
    guess_document_meta,
    index_files,
    nearest_locators,
    normalise_locator,
    parse_sections,
    quote_span,
)

DOCS_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "approved-documents"


def by_locator(sections: list[ParsedSection]) -> dict[str, ParsedSection]:
    return {s.locator: s for s in sections}


# --------------------------------------------------------------------------- hand-written texts

SAMPLE = """Section 4: Wall and ceiling linings

Contents
4.1 Classification ........ 43
Table 4.1 Classification of linings ........ 44

General provisions

4.1  The surface linings of walls and ceilings should meet the classifications in Table 4.1.

4.2  Rooflights should meet the relevant classification in Table 4.1.
Building Regulations 2010  Approved Document B Volume 1, 2019 edition 43

B2ONLINE VERSIONONLINE VERSIONONLINE VERSIONONLINE VERSIONVariations and special provisions
4.3  Parts of walls in rooms may be of lower performance than stated in Table 4.1.
44  Approved Document B Volume 1, 2019 edition Building Regulations 2010
O N L I N E   V E R S I O N
44
B2Table 4.1 Classification of liningsONLINE VERSIONONLINE VERSION4.6  For the purposes of this requirement, a ceiling does not include a ﬁre door.
Location
1.5 m
2.0  Minimum
1.2  Metres above floor
Small rooms of maximum internal floor area of 4m2
Table 4.1 (continued)
4.7  A wall includes the surface of glazing, see paragraphs 4.1 to 4.3. Further notes apply.
Extensions and alterations 4.8  Any new room should be provided with alarms. 4.9  Smoke alarms should be provided in the circulation spaces.
Diagram 4.2  Layout restrictions on small plastic rooflights
"""


@pytest.fixture
def sample() -> dict[str, ParsedSection]:
    return by_locator(parse_sections(SAMPLE))


def test_sample_locators_in_order_and_unique(sample):
    sections = parse_sections(SAMPLE)
    locators = [s.locator for s in sections]
    assert locators == ["4.1", "4.2", "4.3", "Table 4.1", "4.6", "4.7", "4.8", "4.9", "Diagram 4.2"]
    assert [s.position for s in sections] == list(range(len(sections)))


def test_contents_list_is_ignored(sample):
    assert sample["4.1"].text.startswith("The surface linings of walls")
    assert "........" not in "".join(s.text for s in sample.values())


def test_running_headers_and_online_version_are_stripped(sample):
    text = sample["4.2"].text
    # the header lines vanish; the sub-heading that follows stays with the paragraph
    assert text == "Rooflights should meet the relevant classification in Table 4.1.\n\n" + (
        "Variations and special provisions"
    )
    everything = "\n".join(s.text for s in sample.values())
    assert "ONLINE VERSION" not in everything
    assert "O N L I N E" not in everything
    assert "2019 edition" not in everything
    assert not re.search(r"(?m)^44$", everything)
    assert "B2" not in sample["4.3"].text


def test_caption_glued_to_header_and_followed_by_paragraph(sample):
    table = sample["Table 4.1"]
    assert table.heading == "Classification of linings"
    assert table.text == "Classification of linings"
    assert sample["4.6"].text.startswith("For the purposes of this requirement")


def test_ligatures_kept_in_stored_text(sample):
    assert "ﬁre door" in sample["4.6"].text


def test_measurements_are_not_paragraphs(sample):
    assert "1.5" not in sample and "2.0" not in sample and "1.2" not in sample
    assert "1.5 m" in sample["4.6"].text
    assert "1.2  Metres above floor" in sample["4.6"].text


def test_continued_caption_is_not_a_new_section(sample):
    assert "Table 4.1 (continued)" in sample["4.6"].text


def test_references_are_not_paragraph_starts(sample):
    assert sample["4.7"].text.endswith(
        "see paragraphs 4.1 to 4.3. Further notes apply.\nExtensions and alterations"
    )


def test_mid_line_paragraph_starts(sample):
    assert sample["4.8"].text == "Any new room should be provided with alarms."
    assert sample["4.9"].text.startswith("Smoke alarms should")
    assert sample["4.8"].heading == "Any new room should be provided with alarms."


def test_diagram_caption(sample):
    assert sample["Diagram 4.2"].heading == "Layout restrictions on small plastic rooflights"


def test_duplicate_numbers_keep_fullest_occurrence():
    text = (
        "H1 Sanitary pipework\n\n1.1  Short first part.\n\n1.2  Pipework should be sized.\n\n"
        "H2 Wastewater treatment\n\n1.1  The use of non-mains foul drainage, such as septic "
        "tanks, should be considered only when connection to mains drainage is not practicable.\n\n"
        "1.2  Second.\n\n1.3  A third paragraph follows.\n"
    )
    sections = parse_sections(text)
    locators = [s.locator for s in sections]
    assert len(locators) == len(set(locators))
    secs = by_locator(sections)
    assert secs["1.1"].text.startswith("The use of non-mains foul drainage")
    assert secs["1.2"].text.startswith("Pipework should be sized")  # longer one wins
    assert secs["1.3"].text == "A third paragraph follows."


def test_parsing_is_deterministic():
    assert parse_sections(SAMPLE) == parse_sections(SAMPLE)


def test_appendix_and_structure_forms():
    text = (
        "1.1  Main body paragraph with text.\n\n1.2  Another main paragraph here.\n\n"
        "Appendix A\n\nA1 Wall mass\nA1.1  Where a mass is specified it is expressed per unit area.\n"
        "A1.2  The mass may be obtained from the manufacturer.\n\n"
        "Appendix B\n\nB.1  A timber doorset constructed in accordance with this appendix.\n"
        "B.2  The doorset should be manufactured from solid timber.\n"
        "Table B1  Performance of doorsets\n"
    )
    secs = by_locator(parse_sections(text))
    for loc in ["1.1", "1.2", "A1.1", "A1.2", "B.1", "B.2", "Table B1"]:
        assert loc in secs, loc
    assert secs["A1.2"].text == "The mass may be obtained from the manufacturer.\n\nAppendix B"
    text_a = "2C1  This section applies to the following building types.\n2C2  Only the types of wall given.\n"
    assert [s.locator for s in parse_sections(text_a)] == ["2C1", "2C2"]


def test_isolated_out_of_sequence_number_is_rejected():
    body = "".join(
        f"5.{i}  Paragraph number {i} of chapter five says something.\n" for i in range(1, 8)
    )
    text = (
        body
        + "1.8  Metres is a cell value that looks like a paragraph start.\n"
        + ("5.8  The last real paragraph.\n")
    )
    locs = [s.locator for s in parse_sections(text)]
    assert "1.8" not in locs
    assert locs[-1] == "5.8"


def test_empty_and_unlocated_text():
    assert parse_sections("") == []
    assert parse_sections("Just prose without any numbers.\nAnother line.") == []


def test_clean_text_keeps_ordinary_text():
    raw = "1.1  All dwellings should have a ﬁre alarm.\n\n\n\nNext  line"
    assert clean_text(raw) == "1.1  All dwellings should have a ﬁre alarm.\n\nNext  line"


# --------------------------------------------------------------------------- fold / quotes


def test_fold():
    assert fold("The  ﬁre\u00a0resisting\n\tﬂoor ") == "the fire resisting floor"
    assert fold("ﬀ ﬃ ﬄ") == "ff ffi ffl"
    assert fold("‘Fire’ – “door”") == "'fire' - \"door\""
    assert fold("STRASSE") == fold("straße")
    assert fold("") == ""


def test_quote_span_maps_to_original_offsets():
    text = "Doors should be\n  ﬁre resisting (minimum E 20) and self-closing."
    span = quote_span(text, "fire resisting (minimum e 20)")
    assert span is not None
    start, end = span
    assert text[start:end] == "ﬁre resisting (minimum E 20)"
    start, end = quote_span(text, "be fire")
    assert text[start:end] == "be\n  ﬁre"
    assert quote_span(text, "'fire resisting'") is None
    assert quote_span(text, "   ") is None


def test_quote_span_tolerates_glued_words():
    text = "The firefighting shaft shouldbe protected."
    start, end = quote_span(text, "should be protected")
    assert text[start:end] == "shouldbe protected"


# --------------------------------------------------------------------------- locators


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("table 4.1", "Table 4.1"),
        ("Table 4.1.", "Table 4.1"),
        ("  TABLE  4.1 ", "Table 4.1"),
        ("tbl. 4.1", "Table 4.1"),
        ("diagram 2.3", "Diagram 2.3"),
        ("Diagram 2.1a", "Diagram 2.1a"),
        ("para 2.1", "2.1"),
        ("paragraph 2.1", "2.1"),
        ("Paragraphs 10.14,", "10.14"),
        ("§2.1", "2.1"),
        ("2.1", "2.1"),
        ("a1.1", "A1.1"),
        ("b.2", "B.2"),
        ("2c12", "2C12"),
        ("table d1", "Table D1"),
    ],
)
def test_normalise_locator(raw, expected):
    assert normalise_locator(raw) == expected


def test_normalise_locator_rejects_blank():
    with pytest.raises(ValueError):
        normalise_locator("  para. ")


def test_nearest_locators_paragraph_typo():
    available = [f"4.{i}" for i in range(1, 18)] + [f"5.{i}" for i in range(1, 10)] + ["Table 4.1"]
    got = nearest_locators("4.99", available)
    assert got[0] == "4.9"
    assert len(got) == 5
    assert all(loc.startswith("4.") for loc in got)


def test_nearest_locators_tables_of_same_chapter():
    available = ["4.9", "Table 3.1", "Table 4.1", "Table 4.2", "Table 5.9", "Diagram 4.9"]
    got = nearest_locators("table 4.9", available, n=3)
    assert got == ["Table 4.2", "Table 4.1", "Table 5.9"]
    assert "Table 4.1" not in nearest_locators("Table 4.1", available)


def test_nearest_locators_degenerate():
    assert nearest_locators("4.1", []) == []
    assert nearest_locators("whatever", ["4.1", "Table 2"], n=1) in (["4.1"], ["Table 2"])


# --------------------------------------------------------------------------- metadata


def test_guess_document_meta():
    text = "Building Regulations 2010  Approved Document B Volume 1, 2019 edition 9"
    meta = guess_document_meta("Text-Approved_Document_B_vol_1-Content.txt", text)
    assert meta == {
        "doc_id": "ADB-V1",
        "title": "Approved Document B Volume 1",
        "part": "B",
        "volume": 1,
        "edition": 2019,
        "kind": "approved_document",
        "filename": "Text-Approved_Document_B_vol_1-Content.txt",
    }
    assert guess_document_meta("Text-Approved_Document_F_V2-Content.txt", "")["doc_id"] == "ADF-V2"
    seven = guess_document_meta(
        "Text-Approved_Document_7-Content.txt", "Approved Document 7, 2013 edition"
    )
    assert (seven["doc_id"], seven["title"], seven["edition"]) == (
        "AD7",
        "Approved Document 7",
        2013,
    )
    assert guess_document_meta("ADK.txt", "no edition here")["edition"] is None
    assert (
        guess_document_meta("notes.txt", "This is Approved Document M Volume 2 text.")["doc_id"]
        == "ADM-V2"
    )
    with pytest.raises(ValueError):
        guess_document_meta("notes.txt", "nothing")


def test_index_files(tmp_path):
    a = tmp_path / "Text-Approved_Document_Q-Content.txt"
    a.write_text("1.1  All easily accessible doorsets should be secure.\n", encoding="utf-8")
    result = index_files([a])
    meta, sections = result["ADQ"]
    assert meta["title"] == "Approved Document Q"
    assert [s.locator for s in sections] == ["1.1"]
    b = tmp_path / "ADQ.txt"
    b.write_text("1.1  Again.\n", encoding="utf-8")
    with pytest.raises(ValueError, match="ADQ"):
        index_files([a, b])


# --------------------------------------------------------------------------- the real corpus


@pytest.fixture(autouse=False)
def _corpus():
    """The real Approved Documents: ../shared sits beside the checkout (CI has it)."""
    if not DOCS_DIR.is_dir():
        pytest.fail(f"corpus not found at {DOCS_DIR}: ../shared must sit beside the checkout")


needs_corpus = pytest.mark.usefixtures("_corpus")

# Independent of the parser: a line that starts with "N.N", two spaces, then a capital.
EXPECTED_PARA = re.compile(r"(?m)^(\d{1,2}\.\d{1,3})  [A-Z]")


@pytest.fixture(scope="module")
def corpus():
    return index_files(sorted(DOCS_DIR.glob("*.txt")))


@needs_corpus
def test_corpus_has_21_documents_with_unique_locators(corpus):
    assert len(corpus) == 21
    for doc_id, (meta, sections) in corpus.items():
        locators = [s.locator for s in sections]
        assert len(locators) == len(set(locators)), doc_id
        assert [s.position for s in sections] == list(range(len(sections)))
        assert all(s.text for s in sections), doc_id
        assert meta["kind"] == "approved_document"


@needs_corpus
def test_corpus_paragraph_recall(corpus, capsys):
    total_expected = total_found = 0
    lines = []
    for doc_id, (meta, sections) in sorted(corpus.items()):
        raw = (DOCS_DIR / meta["filename"]).read_text(encoding="utf-8")
        expected = set(EXPECTED_PARA.findall(raw))
        found = expected & {s.locator for s in sections}
        total_expected += len(expected)
        total_found += len(found)
        recall = len(found) / len(expected) if expected else 1.0
        lines.append(
            f"{doc_id:7} sections={len(sections):4} recall={len(found)}/{len(expected)} ({recall:.1%})"
        )
        assert recall >= 0.90, (doc_id, sorted(expected - found))
    overall = total_found / total_expected
    report = "\n".join(lines) + f"\noverall recall {total_found}/{total_expected} ({overall:.1%})"
    with capsys.disabled():
        print("\n" + report)
    assert total_expected > 1500
    assert overall >= 0.95, report


@needs_corpus
def test_corpus_text_has_no_running_noise(corpus):
    noise = re.compile(
        r"ONLINE VERSION|O N L I N E|Approved Document [A-Z0-9](?: Volume \d)?, \d{4} edition"
    )
    for doc_id, (_meta, sections) in corpus.items():
        for s in sections:
            assert not noise.search(s.text), (doc_id, s.locator)


@needs_corpus
def test_corpus_known_passages(corpus):
    b1 = by_locator(corpus["ADB-V1"][1])
    assert "Classification of linings" in b1["Table 4.1"].heading
    assert b1["1.1"].text.startswith(
        "All dwellings should have a fire detection and alarm system, minimum Grade D2 Category LD3"
    )
    assert b1["1.9"].text.startswith("Smoke alarms should be provided in the circulation spaces")
    assert b1["10.1"].text.startswith("The external wall of a building should not provide a medium")
    assert b1["Diagram 2.3"].heading == "With cavity barriers"
    assert b1["3.103"].text.startswith("If a lift delivers into a protected corridor")
    b2 = by_locator(corpus["ADB-V2"][1])
    assert b2["Table 6.1"].heading == "Classification of linings"
    assert b2["B11"].text.startswith("Thermoplastic material is any synthetic polymeric material")
    assert by_locator(corpus["ADK"][1])["Diagram 1.1"].heading == "Measuring rise and going"
    assert by_locator(corpus["ADQ"][1])["B.3"].text.startswith("Door rails, stiles and muntins")
    assert by_locator(corpus["ADA"][1])["2C9"].heading.startswith(
        "Walls providing vertical support"
    )
    assert by_locator(corpus["ADE"][1])["A1.1"].text.startswith("Where a mass is specified")
    assert by_locator(corpus["ADJ"][1])["Table G2"].heading == "Pressure classes"
    g = by_locator(corpus["ADG"][1])
    assert any("ﬁ" in s.text for s in g.values())  # ligatures kept as given
    span = quote_span(g["A4"].text, "Large water consuming installations such as swimming pools")
    assert span is not None and span[0] == 0


@needs_corpus
def test_corpus_editions(corpus):
    editions = {doc_id: meta["edition"] for doc_id, (meta, _) in corpus.items()}
    assert editions["ADB-V1"] == editions["ADB-V2"] == 2019
    assert editions["ADF-V1"] == editions["ADO"] == editions["ADS"] == 2021
    assert editions["ADR-V1"] == 2022
    assert editions["ADM-V1"] == 2015 and editions["ADQ"] == 2015
    assert editions["ADK"] == editions["ADP"] == editions["AD7"] == 2013
    assert editions["ADA"] is None and editions["ADM-V2"] is None
    assert corpus["ADB-V1"][0]["title"] == "Approved Document B Volume 1"
