"""Hostile bundles (issue 26 part 4): each is refused as `FILE:LINE: FIELD: message`, never a
traceback, and writes nothing.

The zips are built here with zipfile and then patched byte by byte (a lying size, the
encryption flag, an unsupported compression method, a wrong CRC-32), as an attacker would
write them; the header offsets are those of the zip specification (APPNOTE.TXT 4.3.7 and
4.3.12).
"""

from __future__ import annotations

import contextlib
import io
import json
import struct
import zipfile
import zlib
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.bundle_factory import db_counts, write_bundle


def run_import(path: Path | str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("import_bundle", str(path), stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


@pytest.fixture
def good_folder(tmp_path):
    folder = tmp_path / "good"
    write_bundle(folder, n_questions=5, n_models=2, seed=3, name="good")
    return folder


def zip_of(folder: Path, path: Path, extra: list[tuple[str, bytes]] = ()) -> Path:
    """Zip every file of `folder` (deflated), then the `extra` entries, in that order."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for f in sorted(folder.iterdir()):
            archive.writestr(f.name, f.read_bytes())
        for name, data in extra:
            archive.writestr(name, data)
    return path


# Field offsets in the local file header and in the central directory record.
LOCAL = {"flags": (6, "<H"), "method": (8, "<H"), "crc": (14, "<I"), "size": (22, "<I")}
CENTRAL = {"flags": (8, "<H"), "method": (10, "<H"), "crc": (16, "<I"), "size": (24, "<I")}


def patch(path: Path, member: str, **fields: int) -> None:
    """Overwrite header fields of `member` in both its local header and the directory."""
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        local = archive.getinfo(member).header_offset
        central = archive.start_dir
    assert raw[local : local + 4] == b"PK\x03\x04"
    assert raw[central : central + 4] == b"PK\x01\x02"
    while True:
        name_length = struct.unpack_from("<H", raw, central + 28)[0]
        if raw[central + 46 : central + 46 + name_length] == member.encode():
            break
        central = raw.index(b"PK\x01\x02", central + 4)
    for name, value in fields.items():
        for base, table in ((local, LOCAL), (central, CENTRAL)):
            offset, fmt = table[name]
            struct.pack_into(fmt, raw, base + offset, value)
    path.write_bytes(bytes(raw))


def refused(path: Path) -> str:
    before = db_counts()
    code, _, err = run_import(path)
    assert code == 1, err
    assert "Traceback" not in err
    assert db_counts() == before
    return err


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_patched_zip_is_still_read_when_nothing_is_wrong(tmp_path, good_folder):
    """The patch helper itself: writing back the true values leaves a good zip."""
    path = zip_of(good_folder, tmp_path / "same.zip")
    data = (good_folder / "questions.jsonl").read_bytes()
    patch(path, "questions.jsonl", crc=zlib.crc32(data), size=len(data))
    assert run_import(path)[0] == 0


@pytest.mark.sqlite
@pytest.mark.django_db
@pytest.mark.parametrize("change", [-7, +7])
def test_a_zip_member_with_a_lying_size_is_refused_naming_it(tmp_path, good_folder, change):
    path = zip_of(good_folder, tmp_path / "lying.zip")
    size = len((good_folder / "questions.jsonl").read_bytes())
    patch(path, "questions.jsonl", size=size + change)
    err = refused(path)
    if change < 0:
        # zipfile stops at the declared size, so the data fails its CRC-32.
        assert "questions.jsonl:0: zip: damaged member: Bad CRC-32" in err
    else:
        assert f"questions.jsonl:0: zip: declares {size + 7} bytes but inflates to {size}" in err


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_zip_member_with_a_bad_crc_is_refused_naming_it(tmp_path, good_folder):
    path = zip_of(good_folder, tmp_path / "crc.zip")
    data = (good_folder / "responses.jsonl").read_bytes()
    patch(path, "responses.jsonl", crc=zlib.crc32(data) ^ 1)
    err = refused(path)
    assert "responses.jsonl:0: zip: damaged member: Bad CRC-32 for file 'responses.jsonl'" in err


@pytest.mark.sqlite
@pytest.mark.django_db
def test_an_encrypted_zip_member_is_refused_before_reading(tmp_path, good_folder):
    path = zip_of(good_folder, tmp_path / "secret.zip")
    patch(path, "models.csv", flags=0x1)
    err = refused(path)
    assert "secret.zip:0: zip: entry 'models.csv' is encrypted; refused" in err


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_zip_member_compressed_with_zstd_is_refused_before_reading(tmp_path, good_folder):
    path = zip_of(good_folder, tmp_path / "zstd.zip")
    patch(path, "grades.jsonl", method=93)
    err = refused(path)
    assert (
        "zstd.zip:0: zip: entry 'grades.jsonl' uses compression method 93, which is not "
        "supported (stored, deflate, bzip2, LZMA are); refused" in err
    )


@pytest.mark.sqlite
@pytest.mark.django_db
@pytest.mark.parametrize("twin", ["questions.jsonl", "./questions.jsonl", "Questions.JSONL"])
def test_a_zip_with_two_members_of_one_name_is_refused(tmp_path, good_folder, twin):
    """zipfile reads the last of two equal names, `unzip` lists and extracts the first."""
    other = b'{"question_id": "Q9", "text": "t", "answer": "a", "citation": null}\n'
    warns = pytest.warns(UserWarning, match="Duplicate name")
    with warns if twin == "questions.jsonl" else contextlib.nullcontext():
        path = zip_of(good_folder, tmp_path / "twins.zip", [(twin, other)])
    with zipfile.ZipFile(path) as archive:
        assert sum(i.filename == twin for i in archive.infolist()) == 1 + (
            twin == "questions.jsonl"
        )
    err = refused(path)
    assert (
        f"twins.zip:0: zip: entry {twin!r} has the same name as 'questions.jsonl'; two entries "
        "of one name are refused" in err
    )


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_zip_whose_files_sit_under_dot_slash_imports(tmp_path, good_folder):
    """`./manifest.json` is what `zip -r x.zip ./` writes on some systems: it is the file
    `unzip` extracts as manifest.json, so the import reads it as that too."""
    path = tmp_path / "dot.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for f in sorted(good_folder.iterdir()):
            archive.writestr(f"./{f.name}", f.read_bytes())
    code, out, err = run_import(path)
    assert code == 0, err
    assert db_counts()["Question"] == 5


def _rewrite_line(folder: Path, name: str, index: int, old: str, new: str) -> None:
    path = folder / name
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert old in lines[index]
    lines[index] = lines[index].replace(old, new, 1)
    path.write_text("".join(lines), encoding="utf-8")


@pytest.mark.sqlite
@pytest.mark.django_db
@pytest.mark.parametrize(
    "name, index, old, new, expected",
    [
        (
            "questions.jsonl",
            1,
            '"text": "',
            '"text": "x\\ud800',
            "questions.jsonl:2: text: contains a lone surrogate U+D800",
        ),
        (
            "responses.jsonl",
            3,
            '"text": "',
            '"text": "\\uDFFF',
            "responses.jsonl:4: text: contains a lone surrogate U+DFFF",
        ),
        (
            # The low half first: a pair only in the wrong order.
            "grades.jsonl",
            0,
            '"rationale": "',
            '"rationale": "\\udc00\\ud83d',
            "grades.jsonl:1: rationale: contains a lone surrogate U+DC00",
        ),
        (
            "manifest.json",
            0,
            "{",
            '{"extra": {"n\\ud800": 1},',
            "manifest.json:1: extra.n\\ud800: contains a lone surrogate U+D800",
        ),
    ],
)
def test_a_lone_surrogate_in_any_text_is_refused_naming_file_line_and_field(
    good_folder, name, index, old, new, expected
):
    _rewrite_line(good_folder, name, index, old, new)
    err = refused(good_folder)
    assert expected in err


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_surrogate_pair_escape_is_one_character_and_imports(good_folder):
    _rewrite_line(good_folder, "questions.jsonl", 1, '"text": "', '"text": "\\ud83d\\ude00 ')
    code, _, err = run_import(good_folder)
    assert code == 0, err
    from questions.models import Question

    assert Question.objects.filter(text__startswith="\U0001f600 ").count() == 1


def _append(folder: Path, name: str, line: str) -> int:
    """Append one line to a bundle file; return its line number."""
    path = folder / name
    text = path.read_text(encoding="utf-8")
    path.write_text(text + line + "\n", encoding="utf-8")
    return len(text.splitlines()) + 1


def _question(qid: str) -> str:
    return (
        f'{{"question_id": {json.dumps(qid)}, "category_id": "C01", "text": "Twin?", '
        '"answer": "Yes.", "citation": null}'
    )


@pytest.mark.sqlite
@pytest.mark.django_db
@pytest.mark.parametrize(
    "name, line, field, value, first",
    [
        ("questions.jsonl", None, "question_id", "q0001", "Q0001"),
        ("models.csv", "Model-01,Model 01 again,openai", "model_id", "Model-01", "model-01"),
        ("judges.csv", "J-OPENAI,Twin,openai,judge,,gpt-4o,v1", "judge_id", "J-OPENAI", "j-openai"),
        ("categories.csv", "c01,Twin", "category_id", "c01", "C01"),
    ],
)
def test_ids_equal_but_for_case_are_refused(good_folder, name, line, field, value, first):
    number = _append(good_folder, name, line or _question(value))
    err = refused(good_folder)
    at = 1 if name.endswith(".jsonl") else 2  # the first row, under a CSV's header
    assert (
        f"{name}:{number}: {field}: {value!r} differs from {first!r} (line {at}) only in case"
        in err
    )


@pytest.mark.sqlite
@pytest.mark.django_db
@pytest.mark.parametrize(
    "name, value",
    [
        ("models.csv", "model-\u0430"),  # Cyrillic а: looks like model-a
        ("models.csv", "m\u043ede\u04cf-01"),  # Cyrillic о and palochka
        ("questions.jsonl", "Q/../001?x=1#y"),
        ("questions.jsonl", "Q 1"),
        ("questions.jsonl", "-Q1"),
        ("questions.jsonl", "Q%2F1"),
        ("categories.csv", "C:01"),
        ("questions.jsonl", "Q1\n"),  # a regex's `$` matches before a final newline
    ],
)
def test_an_id_outside_the_url_safe_ascii_set_is_refused(good_folder, name, value):
    """A confusable from another script and a URL's separators are both outside the set."""
    if name == "models.csv":
        line = f"{value},Look-alike,openai"
    elif name == "categories.csv":
        line = f"{value},Odd"
    else:
        line = _question(value)
    number = _append(good_folder, name, line)
    err = refused(good_folder)
    field = {"models.csv": "model_id", "categories.csv": "category_id"}.get(name, "question_id")
    assert f"{name}:{number}: {field}: {value!r} is not a valid id: use letters A-Z" in err


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_later_bundle_with_a_model_equal_to_a_stored_one_but_for_case_is_refused(good_folder):
    """Rows of a later bundle are added to the stored ones, so the rule holds across both."""
    assert run_import(good_folder)[0] == 0
    for name in ("responses.jsonl", "grades.jsonl", "audits.jsonl"):
        (good_folder / name).unlink(missing_ok=True)
    (good_folder / "models.csv").write_text("model_id,name,vendor\nMODEL-01,Loud,openai\n")
    err = refused(good_folder)
    assert (
        "models.csv:2: model_id: 'MODEL-01' differs from the stored 'model-01' only in case" in err
    )


@pytest.mark.sqlite
@pytest.mark.django_db
def test_the_ids_of_every_shared_bundle_are_valid(tmp_path):
    """The shared bundles and development corpora (model ids such as `x@provider`) pass
    the id rule: read only (no import), as their import is tested elsewhere."""
    from interchange.bundles.reader import read_bundle
    from interchange.bundles.source import open_source
    from tests.conftest import SHARED

    folders = [*(SHARED / "data" / "bundles").iterdir()]
    folders += [p / "bundle" for p in (SHARED / "data" / "detect").iterdir() if p.name != "build"]
    folders = [f for f in folders if (f / "manifest.json").exists()]
    assert len(folders) == 4
    ids = set()
    for folder in folders:
        data = read_bundle(open_source(folder))
        ids |= set(data.models)
    assert "Llama-3.1-405B-Inst@sambanova" in ids


def _set_manifest(folder: Path, **fields) -> None:
    import json

    path = folder / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.update(fields)
    path.write_text(json.dumps(manifest), encoding="utf-8")


@pytest.mark.sqlite
@pytest.mark.django_db
def test_manifest_counts_that_disagree_with_the_files_are_refused_with_both_numbers(
    good_folder,
):
    responses = len((good_folder / "responses.jsonl").read_text().splitlines())
    assert responses == 10  # 5 questions x 2 models, by hand
    _set_manifest(
        good_folder,
        counts={"questions.jsonl": 6, "responses.jsonl": responses, "corrections.jsonl": 3},
    )
    err = refused(good_folder)
    assert (
        "manifest.json:1: counts.questions.jsonl: the manifest says 6 rows but "
        "questions.jsonl has 5; refused" in err
    )
    assert (
        "manifest.json:1: counts.corrections.jsonl: the manifest says 3 rows but there is no "
        "corrections.jsonl" in err
    )
    assert "counts.responses.jsonl" not in err


@pytest.mark.sqlite
@pytest.mark.django_db
@pytest.mark.parametrize("counts", [[5], {"questions.jsonl": "5"}, {"questions.jsonl": -1}])
def test_manifest_counts_of_the_wrong_shape_are_refused(good_folder, counts):
    _set_manifest(good_folder, counts=counts)
    assert "manifest.json:1: counts: must be an object of file name to rows" in refused(good_folder)


@pytest.mark.sqlite
@pytest.mark.django_db
def test_an_export_writes_true_counts_and_a_cut_export_is_refused(tmp_path, good_folder):
    import json

    from interchange.bundles.exporter import export_bundle
    from questions.models import Benchmark

    _set_manifest(good_folder, counts={"questions.jsonl": 5, "models.csv": 2})
    assert run_import(good_folder)[0] == 0
    out = tmp_path / "out"
    export_bundle(Benchmark.objects.get(name="good"), out)
    counts = json.loads((out / "manifest.json").read_text())["counts"]
    assert counts["questions.jsonl"] == 5 and counts["models.csv"] == 2
    assert counts["responses.jsonl"] == 10 and counts["judges.csv"] == 4
    assert run_import(out)[0] == 0  # the same data: nothing new
    grades = out / "grades.jsonl"
    lines = grades.read_text().splitlines(keepends=True)
    grades.write_text("".join(lines[:-1]))
    err = refused(out)
    assert (
        f"counts.grades.jsonl: the manifest says {len(lines)} rows but grades.jsonl has "
        f"{len(lines) - 1}" in err
    )
