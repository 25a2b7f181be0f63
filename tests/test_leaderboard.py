"""Leaderboard reads and the `leaderboard` command on a small hand-checked database.

The fixture (`tiny`, scale 0..2, two judges j1/j2, two auditors a1/a2, models mA/mB):

| question | cat | original grades mA (j1,j2) | mB (j1,j2) | notes |
|---|---|---|---|---|
| Q1 | c1 | 2,2 counted | 1,0 disagreement | a1 wrong, a2 correct: single-auditor flag |
| Q2 | c1 | 0,0 counted | 1,1 counted | corrected in corrected-1: mA 2,2 (up), mB 1,1 (same) |
| Q3 | c1 | 2,2 counted | 2,null unparsed | removed in corrected-1 |
| Q4 | c2 | 1,1 counted | 2,2 counted | j1 flags it on mA |
| Q5 | c2 | 2,2 | 0,0 | excluded by audit (a1 wrong, a2 ungradeable) |

Plus an old-prompt grade (v0) of j1 on mA/Q1 = 0 that must be ignored.

original: mA 5 points / 4 counted = 62.5 %, mB 3 / 2 = 75 %; agreement 6/7.
corrected-1: mA (Q1 2, Q2 2, Q4 1) 5/3 -> 83.33 %, mB (Q2 1, Q4 2) 3/2 -> 75 %; agreement 5/6.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from questions.models import (
    AuditExclusion,
    Benchmark,
    Category,
    KeyEdition,
    KeyEntry,
    ModelUnderTest,
    Question,
    Response,
)
from questions.services import key_edition_create, key_edition_publish, key_entry_create
from scoring.models import AuditVerdict, Grade, Judge

pytestmark = pytest.mark.django_db

ORIGINAL_GRADES = {
    # question: {model: (j1, j2)}
    "Q1": {"mA": (2, 2), "mB": (1, 0)},
    "Q2": {"mA": (0, 0), "mB": (1, 1)},
    "Q3": {"mA": (2, 2), "mB": (2, None)},
    "Q4": {"mA": (1, 1), "mB": (2, 2)},
    "Q5": {"mA": (2, 2), "mB": (0, 0)},
}
CORRECTED_GRADES = {"Q2": {"mA": (2, 2), "mB": (1, 1)}}


def build_tiny(name: str = "tiny") -> dict:
    """Create the fixture described in the module docstring; return its objects by name."""
    bench = Benchmark.objects.create(name=name, version="1", grade_scale=[0, 1, 2])
    cats = {
        c: Category.objects.create(benchmark=bench, category_id=c, name=f"Category {c}")
        for c in ("c1", "c2")
    }
    questions = {}
    for qid, cat in (("Q1", "c1"), ("Q2", "c1"), ("Q3", "c1"), ("Q4", "c2"), ("Q5", "c2")):
        questions[qid] = Question.objects.create(
            benchmark=bench, question_id=qid, category=cats[cat], text=f"Question {qid}?"
        )
    original = key_edition_create(benchmark=bench, name="original", parent=None)
    entries = {
        qid: key_entry_create(edition=original, question=q, answer=f"Answer {qid}")
        for qid, q in questions.items()
    }
    key_edition_publish(edition=original)
    corrected = key_edition_create(benchmark=bench, name="corrected-1", parent=original)
    q2_new = key_entry_create(
        edition=corrected, question=questions["Q2"], answer="Better", reason="factually_wrong"
    )
    key_entry_create(
        edition=corrected, question=questions["Q3"], removed=True, reason="ungradeable"
    )
    key_edition_publish(edition=corrected)

    models = {
        m: ModelUnderTest.objects.create(benchmark=bench, model_id=m, name=f"Model {m}")
        for m in ("mA", "mB")
    }
    judges = {
        j: Judge.objects.create(benchmark=bench, judge_id=j, name=j, vendor=v)
        for j, v in (("j1", "v1"), ("j2", "v2"))
    }
    auditors = {
        a: Judge.objects.create(
            benchmark=bench, judge_id=a, name=a, vendor=f"v{a}", role=Judge.Role.AUDITOR
        )
        for a in ("a1", "a2")
    }
    responses = {
        (qid, m): Response.objects.create(question=q, model=models[m], text=f"{m} on {qid}")
        for qid, q in questions.items()
        for m in models
    }

    def grade(entries_by_q, table):
        rows = []
        for qid, per_model in table.items():
            for m, pair in per_model.items():
                for jid, g in zip(("j1", "j2"), pair, strict=True):
                    rows.append(
                        Grade(
                            response=responses[(qid, m)],
                            judge=judges[jid],
                            key_entry=entries_by_q[qid],
                            grade=g,
                            flag=(qid == "Q4" and m == "mA" and jid == "j1"),
                        )
                    )
        Grade.objects.bulk_create(rows)

    grade(entries, ORIGINAL_GRADES)
    grade({"Q2": q2_new}, CORRECTED_GRADES)
    # an old prompt's grade: never used
    Grade.objects.create(
        response=responses[("Q1", "mA")],
        judge=judges["j1"],
        key_entry=entries["Q1"],
        grade=0,
        prompt_version="v0",
    )
    for qid, a1, a2 in (
        ("Q5", "wrong", "ungradeable"),
        ("Q1", "wrong", "correct"),
        ("Q2", "correct", "correct"),
        ("Q3", "correct", None),
    ):
        AuditVerdict.objects.create(key_entry=entries[qid], auditor=auditors["a1"], verdict=a1)
        AuditVerdict.objects.create(key_entry=entries[qid], auditor=auditors["a2"], verdict=a2)
    AuditExclusion.objects.create(key_entry=entries["Q5"], reason="auditors_agree")
    return {
        "benchmark": bench,
        "original": original,
        "corrected": corrected,
        "questions": questions,
        "entries": entries,
        "responses": responses,
        "judges": judges,
        "models": models,
    }


@pytest.fixture
def tiny(db):
    return build_tiny()


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def run_json(*args: str) -> dict:
    out, _ = run(*args, "--format", "json")
    return json.loads(out)


# ----------------------------------------------------------------------------- selectors
def test_edition_grades_use_effective_entries_and_current_prompt(tiny):
    from scoring.selectors import load_edition_grades

    data = load_edition_grades(tiny["corrected"])
    table = data.table
    assert list(table.question_ids) == ["Q1", "Q2", "Q3", "Q4", "Q5"]
    assert list(table.scored) == [True, True, False, True, False]
    q1 = list(table.question_ids).index("Q1")
    a = list(table.model_ids).index("mA")
    # the v0 grade of 0 is not used: mA/Q1 reads 2, 2
    assert table.grade_values(table.codes[q1, a]).tolist() == [2.0, 2.0]
    q2 = list(table.question_ids).index("Q2")
    # corrected-1 uses the corrected entry's grades, not the original ones (0, 0)
    assert table.grade_values(table.codes[q2, a]).tolist() == [2.0, 2.0]


def test_edition_grades_note_names_a_judge_without_grades(tiny):
    from scoring.selectors import load_edition_grades

    bench = tiny["corrected"].benchmark
    Judge.objects.create(benchmark=bench, judge_id="j3", name="j3", vendor="v3")
    notes = load_edition_grades(tiny["corrected"]).notes
    assert "judge j3 has no grade against this edition's key entries" in notes
    Judge.objects.create(benchmark=bench, judge_id="j4", name="j4", vendor="v4")
    notes = load_edition_grades(tiny["corrected"]).notes
    assert "judges j3, j4 have no grade against this edition's key entries" in notes


def test_grade_rows_load_in_a_bounded_number_of_queries(tiny, django_assert_max_num_queries):
    from scoring.selectors import load_edition_grades

    # 9: two more than before issue 21, one for the judge panel, one for the responses
    # whose missing grades are counted (scoring.completeness).
    with django_assert_max_num_queries(9):
        load_edition_grades(tiny["corrected"])


# ----------------------------------------------------------------------------- command
def test_leaderboard_json_original_edition_hand_checked(tiny):
    doc = run_json("leaderboard", "--edition", "original", "--bootstrap", "200")
    assert doc["edition"] == "original"
    assert doc["judges"] == ["j1", "j2"]
    assert doc["band_gap"] == 1.5
    assert doc["agreement_rate"] == pytest.approx(6 / 7, abs=1e-4)
    assert doc["n_bands"] == 2
    models = {m["model_id"]: m for m in doc["models"]}
    assert [m["model_id"] for m in doc["models"]] == ["mB", "mA"]
    assert models["mB"]["score"] == 75.0
    assert models["mB"]["n_counted"] == 2
    assert models["mB"]["n_excluded_disagreement"] == 1
    assert models["mB"]["n_unparsed"] == 1
    # Issue 21: mB has 2 counted responses (< SNAGLIST_MIN_COUNTED, 30) and its interval
    # overlaps mA's, so it is flagged and shares its rank with mA instead of ranking alone.
    assert models["mB"]["few_counted"] is True
    assert models["mB"]["rank"] == "=1" and models["mB"]["band"] == 1
    assert models["mA"]["score"] == 62.5
    # Q5 (excluded by audit) is not counted: mA has Q1..Q4 only
    assert models["mA"]["n_counted"] == 4
    assert models["mA"]["rank"] == "=1" and models["mA"]["band"] == 2
    for m in doc["models"]:
        assert set(m) >= {
            "model_id",
            "score",
            "n_counted",
            "n_excluded_disagreement",
            "n_unparsed",
            "ci_low",
            "ci_high",
            "band",
            "rank",
        }
        assert m["ci_low"] <= m["score"] <= m["ci_high"]


def test_removed_question_counts_in_original_but_not_in_corrected(tiny):
    original = {
        m["model_id"]: m for m in run_json("leaderboard", "--edition", "original")["models"]
    }
    corrected = {
        m["model_id"]: m for m in run_json("leaderboard", "--edition", "corrected-1")["models"]
    }
    # Q3 is in the original (mA 2,2 counted; mB unparsed) and removed in corrected-1
    assert original["mA"]["n_counted"] == 4 and corrected["mA"]["n_counted"] == 3
    assert original["mB"]["n_unparsed"] == 1 and corrected["mB"]["n_unparsed"] == 0


def test_corrected_edition_uses_grades_against_the_corrected_entry(tiny):
    doc = run_json("leaderboard", "--edition", "corrected-1")
    models = {m["model_id"]: m for m in doc["models"]}
    # superseded-entry grade (Q2 mA 0,0) not used; corrected entry's 2,2 is
    assert models["mA"]["score"] == pytest.approx(500 / 6, abs=1e-3)
    assert models["mB"]["score"] == 75.0
    assert doc["agreement_rate"] == pytest.approx(5 / 6, abs=1e-4)
    assert [m["model_id"] for m in doc["models"]] == ["mA", "mB"]


def test_default_edition_is_latest_published(tiny):
    assert run_json("leaderboard")["edition"] == "corrected-1"


def test_leaderboard_table_names_banding_edition_and_judges(tiny):
    out, _ = run("leaderboard", "--edition", "original")
    assert "gap bands" in out and "1.5" in out
    assert "original" in out and "j1@v1, j2@v1" in out  # judges with prompt versions (issue 21)
    assert "mB" in out and "75.0" in out


def test_leaderboard_csv_has_a_row_per_model(tiny):
    out, _ = run("leaderboard", "--edition", "original", "--format", "csv")
    lines = out.strip().splitlines()
    assert lines[0].startswith("band,rank,model_id,score")
    assert len(lines) == 3 and lines[1].split(",")[2] == "mB"


def test_leaderboard_ci_overlap_banding_is_named(tiny):
    doc = run_json("leaderboard", "--edition", "original", "--banding", "ci_overlap")
    assert doc["banding"] == "ci_overlap"
    out, _ = run("leaderboard", "--edition", "original", "--banding", "ci_overlap")
    assert "interval overlap" in out


def test_band_gap_option_changes_bands(tiny):
    doc = run_json("leaderboard", "--edition", "original", "--band-gap", "20")
    assert doc["band_gap"] == 20.0 and doc["n_bands"] == 1


def test_unknown_edition_exits_1_with_message(tiny):
    with pytest.raises(CommandError) as exc:
        run("leaderboard", "--edition", "nope")
    assert exc.value.returncode == 1
    assert "nope" in str(exc.value)


def test_ambiguous_benchmark_exits_2_and_lists_benchmarks(tiny):
    build_tiny("tiny-two")
    with pytest.raises(CommandError) as exc:
        run("leaderboard")
    assert exc.value.returncode == 2
    assert "tiny" in str(exc.value) and "tiny-two" in str(exc.value)
    assert run_json("leaderboard", "--benchmark", "tiny-two")["edition"] == "corrected-1"


def test_negative_seed_is_a_usage_error(tiny):
    # numpy's SeedSequence takes no negative seed: refused by the parser, not a traceback.
    with pytest.raises(CommandError, match=r"argument --seed: must be >= 0, not '-1'"):
        run("leaderboard", "--seed", "-1")


@pytest.mark.parametrize(
    "command",
    [
        ("leaderboard", "--edition", "nope"),
        ("agreement", "--edition", "nope"),
        ("report", "--edition", "nope"),
        ("rescore", "--edition", "nope"),
    ],
)
def test_format_json_failure_still_prints_one_json_document(tiny, command):
    """cli.md: --format json prints exactly one JSON document on stdout, failures too."""
    out = io.StringIO()
    with pytest.raises(CommandError) as exc:
        call_command(*command, "--format", "json", stdout=out, stderr=io.StringIO())
    assert exc.value.returncode == 1
    doc = json.loads(out.getvalue())
    assert doc == {"ok": False, "error": str(exc.value), "exit_code": 1}
    assert "'nope'" in doc["error"]


def test_unknown_benchmark_exits_1(tiny):
    with pytest.raises(CommandError) as exc:
        run("leaderboard", "--benchmark", "nope")
    assert exc.value.returncode == 1


def test_bad_usage_exits_2_from_the_command_line(tiny, tmp_path):
    """argparse errors are usage errors: run a real process to see the exit code."""
    import os
    import subprocess
    import sys

    from django.conf import settings

    proc = subprocess.run(
        [sys.executable, "manage.py", "leaderboard", "--format", "yaml"],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )
    assert proc.returncode == 2
    assert "yaml" in proc.stderr


def test_json_output_is_one_document_with_nothing_else(tiny):
    out, _ = run("leaderboard", "--edition", "original", "--format", "json")
    json.loads(out)  # raises if anything else is on stdout


# ----------------------------------------------------------------------------- cache
def test_cached_result_changes_when_a_grade_is_added(tiny):
    from scoring.selectors import board_for_edition

    first = board_for_edition(tiny["original"], n_bootstrap=50)
    again = board_for_edition(tiny["original"], n_bootstrap=50)
    assert again.version == first.version
    assert again.leaderboard_dict() == first.leaderboard_dict()
    # mB's disagreement on Q1 (j1=1, j2=0): a third grade row cannot be added for
    # the same pair, so re-grade under a new prompt version for j2 ... simpler: a
    # new model with two agreeing grades.
    bench = tiny["benchmark"]
    mc = ModelUnderTest.objects.create(benchmark=bench, model_id="mC", name="Model mC")
    resp = Response.objects.create(question=tiny["questions"]["Q1"], model=mc, text="x")
    for judge in tiny["judges"].values():
        Grade.objects.create(response=resp, judge=judge, key_entry=tiny["entries"]["Q1"], grade=2)
    after = board_for_edition(tiny["original"], n_bootstrap=50)
    assert after.version != first.version
    assert "mC" in [m["model_id"] for m in after.leaderboard_dict()["models"]]


def test_cached_result_changes_when_a_question_is_excluded(tiny):
    from scoring.selectors import board_for_edition

    before = board_for_edition(tiny["original"], n_bootstrap=0)
    AuditExclusion.objects.create(key_entry=tiny["entries"]["Q4"], reason="auditors_agree")
    after = board_for_edition(tiny["original"], n_bootstrap=0)
    assert before.leaderboard_dict()["questions_scored"] == 4
    assert after.leaderboard_dict()["questions_scored"] == 3


def _scores(edition) -> dict[str, float]:
    from scoring.selectors import board_for_edition

    board = board_for_edition(edition, n_bootstrap=0).leaderboard_dict()
    return {m["model_id"]: round(m["score"], 2) for m in board["models"]} | {
        "questions_scored": board["questions_scored"]
    }


def test_triage_of_a_corrected_edition_leaves_the_original_figures_alone(tiny):
    """Rule 8: an exclusion by audit belongs to the key entry the auditors judged.

    Both auditors find corrected-1's new Q2 entry wrong. corrected-1 then scores mA on Q1 2,
    Q4 1 -> 3/4 = 75 %, mB on Q4 2 -> 2/2 = 100 % (Q3 removed, Q5 still excluded: it keeps
    the original entry the auditors rejected). The original edition still has 62.5 / 75 %
    over 4 scored questions (its Q2 entry was never judged adverse).
    """
    from review.triage import triage_run

    original, corrected = tiny["original"], tiny["corrected"]
    before = _scores(original)
    assert before == {"mA": 62.5, "mB": 75.0, "questions_scored": 4}
    assert _scores(corrected) == {"mA": 83.33, "mB": 75.0, "questions_scored": 3}
    q2_new = KeyEntry.objects.get(edition=corrected, question=tiny["questions"]["Q2"])
    for auditor in Judge.objects.filter(benchmark=tiny["benchmark"], role=Judge.Role.AUDITOR):
        AuditVerdict.objects.create(key_entry=q2_new, auditor=auditor, verdict="wrong")

    counts = triage_run(benchmark=tiny["benchmark"], edition=corrected)

    assert (counts["excluded"], counts["already_excluded"]) == (1, 1)  # Q2 new; Q5 inherited
    assert _scores(corrected) == {"mA": 75.0, "mB": 100.0, "questions_scored": 2}
    assert _scores(original) == before
    assert sorted(
        AuditExclusion.objects.values_list(
            "key_entry__edition__name", "key_entry__question__question_id"
        )
    ) == [("corrected-1", "Q2"), ("original", "Q5")]


def test_a_corrected_entry_is_not_excluded_by_its_predecessors_audit(tiny):
    """Q5's original entry is excluded (both auditors adverse); an edition that corrects Q5
    scores it again, and re-scoring it needs exactly models x judges = 2 x 2 new grades."""
    from scoring.runs.services import rescore_needed_pairs

    corrected, questions = tiny["corrected"], tiny["questions"]
    judges = Judge.objects.filter(benchmark=tiny["benchmark"], role=Judge.Role.JUDGE)
    judges.update(backend=Judge.Backend.REFERENCE)
    judges = list(judges)
    # corrected-1: Q1, Q2, Q4 graded by both judges; Q3 removed; Q5 excluded (inherited).
    assert rescore_needed_pairs(edition=corrected, judges=judges) == []
    second = key_edition_create(benchmark=tiny["benchmark"], name="corrected-2", parent=corrected)
    key_entry_create(
        edition=second, question=questions["Q5"], answer="Fixed", reason="factually_wrong"
    )
    key_edition_publish(edition=second)

    pairs = rescore_needed_pairs(edition=second, judges=judges)

    q5_new = KeyEntry.objects.get(edition=second, question=questions["Q5"])
    assert len(pairs) == 4 and {p[2] for p in pairs} == {q5_new.pk}
    assert _scores(tiny["original"])["questions_scored"] == 4  # Q5 still excluded there


def test_cache_is_hit_without_recomputing(tiny, monkeypatch):
    from scoring import selectors

    selectors.board_for_edition(tiny["original"], n_bootstrap=10)
    calls = []
    monkeypatch.setattr(selectors, "load_edition_grades", lambda *a, **k: calls.append(1))
    selectors.board_for_edition(tiny["original"], n_bootstrap=10)
    assert calls == []


def test_draft_edition_entries_invalidate_cache(tiny):
    from questions.services import key_edition_create, key_entry_create
    from scoring.selectors import board_for_edition

    draft = key_edition_create(
        benchmark=tiny["benchmark"], name="draft-2", parent=tiny["corrected"]
    )
    before = board_for_edition(draft, n_bootstrap=0)
    key_entry_create(
        edition=draft, question=tiny["questions"]["Q4"], removed=True, reason="ungradeable"
    )
    after = board_for_edition(draft, n_bootstrap=0)
    assert before.questions_scored == 3 and after.questions_scored == 2
    assert KeyEntry.objects.filter(edition=draft).count() == 1
    assert KeyEdition.objects.get(pk=draft.pk).status == "draft"


@pytest.fixture(autouse=True)
def _private_cache(settings):
    """A process-local cache per test, so no result leaks between tests or runs."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "test-leaderboard",
        }
    }
    from django.core.cache import cache

    cache.clear()
