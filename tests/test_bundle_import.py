"""Bundle import: real bundles, counts, idempotence, refusal of a changed key, editions."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from interchange.bundles import BundleError, import_bundle
from questions.models import Benchmark, KeyEdition, KeyEntry, Question, Response
from questions.selectors import get_benchmark, key_entries_for_edition, latest_published_edition
from scoring.models import AuditVerdict, Grade, Judge
from tests.bundle_factory import db_counts, write_bundle

PROJECT = Path(__file__).resolve().parents[1]
BUNDLES = Path(__file__).resolve().parents[2] / "shared" / "data" / "bundles"


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, out.getvalue(), err.getvalue() + str(exc)
    return 0, out.getvalue(), err.getvalue()


@pytest.fixture
def small(tmp_path):
    folder = tmp_path / "small"
    write_bundle(folder, n_questions=12, n_models=3, seed=1, name="small", corrections=4)
    return folder


@pytest.mark.sqlite
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "questions", "responses", "grades", "judges"),
    [("wildbench-2judges", 1024, 2047, 4094, 2), ("mtbench-reference", 30, 210, 210, 1)],
)
def test_real_bundles_import_with_the_right_counts(name, questions, responses, grades, judges):
    code, out, err = run("import_bundle", str(BUNDLES / name))
    assert code == 0, err
    bench = Benchmark.objects.get(name=name)
    assert Question.objects.filter(benchmark=bench).count() == questions
    assert Response.objects.filter(question__benchmark=bench).count() == responses
    assert Grade.objects.filter(judge__benchmark=bench).count() == grades
    assert Judge.objects.filter(benchmark=bench).count() == judges
    original = KeyEdition.objects.get(benchmark=bench, name="original")
    assert original.is_published() and original.published_at is not None
    assert KeyEntry.objects.filter(edition=original, has_citation=False).count() == questions
    assert f"questions: {questions}" in out and f"grades: {grades}" in out
    if name == "wildbench-2judges":
        assert "same vendor (openai)" in err  # a warning, not an error
        empty = Response.objects.get(
            question__question_id="ae006110bb364606", model__model_id="gemma-7b-it"
        )
        assert empty.text == ""
    else:
        assert set(bench.grade_scale) == set(range(1, 11))


@pytest.mark.sqlite
@pytest.mark.django_db
def test_factory_bundle_imports_every_file_with_corrections_as_a_second_edition(small):
    result = import_bundle(small)
    assert result.created["questions"] == 12
    assert result.created["grades"] == 12 * 3 * 2
    assert result.created["audits"] == 24
    assert result.created["editions"] == 2
    bench = Benchmark.objects.get(name="small")
    corrected = KeyEdition.objects.get(benchmark=bench, name="corrected-1")
    assert corrected.parent.name == "original" and corrected.is_published()
    assert KeyEntry.objects.filter(edition=corrected).count() == 4
    assert latest_published_edition(bench) == corrected
    effective = key_entries_for_edition(corrected)
    assert len(effective) == 12
    assert sum(e.edition_id == corrected.pk for e in effective.values()) == 4
    assert Grade.objects.filter(key_entry__edition__name="original").count() == 72
    assert Grade.objects.filter(grade__isnull=True).count() >= 0
    assert AuditVerdict.objects.filter(verdict="correct").exists()
    cited = KeyEntry.objects.filter(edition__name="original", has_citation=True).first()
    assert cited.citation_document.doc_id == cited.citation_doc_id


@pytest.mark.sqlite
@pytest.mark.django_db
def test_importing_the_same_bundle_twice_changes_nothing(small):
    import_bundle(small)
    before = db_counts()
    code, out, _ = run("import_bundle", str(small))
    assert code == 0
    assert "already imported" in out
    assert db_counts() == before
    code, out, _ = run("import_bundle", str(small), "--format", "json")
    doc = json.loads(out)
    assert doc["already_imported"] is True and not any(doc["created"].values())


@pytest.mark.sqlite
@pytest.mark.django_db
def test_dry_run_counts_but_writes_nothing(small):
    code, out, _ = run("import_bundle", str(small), "--dry-run", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["dry_run"] is True and doc["created"]["responses"] == 36
    assert db_counts()["Benchmark"] == 0


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_bundle_whose_original_key_differs_is_refused(small, tmp_path):
    import_bundle(small)
    before = db_counts()
    changed = tmp_path / "changed"
    shutil.copytree(small, changed)
    p = changed / "questions.jsonl"
    lines = p.read_text(encoding="utf-8").splitlines(True)
    row = json.loads(lines[1])
    row["answer"] = row["answer"] + " (revised)"
    lines[1] = json.dumps(row, ensure_ascii=False) + "\n"
    p.write_text("".join(lines), encoding="utf-8")
    code, _, err = run("import_bundle", str(changed))
    assert code == 1
    assert "questions.jsonl:2: answer: differs from the stored value" in err
    assert "corrections go through review" in err
    assert db_counts() == before


@pytest.mark.sqlite
@pytest.mark.django_db
def test_reimport_adds_new_grades_but_refuses_a_changed_one(small, tmp_path):
    import_bundle(small)
    grown = tmp_path / "grown"
    shutil.copytree(small, grown)
    with (grown / "judges.csv").open("a", encoding="utf-8") as f:
        f.write("j-google,Judge (Google),google,judge,,gemini,v2\n")
    with (grown / "grades.jsonl").open("a", encoding="utf-8") as f:
        f.write(
            json.dumps(
                {
                    "question_id": "Q0001",
                    "model_id": "model-01",
                    "judge_id": "j-google",
                    "grade": 1,
                    "rationale": "",
                    "flag": False,
                    "flag_reason": None,
                }
            )
            + "\n"
        )
    result = import_bundle(grown)
    assert result.created["judges"] == 1 and result.created["grades"] == 1
    assert Grade.objects.get(judge__judge_id="j-google").prompt_version == "v2"
    p = grown / "grades.jsonl"
    p.write_text(
        p.read_text(encoding="utf-8").replace(
            '"grade": 1, "rationale": ""', '"grade": 2, "rationale": ""'
        ),
        encoding="utf-8",
    )
    with pytest.raises(BundleError) as info:
        import_bundle(grown)
    assert any(
        "grades.jsonl:" in line and ": grade: differs from the stored value" in line
        for line in info.value.problems
    )


@pytest.mark.sqlite
@pytest.mark.django_db
def test_grades_against_a_later_edition_point_at_its_effective_entry(small):
    p = small / "grades.jsonl"
    corrections = [json.loads(x) for x in (small / "corrections.jsonl").read_text().splitlines()]
    corrected_q = corrections[0]
    touched = {c["question_id"] for c in corrections}
    other_q = next(f"Q{i:04d}" for i in range(1, 13) if f"Q{i:04d}" not in touched)
    with p.open("a", encoding="utf-8") as f:
        for qid in (corrected_q["question_id"], other_q):
            f.write(
                json.dumps(
                    {
                        "question_id": qid,
                        "model_id": "model-01",
                        "judge_id": "j-openai",
                        "grade": 0,
                        "edition": "corrected-1",
                        "prompt_version": "v7",
                    }
                )
                + "\n"
            )
    import_bundle(small)
    new = {g.response.question.question_id: g for g in Grade.objects.filter(prompt_version="v7")}
    assert new[corrected_q["question_id"]].key_entry.edition.name == "corrected-1"
    assert new[other_q].key_entry.edition.name == "original"  # inherited entry


@pytest.mark.django_db
def test_benchmark_is_optional_with_one_and_a_usage_error_with_several(small, tmp_path):
    assert run("export_bundle", str(tmp_path / "none.zip"))[0] == 1  # nothing imported
    import_bundle(small)
    assert get_benchmark(None).name == "small"
    assert run("export_bundle", str(tmp_path / "one.zip"))[0] == 0
    import_bundle(BUNDLES / "mtbench-reference")
    code, _, err = run("export_bundle", str(tmp_path / "two.zip"))
    assert code == 2
    assert "mtbench-reference" in err and "small" in err
    assert run("export_bundle", str(tmp_path / "x.zip"), "--benchmark", "nope")[0] == 1


def test_command_line_exit_codes_follow_the_cli_contract(tmp_path):
    """Usage errors exit 2 and bad input exits 1 from a real command line."""
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}",
    }
    manage = [sys.executable, str(PROJECT / "manage.py")]
    assert subprocess.run([*manage, "migrate", "-v0"], env=env, cwd=PROJECT).returncode == 0
    usage = subprocess.run(
        [*manage, "import_bundle"], env=env, cwd=PROJECT, capture_output=True, text=True
    )
    assert usage.returncode == 2
    bad = subprocess.run(
        [*manage, "import_bundle", str(tmp_path / "missing")],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and "not a bundle folder or .zip" in bad.stderr
    folder = tmp_path / "b"
    write_bundle(folder, n_questions=3, n_models=2, name="cli-a")
    shutil.copytree(folder, tmp_path / "c")
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    manifest["name"] = "cli-b"
    (tmp_path / "c" / "manifest.json").write_text(json.dumps(manifest))
    for path in (folder, tmp_path / "c"):
        done = subprocess.run(
            [*manage, "import_bundle", str(path), "--format", "json"],
            env=env,
            cwd=PROJECT,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["ok"] is True  # stdout holds only the JSON document
    ambiguous = subprocess.run(
        [*manage, "export_bundle", str(tmp_path / "x.zip")],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
    )
    assert ambiguous.returncode == 2 and "cli-a, cli-b" in ambiguous.stderr


DEMO = PROJECT / "questions" / "fixtures" / "demo-bundle"


@pytest.mark.sqlite
@pytest.mark.django_db
def test_demo_bundle_imports_cleanly_and_twice_is_a_no_op():
    code, out, err = run("import_bundle", str(DEMO))
    assert code == 0, err
    bench = Benchmark.objects.get()
    assert Question.objects.filter(benchmark=bench).count() > 0
    assert KeyEntry.objects.filter(edition__name="original", has_citation=True).count() > 0
    assert not KeyEntry.objects.filter(has_citation=True, citation_document__isnull=True).exists()
    before = db_counts()
    code, out, _ = run("import_bundle", str(DEMO))
    assert code == 0 and "already imported" in out and db_counts() == before


@pytest.mark.sqlite
@pytest.mark.django_db
def test_differs_message_shows_where_two_long_texts_differ(small, tmp_path):
    """Two long texts with the same beginning were both cut to that beginning, so the
    message showed two equal values; it now shows the text around the first difference."""
    import_bundle(small)
    changed = tmp_path / "changed"
    shutil.copytree(small, changed)
    p = changed / "responses.jsonl"
    lines = p.read_text(encoding="utf-8").splitlines(True)
    row = json.loads(lines[0])
    stored = row["text"] = "Answer: more than one storey above ground level, " + "x" * 80 + " end."
    lines[0] = json.dumps(row, ensure_ascii=False) + "\n"
    from questions.models import Response

    Response.objects.filter(
        question__question_id=row["question_id"], model__model_id=row["model_id"]
    ).update(text=stored.replace("one storey", "two storeys"))
    p.write_text("".join(lines), encoding="utf-8")
    code, _, err = run("import_bundle", str(changed))
    assert code == 1
    line = next(x for x in err.splitlines() if x.startswith("responses.jsonl:1: text:"))
    assert "(stored 'Answer: more than two storeys above ground level'..." in line
    assert "(from character 19)" in line
    assert "bundle 'Answer: more than one storey above ground level,'..." in line
