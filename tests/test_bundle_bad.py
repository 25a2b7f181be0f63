"""Malformed bundles are refused with every problem named by file and line; nothing is written.

The folders in tests/data/bad-bundles/ come from make_bad_bundles.py there; zips and
over-long lines are generated here so no large or hostile file is committed.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.bundle_factory import db_counts

BAD = Path(__file__).resolve().parent / "data" / "bad-bundles"
CASES = sorted(p.name for p in BAD.iterdir() if p.is_dir())


def run_import(path: Path | str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("import_bundle", str(path), stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def test_there_are_at_least_thirty_bad_bundles():
    assert len(CASES) >= 30


@pytest.mark.sqlite
@pytest.mark.django_db
@pytest.mark.parametrize("case", CASES)
def test_bad_bundle_is_refused_with_its_mistake_named_and_nothing_written(case):
    before = db_counts()
    code, out, err = run_import(BAD / case)
    expected = (BAD / case / "expected.txt").read_text(encoding="utf-8").splitlines()
    assert code == 1, err
    for substring in filter(None, expected):
        assert substring in err, f"{substring!r} not in:\n{err}"
    assert db_counts() == before


def _zip(path: Path, members: dict[str, bytes], *, base: Path | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        if base is not None:
            for f in sorted(base.iterdir()):
                if f.name != "expected.txt":
                    archive.writestr(f.name, f.read_bytes())
        for name, data in members.items():
            archive.writestr(name, data)
    return path


@pytest.fixture
def good_folder(tmp_path):
    from tests.bundle_factory import write_bundle

    folder = tmp_path / "good"
    write_bundle(folder, n_questions=5, n_models=2, seed=3, name="good")
    return folder


@pytest.mark.sqlite
@pytest.mark.django_db
def test_zip_with_path_traversal_is_refused(tmp_path, good_folder):
    path = _zip(
        tmp_path / "evil.zip", {"../../etc/evil.txt": b"x", "/abs.txt": b"y"}, base=good_folder
    )
    code, _, err = run_import(path)
    assert code == 1
    assert "'../../etc/evil.txt' has an absolute path or '..'" in err
    assert "'/abs.txt'" in err
    assert db_counts()["Benchmark"] == 0
    assert not (tmp_path.parent / "etc" / "evil.txt").exists()


@pytest.mark.sqlite
@pytest.mark.django_db
def test_zip_bomb_is_refused_before_anything_is_inflated(tmp_path, good_folder, settings):
    # 50 MB of zeros deflate to ~50 kB: a ratio of ~1000:1.
    path = _zip(
        tmp_path / "bomb.zip", {"padding.bin": b"\0" * (50 * 1024 * 1024)}, base=good_folder
    )
    assert path.stat().st_size < 1024 * 1024
    code, _, err = run_import(path)
    assert code == 1
    assert "compression ratio over 200:1" in err
    settings.SNAGLIST_IMPORT_MAX_ZIP_RATIO = 10_000
    settings.SNAGLIST_IMPORT_MAX_BUNDLE_BYTES = 10 * 1024 * 1024
    code, _, err = run_import(path)
    assert code == 1
    assert "exceeds the cap of 10485760 bytes" in err
    assert db_counts()["Benchmark"] == 0


@pytest.mark.sqlite
@pytest.mark.django_db
def test_good_zip_imports_including_one_with_a_top_level_folder(tmp_path, good_folder):
    flat = _zip(tmp_path / "flat.zip", {}, base=good_folder)
    assert run_import(flat)[0] == 0
    nested = tmp_path / "nested.zip"
    with zipfile.ZipFile(nested, "w") as archive:
        for f in good_folder.iterdir():
            archive.writestr(f"good/{f.name}", f.read_bytes())
    code, out, _ = run_import(nested)
    assert code == 0 and "already imported" in out


@pytest.mark.sqlite
@pytest.mark.django_db
def test_over_long_line_is_refused_naming_the_line(tmp_path, good_folder, settings):
    settings.SNAGLIST_IMPORT_MAX_LINE_BYTES = 10 * 1024 * 1024
    path = good_folder / "responses.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    long_text = "x" * (10 * 1024 * 1024 + 1)
    row = {"question_id": "Q0001", "model_id": "model-01", "text": long_text}
    lines.insert(2, (json.dumps(row) + "\n").encode())
    path.write_bytes(b"".join(lines))
    code, _, err = run_import(good_folder)
    assert code == 1
    assert "responses.jsonl:3: line: longer than the cap of 10485760 bytes" in err
    assert db_counts()["Benchmark"] == 0


@pytest.mark.sqlite
@pytest.mark.django_db
def test_mistakes_in_three_files_are_all_reported_and_nothing_is_written(tmp_path, good_folder):
    def edit(name, old, new, count=1):
        p = good_folder / name
        text = p.read_text(encoding="utf-8")
        assert old in text
        p.write_text(text.replace(old, new, count), encoding="utf-8")

    edit(
        "judges.csv",
        "j-anthropic,Judge (Anthropic),anthropic,judge",
        "j-anthropic,Judge (Anthropic),anthropic,umpire",
    )
    lines = (good_folder / "responses.jsonl").read_text(encoding="utf-8").splitlines(True)
    lines[3] = lines[3].replace('"model_id": "model-02"', '"model_id": "model-77"')
    (good_folder / "responses.jsonl").write_text("".join(lines), encoding="utf-8")
    glines = (good_folder / "grades.jsonl").read_text(encoding="utf-8").splitlines(True)
    glines[0] = glines[0].replace('"grade": ', '"grade": 7, "was": ', 1)
    glines[5] = glines[5][:30] + "\n"
    (good_folder / "grades.jsonl").write_text("".join(glines), encoding="utf-8")
    before = db_counts()
    code, _, err = run_import(good_folder)
    assert code == 1
    assert "judges.csv:3: role: 'umpire' is not one of judge, auditor" in err
    assert "responses.jsonl:4: model_id: unknown model 'model-77'" in err
    assert "grades.jsonl:1: grade: 7 is not on the grade scale [0, 1, 2]" in err
    assert "grades.jsonl:6: json: broken JSON" in err
    assert db_counts() == before


@pytest.mark.django_db
def test_error_output_is_capped(tmp_path, good_folder, settings):
    settings.SNAGLIST_IMPORT_ERROR_CAP = 5
    p = good_folder / "grades.jsonl"
    p.write_text(p.read_text().replace('"grade": 2', '"grade": 9'), encoding="utf-8")
    code, _, err = run_import(good_folder)
    assert code == 1
    problem_lines = [line for line in err.splitlines() if line.startswith("grades.jsonl:")]
    assert len(problem_lines) == 5
    assert "more problems not shown (cap 5)" in err


def _rewrite_line(folder: Path, name: str, index: int, change) -> None:
    path = folder / name
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[index] = change(lines[index])
    path.write_text("".join(lines), encoding="utf-8")


@pytest.mark.sqlite
@pytest.mark.django_db
def test_one_undecodable_response_line_is_reported_without_a_flood_of_false_errors(good_folder):
    """A bad line is reported once; the file's other records still back the grades that
    refer to them, so only that response's own grades (one per judge) are reported too."""
    path = good_folder / "responses.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    response = json.loads(lines[4])
    lines[4] = lines[4].replace(b'"text": "', b'"text": "caf\xe9 ', 1)
    path.write_bytes(b"".join(lines))
    code, _, err = run_import(good_folder)
    assert code == 1
    assert "responses.jsonl:5: encoding: not valid UTF-8: byte 0xe9" in err
    problem_lines = [line for line in err.splitlines() if ".jsonl:" in line or ".csv:" in line]
    grades = [
        g
        for g in map(json.loads, (good_folder / "grades.jsonl").read_text().splitlines())
        if (g["question_id"], g["model_id"]) == (response["question_id"], response["model_id"])
    ]
    assert len(grades) == 2  # one per judge
    assert len(problem_lines) == 1 + len(grades), err
    assert db_counts()["Benchmark"] == 0


