"""Text is stored exactly as given: BOM, CRLF/CR endings, quoted CSV, symbols, NBSP."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from interchange.bundles import BundleError, import_bundle
from questions.models import Category, KeyEntry, ModelUnderTest, Response
from scoring.models import Judge
from scoring.spreadsheet import neutralise, unneutralise
from tests.bundle_factory import db_counts, write_bundle

SYMBOLS = "≤ 0.18 W/(m²·K), ≥ 45°, 2 × 3 m², ½ storey,\u00a0NBSP, “quotes” — dash  two  spaces "


@pytest.fixture
def folder(tmp_path):
    path = tmp_path / "enc"
    write_bundle(path, n_questions=3, n_models=2, seed=5, name="enc")
    return path


def _rewrite(path, *, bom=False, newline="\n"):
    text = path.read_bytes().decode("utf-8").replace("\r\n", "\n")
    data = text.replace("\n", newline).encode("utf-8")
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)


@pytest.mark.sqlite
@pytest.mark.django_db
@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("bom", [False, True])
def test_bom_and_every_line_ending_import_the_same(folder, newline, bom):
    for f in folder.iterdir():
        _rewrite(f, bom=bom, newline=newline)
    result = import_bundle(folder)
    assert result.created["questions"] == 3 and result.created["grades"] == 12
    assert Category.objects.get(category_id="C01").name == "Building Regulations"
    assert not Judge.objects.filter(judge_id__startswith="\ufeff").exists()


@pytest.mark.sqlite
@pytest.mark.django_db
def test_quoted_csv_cells_with_line_breaks_and_commas_and_symbols_round_trip(folder):
    name = 'Model "X", with\r\ncommas,\nline breaks and ' + SYMBOLS
    (folder / "models.csv").write_bytes(
        (
            'model_id,name,vendor\r\nmodel-01,"' + name.replace('"', '""') + '",openai\r\n'
            "model-02,Plain,google\r\n"
        ).encode("utf-8")
    )
    rows = [json.loads(x) for x in (folder / "responses.jsonl").read_text().splitlines()]
    rows[0]["text"] = SYMBOLS
    rows[1]["text"] = ""
    (folder / "responses.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    import_bundle(folder)
    assert ModelUnderTest.objects.get(model_id="model-01").name.encode() == name.encode()
    stored = Response.objects.get(
        question__question_id=rows[0]["question_id"], model__model_id=rows[0]["model_id"]
    )
    assert stored.text.encode("utf-8") == SYMBOLS.encode("utf-8")
    assert Response.objects.filter(text="").count() >= 1


@pytest.mark.sqlite
@pytest.mark.django_db
def test_an_undecodable_file_is_refused_naming_line_and_byte_offset(folder):
    p = folder / "questions.jsonl"
    lines = p.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"text": "', b'"text": "caf\xe9 ', 1)
    p.write_bytes(b"".join(lines))
    offset = len(lines[0]) + lines[1].index(b"\xe9")
    err = io.StringIO()
    with pytest.raises(CommandError) as info:
        call_command("import_bundle", str(folder), stderr=err, stdout=io.StringIO())
    assert info.value.returncode == 1
    assert "questions.jsonl:2: encoding: not valid UTF-8: byte 0xe9" in err.getvalue()
    assert f"(byte offset {offset} in the file)" in err.getvalue()
    assert db_counts()["Benchmark"] == 0


@pytest.mark.parametrize(
    "value",
    [
        '=HYPERLINK("http://x","y")',
        "+1",
        "-2",
        "@SUM(A1)",
        "\tx",
        "\rx",
        "'=x",
        "''+y",
        "'plain",
        "plain",
        "",
        "=",
    ],
)
def test_formula_neutralising_is_exactly_undone(value):
    written = neutralise(value)
    assert written[:1] not in ("=", "+", "-", "@", "\t", "\r")
    assert unneutralise(written) == value


@pytest.mark.sqlite
@pytest.mark.django_db
def test_formula_text_round_trips_through_export_and_import(folder, tmp_path):
    formula = '=HYPERLINK("http://evil.example","click")'
    p = folder / "models.csv"
    p.write_text(
        p.read_text().replace("Model 01", formula.replace('"', '""').join('""')), encoding="utf-8"
    )
    import_bundle(folder)
    assert ModelUnderTest.objects.get(model_id="model-01").name == formula
    out = tmp_path / "out"
    call_command("export_bundle", str(out), stdout=io.StringIO())
    exported = (out / "models.csv").read_text(encoding="utf-8")
    assert "'=HYPERLINK" in exported and ",=HYPERLINK" not in exported
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["name"] = "enc-copy"
    (out / "manifest.json").write_text(json.dumps(manifest))
    import_bundle(out)
    assert (
        ModelUnderTest.objects.get(benchmark__name="enc-copy", model_id="model-01").name == formula
    )


@pytest.mark.sqlite
@pytest.mark.django_db
def test_key_text_with_symbols_is_stored_byte_for_byte(folder):
    p = folder / "questions.jsonl"
    rows = [json.loads(x) for x in p.read_text().splitlines()]
    rows[0]["answer"] = "  " + SYMBOLS + "\n  indented second line\t"
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    import_bundle(folder)
    entry = KeyEntry.objects.get(question__question_id=rows[0]["question_id"])
    assert entry.answer.encode() == rows[0]["answer"].encode()
    with pytest.raises(BundleError):
        (folder / "questions.jsonl").write_bytes(b"\xff\xfe" + p.read_bytes())
        import_bundle(folder)
