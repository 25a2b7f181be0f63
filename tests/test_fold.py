"""`questions.sources.fold`'s fast path (text that is ASCII once the single-character
folds are applied) gives exactly what the character-by-character fold gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from questions.sources import _fold_with_map, fold

DOCUMENTS = Path(__file__).resolve().parents[2] / "shared" / "data" / "approved-documents"

EDGES = [
    "",
    "   ",
    "  Table 3.2  ",
    "a\t\n\r\x0b\x0cb",
    "file\x1cseparators\x1fare whitespace to str.split",
    "soft\u00adhyphen and zero\u200bwidth",
    "a \u00ad b",
    "\ufb01re and \ufb02oor, \ufb00ect",
    "\u2018quoted\u2019 \u201cdouble\u201d \u2032prime\u2033",
    "dash\u2013en \u2014em \u2212minus",
    "no\u00a0break\u202fnarrow\u2007figure",
    "CAPITALS and MiXeD",
    "m\u00b2 and 90\u00b0, \u00a3100",  # not ASCII after the folds: the slow path
    "Cafe\u0301 with a combining accent",
    "STRASSE and Stra\u00dfe",
]


@pytest.mark.parametrize("text", EDGES)
@pytest.mark.parametrize("drop_spaces", [False, True])
def test_the_fast_path_folds_as_the_slow_one(text, drop_spaces):
    assert fold(text, drop_spaces=drop_spaces) == _fold_with_map(text, drop_spaces)[0]


def test_the_approved_documents_paragraphs_fold_as_before():
    """Every fifth paragraph of the real text (the slow fold of all 26,000 costs 7 s)."""
    paragraphs = [
        p
        for f in sorted(DOCUMENTS.glob("*.txt"))
        for p in f.read_text(encoding="utf-8").split("\n\n")
    ][::5]
    assert len(paragraphs) > 5_000
    assert sum(not p.isascii() for p in paragraphs) > 500  # the folds are exercised
    for drop in (False, True):
        differ = [p for p in paragraphs if fold(p, drop_spaces=drop) != _fold_with_map(p, drop)[0]]
        assert not differ, differ[:3]