@pytest.mark.sqlite
@pytest.mark.django_db
def test_nul_character_in_text_is_refused_naming_file_line_and_field(good_folder):
    _rewrite_line(
        good_folder, "questions.jsonl", 1, lambda s: s.replace('"text": "', '"text": "a\\u0000b', 1)
    )
    code, _, err = run_import(good_folder)
    assert code == 1
    assert "questions.jsonl:2: text: contains a NUL character (U+0000) at character 2" in err
    assert db_counts()["Benchmark"] == 0


@pytest.mark.sqlite
@pytest.mark.django_db
def test_deeply_nested_json_line_is_reported_not_raised(good_folder):
    path = good_folder / "questions.jsonl"
    path.write_text(path.read_text() + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    n = len(path.read_text().splitlines())
    code, _, err = run_import(good_folder)
    assert code == 1
    assert f"questions.jsonl:{n}: json: broken JSON: nested too deeply" in err
    assert db_counts()["Benchmark"] == 0


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_key_given_twice_in_one_object_is_refused(good_folder):
    _rewrite_line(
        good_folder,
        "responses.jsonl",
        0,
        lambda s: s.replace('"model_id": ', '"model_id": "model-zz", "model_id": ', 1),
    )
    code, _, err = run_import(good_folder)
    assert code == 1
    assert "responses.jsonl:1: json: broken JSON: key 'model_id' appears twice" in err
    assert db_counts()["Benchmark"] == 0


@pytest.mark.sqlite
@pytest.mark.django_db
@pytest.mark.parametrize("scale", [[1], []])
def test_a_grade_scale_of_fewer_than_two_grades_is_refused(good_folder, scale):
    manifest = json.loads((good_folder / "manifest.json").read_text())
    manifest["grade_scale"] = scale
    (good_folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    code, _, err = run_import(good_folder)
    assert code == 1
    assert "manifest.json:1: grade_scale: must be a list of at least two distinct integers" in err
    assert db_counts()["Benchmark"] == 0


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_key_edition_without_any_correction_is_refused(good_folder):
    """Review never publishes an empty edition; an import must not make one either."""
    assert not (good_folder / "corrections.jsonl").exists()
    manifest = json.loads((good_folder / "manifest.json").read_text())
    manifest["editions"] = [{"name": "corrected-1"}, {"name": "corrected-2"}]
    (good_folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    code, _, err = run_import(good_folder)
    assert code == 1
    for name in ("corrected-1", "corrected-2"):
        assert (
            f"manifest.json:1: editions: key edition '{name}' has no correction or removal "
            "in corrections.jsonl" in err
        )
    assert db_counts()["Benchmark"] == 0


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_nul_character_anywhere_in_the_manifest_is_refused(good_folder):
    manifest = json.loads((good_folder / "manifest.json").read_text())
    manifest["editions"] = [{"name": "corrected-1", "note": "x\u0000y"}]
    (good_folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    code, _, err = run_import(good_folder)
    assert code == 1
    assert "manifest.json:1: editions[0].note: contains a NUL character (U+0000)" in err
    assert db_counts()["Benchmark"] == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    "case, message",
    [
        (
            "manifest-grade-scale-out-of-range",
            "manifest.json:1: grade_scale: 99999999999999999999 is outside the range a grade"
            " can hold (-32768 to 32767)",
        ),
        ("questions-answer-blank", "questions.jsonl:3: answer: must not be empty"),
        (
            "questions-id-nfd-twin",
            "questions.jsonl:2: question_id: 'Qe\u030101' is not in Unicode NFC form",
        ),
    ],
)
def test_issue_19_bad_input_is_one_json_document_under_format_json(case, message):
    """The grade-scale overflow used to print a DataError traceback and no JSON at all."""
    before = db_counts()
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as excinfo:
        call_command("import_bundle", str(BAD / case), "--format", "json", stdout=out, stderr=err)
    assert excinfo.value.returncode == 1
    document = json.loads(out.getvalue())
    assert document["ok"] is False and document["exit_code"] == 1
    assert any(line.startswith(message) for line in document["errors"]), document["errors"]
    assert db_counts() == before
