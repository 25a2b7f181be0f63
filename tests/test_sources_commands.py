"""import_sources and locate on the real Approved Documents text (../shared/data)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from questions.models import Benchmark, Section, SourceDocument

DOCS = Path(__file__).resolve().parents[2] / "shared" / "data" / "approved-documents"
AD_B1 = DOCS / "Text-Approved_Document_B_vol_1-Content.txt"
AD_K = DOCS / "Text-Approved_Document_K-Content.txt"


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, out.getvalue(), err.getvalue() + str(exc)
    return 0, out.getvalue(), err.getvalue()


@pytest.fixture
def bench(db):
    return Benchmark.objects.create(name="docs", grade_scale=[0, 1, 2])


def test_import_sources_indexes_real_documents_and_locate_prints_a_passage(bench):
    code, out, err = run("import_sources", str(AD_B1), str(AD_K))
    assert code == 0, err
    b1 = SourceDocument.objects.get(benchmark=bench, doc_id="ADB-V1")
    assert b1.edition == "2019" and b1.title == "Approved Document B Volume 1"
    assert Section.objects.filter(document=b1).count() > 100
    assert SourceDocument.objects.filter(benchmark=bench, doc_id="ADK").exists()
    code, out, _ = run("locate", "ADB-V1", "3.99", "--format", "json")
    assert code == 0
    passage = json.loads(out)
    assert passage["found"] is True and passage["locator"] == "3.99"
    assert "Lift wells" in passage["text"]
    code, out, _ = run("locate", "ADB-V1", "table 3.1")  # normalised locator
    assert code == 0 and "Table 3.1" in out


def test_locate_reports_not_found_with_the_nearest_locators(bench):
    run("import_sources", str(AD_B1))
    code, out, err = run("locate", "ADB-V1", "3.999")
    assert code == 1
    assert "not found" in err and "nearest locators:" in err
    code, out, err = run("locate", "ADB-V1", "3.999", "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert doc["found"] is False and len(doc["nearest"]) == 5
    assert (doc["ok"], doc["error"], doc["exit_code"]) == (False, "not found", 1)
    code, _, err = run("locate", "ADZ", "1.1")
    assert code == 1 and "not found: no document 'ADZ'" in err


def test_import_sources_replaces_the_passages_and_keeps_bundle_metadata(bench):
    SourceDocument.objects.create(
        benchmark=bench,
        doc_id="ADK",
        title="AD K: stairs",
        short_title="AD K",
        edition="2013 edition",
    )
    run("import_sources", str(AD_K))
    first = Section.objects.filter(document__doc_id="ADK").count()
    code, out, _ = run("import_sources", str(AD_K), "--format", "json")
    assert code == 0
    doc = json.loads(out)["documents"][0]
    assert doc["created"] is False and doc["replaced"] == first
    assert Section.objects.filter(document__doc_id="ADK").count() == first
    assert SourceDocument.objects.get(doc_id="ADK").title == "AD K: stairs"


def test_doc_id_names_one_file_and_is_used_for_an_unrecognised_name(bench, tmp_path):
    assert run("import_sources", str(AD_B1), str(AD_K), "--doc-id", "X")[0] == 2
    text = tmp_path / "stairs.txt"
    text.write_text(
        "1.1  Stairs should be at least 800 mm wide.\n\n1.2  Pitch should not exceed 42°.\n",
        encoding="utf-8",
    )
    code, _, err = run("import_sources", str(text))
    assert code == 1 and "--doc-id" in err
    code, _, err = run("import_sources", str(text), "--doc-id", "NOTE-1")
    assert code == 0, err
    code, out, _ = run("locate", "NOTE-1", "1.2")
    assert code == 0 and "42°" in out


def test_undecodable_source_file_is_refused_with_its_byte_offset(bench, tmp_path):
    bad = tmp_path / "Approved_Document_K.txt"
    bad.write_bytes(b"1.1  Stairs\n1.2  caf\xe9\n")
    code, _, err = run("import_sources", str(bad))
    assert code == 1 and ":2: encoding: not valid UTF-8 at byte offset 20" in err


def test_benchmark_must_be_named_when_there_are_several(bench):
    Benchmark.objects.create(name="other", grade_scale=[0, 1, 2])
    code, _, err = run("import_sources", str(AD_K))
    assert code == 2 and "docs, other" in err
    assert run("import_sources", str(AD_K), "--benchmark", "other")[0] == 0
    assert run("locate", "ADK", "1.1", "--benchmark", "nope")[0] == 1
