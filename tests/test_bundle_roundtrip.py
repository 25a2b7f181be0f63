"""Export then import into an empty benchmark yields the same data, row for row.

"Empty database" is done as a fresh benchmark name: every id of a bundle is scoped by its
benchmark (bundle-format.md), and published editions cannot be deleted to empty the
database between the two halves, by design.
"""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.management import call_command

from interchange.bundles import import_bundle
from questions import services
from questions.models import Benchmark, KeyEdition, Question, Response
from questions.selectors import key_entries_for_edition
from scoring.models import Grade, Judge
from tests.bundle_factory import snapshot, write_bundle


def _rename(folder, name):
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    manifest["name"] = name
    (folder / "manifest.json").write_text(
        json.dumps(manifest, ensure_ascii=False), encoding="utf-8"
    )


@pytest.fixture
def rich(tmp_path):
    """A benchmark with corrections, a third edition made by review, and odd text."""
    folder = tmp_path / "src"
    write_bundle(folder, n_questions=15, n_models=3, seed=7, name="rich", corrections=5)
    p = folder / "models.csv"
    p.write_text(
        p.read_text().replace("Model 02", "\"=cmd|' /C calc'!A0, with\nnewline\""), encoding="utf-8"
    )
    import_bundle(folder)
    bench = Benchmark.objects.get(name="rich")
    corrected = KeyEdition.objects.get(benchmark=bench, name="corrected-1")
    draft = services.key_edition_create(
        benchmark=bench, name="corrected-2", parent=corrected, note="Second review round"
    )
    q = Question.objects.get(benchmark=bench, question_id="Q0003")
    services.key_entry_create(
        edition=draft,
        question=q,
        answer="½ of 1.2\u00a0m",
        removed=True,
        reason="amended_or_repealed",
        note="repealed 2024",
        citation_doc_id="ADA",
        citation_locator="1.1",
    )
    services.key_edition_publish(edition=draft, user=None)
    entry = key_entries_for_edition(draft)[q.pk]
    judge = Judge.objects.get(benchmark=bench, judge_id="j-openai")
    for response in Response.objects.filter(question=q):
        Grade.objects.create(
            response=response,
            judge=judge,
            key_entry=entry,
            grade=None,
            prompt_version="v2",
            rationale="",
            raw_output="garbled",
            stop_reason="max_tokens",
        )
    return bench


@pytest.mark.sqlite
@pytest.mark.django_db
@pytest.mark.parametrize("target", ["folder", "bundle.zip"])
def test_export_then_import_gives_the_same_rows(rich, tmp_path, target):
    out = tmp_path / target
    call_command("export_bundle", str(out), "--benchmark", "rich", stdout=io.StringIO())
    if target.endswith(".zip"):
        folder = tmp_path / "unzipped"
        folder.mkdir()
        with zipfile.ZipFile(out) as archive:
            for info in archive.infolist():
                (folder / info.filename).write_bytes(archive.read(info))
    else:
        folder = out
    corrections = [json.loads(x) for x in (folder / "corrections.jsonl").read_text().splitlines()]
    assert {c["edition"] for c in corrections} == {"corrected-1", "corrected-2"}
    _rename(folder, "rich-copy")
    import_bundle(folder)
    copy = Benchmark.objects.get(name="rich-copy")
    original, imported = snapshot(rich), snapshot(copy)
    for table in original:
        assert imported[table] == original[table], table
    assert len(original["editions"]) == 3 and len(original["grades"]) == 15 * 3 * 2 + 3


@pytest.mark.sqlite
@pytest.mark.django_db
def test_export_of_an_older_edition_leaves_later_history_out(rich, tmp_path):
    out = tmp_path / "old"
    call_command("export_bundle", str(out), "--edition", "corrected-1", stdout=io.StringIO())
    rows = [json.loads(x) for x in (out / "corrections.jsonl").read_text().splitlines()]
    assert {r["edition"] for r in rows} == {"corrected-1"}
    assert "v2" not in (out / "grades.jsonl").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["corrected_edition"] == "corrected-1"


@pytest.mark.sqlite
@pytest.mark.django_db
def test_re_importing_an_export_into_the_same_benchmark_changes_nothing(rich, tmp_path):
    before = snapshot(rich)
    out = tmp_path / "again"
    call_command("export_bundle", str(out), stdout=io.StringIO())
    result = import_bundle(out)
    assert result.already_imported
    assert snapshot(rich) == before


@pytest.mark.django_db
def test_export_refuses_a_non_empty_folder(rich, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    from django.core.management import CommandError

    with pytest.raises(CommandError) as info:
        call_command("export_bundle", str(tmp_path / "full"), stdout=io.StringIO())
    assert info.value.returncode == 1


@pytest.mark.sqlite
@pytest.mark.django_db
def test_exclusions_by_audit_survive_export_and_import(tmp_path):
    """bundle-format.md: an export of an import re-imports to the same data. Exclusions
    (rule 4) travel as the audits they follow from: import applies the rule, so the
    re-imported benchmark excludes the same two demo questions and scores the same.

    The demo's two auditors are both vendor "snaglist", not independent (rule 4), so the
    demo as shipped excludes nothing; this copy gives them two vendors."""
    import shutil

    from core.models import AuditLogEntry
    from questions.models import AuditExclusion
    from scoring.selectors import board_for_edition
    from tests.conftest import DEMO_BUNDLE

    bundle = tmp_path / "demo"
    shutil.copytree(DEMO_BUNDLE, bundle)
    judges = (bundle / "judges.csv").read_text(encoding="utf-8")
    assert judges.count(",snaglist,auditor,") == 2
    for letter in "ab":
        judges = judges.replace(
            f"Reference auditor {letter.upper()},snaglist,",
            f"Reference auditor {letter.upper()},vendor-{letter},",
        )
    (bundle / "judges.csv").write_text(judges, encoding="utf-8")

    import_bundle(bundle, dry_run=True)
    assert not AuditExclusion.objects.exists() and not AuditLogEntry.objects.exists()
    import_bundle(bundle)
    demo = Benchmark.objects.get()
    excluded = sorted(
        AuditExclusion.objects.values_list("key_entry__question__question_id", flat=True)
    )
    assert len(excluded) == 2
    # logged like triage's exclusions (scoring.audit_rule writes both, with their log)
    logged = AuditLogEntry.objects.filter(action="question.exclude").order_by("target_label")
    assert [(e.target_label, e.actor_label, e.after["edition"]) for e in logged] == [
        (f"uk-construction-demo/{q}", "system", "original") for q in excluded
    ]
    out = tmp_path / "export"
    call_command("export_bundle", str(out), "--benchmark", demo.name, stdout=io.StringIO())
    _rename(out, "demo-copy")
    result = import_bundle(out)
    assert result.created["exclusions"] == 2
    copy = Benchmark.objects.get(name="demo-copy")
    assert (
        sorted(
            AuditExclusion.objects.filter(key_entry__edition__benchmark=copy).values_list(
                "key_entry__question__question_id", flat=True
            )
        )
        == excluded
    )

    def scores(bench):
        edition = KeyEdition.objects.get(benchmark=bench, name="original")
        board = board_for_edition(edition, n_bootstrap=0).leaderboard_dict()
        return board["questions_scored"], [(m["model_id"], m["score"]) for m in board["models"]]

    assert scores(copy) == scores(demo)
    assert scores(demo)[0] == 44  # 46 questions, 2 excluded by audit
