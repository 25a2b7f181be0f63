"""The shared real-data bundles imported into the database give the same figures as
scikit-learn / krippendorff computed here, straight from the bundle files.

wildbench-2judges: two judges grade the same 2,047 responses 1..10. mtbench-reference:
one judge, so the agreement report says plainly that agreement needs two judges.
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from django.core.management import call_command
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from tests.test_leaderboard import _private_cache  # noqa: F401

pytestmark = pytest.mark.django_db

SHARED = Path(__file__).resolve().parents[2] / "shared"
BUNDLES = SHARED / "data" / "bundles"
WILDBENCH = BUNDLES / "wildbench-2judges"
MTBENCH = BUNDLES / "mtbench-reference"


def _json(*args: str) -> dict:
    out = io.StringIO()
    call_command(*args, "--format", "json", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


def _text(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def _grades(bundle: Path) -> dict[tuple[str, str], dict[str, int | None]]:
    """Return {(question_id, model_id): {judge_id: grade or None}} from grades.jsonl."""
    by_response: dict[tuple[str, str], dict[str, int | None]] = defaultdict(dict)
    with open(bundle / "grades.jsonl", encoding="utf-8-sig") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                by_response[(row["question_id"], row["model_id"])][row["judge_id"]] = row["grade"]
    return by_response


@pytest.fixture
def wildbench(db):
    if not WILDBENCH.is_dir():
        pytest.fail(f"shared bundle missing: {WILDBENCH} (../shared must sit beside the checkout)")
    call_command("import_bundle", str(WILDBENCH), stdout=io.StringIO(), stderr=io.StringIO())
    return "wildbench-2judges"


@pytest.fixture
def mtbench(db):
    if not MTBENCH.is_dir():
        pytest.fail(f"shared bundle missing: {MTBENCH} (../shared must sit beside the checkout)")
    call_command("import_bundle", str(MTBENCH), stdout=io.StringIO(), stderr=io.StringIO())
    return "mtbench-reference"


def test_wildbench_agreement_matches_sklearn_and_krippendorff(wildbench):
    doc = _json("agreement", "--benchmark", wildbench)
    [pair] = doc["pairs"]
    ja, jb = pair["judges"]
    assert (ja, jb) == ("gpt-4-turbo-2024-04-09", "gpt-4o-2024-05-13")

    grades = _grades(WILDBENCH)
    both = [
        (g[ja], g[jb]) for g in grades.values() if g.get(ja) is not None and g.get(jb) is not None
    ]
    dropped = sum(1 for g in grades.values() if g.get(ja) is None or g.get(jb) is None)
    a = np.array([x for x, _ in both])
    b = np.array([y for _, y in both])
    labels = list(range(1, 11))

    assert pair["n"] == len(both) == 2047
    assert pair["n_missing"] == dropped
    assert pair["exact_agreement"] == pytest.approx(float(np.mean(a == b)), abs=1e-4)
    assert pair["cohen_kappa"] == pytest.approx(cohen_kappa_score(a, b, labels=labels), abs=1e-4)
    assert pair["cohen_kappa_quadratic"] == pytest.approx(
        cohen_kappa_score(a, b, labels=labels, weights="quadratic"), abs=1e-4
    )
    alpha = krippendorff.alpha(
        reliability_data=np.vstack([a, b]).astype(float),
        level_of_measurement="ordinal",
        value_domain=labels,
    )
    assert pair["krippendorff_alpha_ordinal"] == pytest.approx(alpha, abs=1e-4)
    assert pair["confusion"] == confusion_matrix(a, b, labels=labels).tolist()


def test_wildbench_leaderboard_counts_only_agreed_grades(wildbench):
    doc = _json("leaderboard", "--benchmark", wildbench, "--bootstrap", "200")
    grades = _grades(WILDBENCH)
    expected: dict[str, dict[str, float]] = defaultdict(lambda: {"n": 0, "pts": 0, "dis": 0})
    for (_, model), g in grades.items():
        values = list(g.values())
        if len(values) == 2 and None not in values:
            if values[0] == values[1]:
                expected[model]["n"] += 1
                expected[model]["pts"] += values[0] - 1
            else:
                expected[model]["dis"] += 1
    agreed = sum(e["n"] for e in expected.values())
    graded = agreed + sum(e["dis"] for e in expected.values())
    assert doc["agreement_rate"] == pytest.approx(agreed / graded, abs=1e-4)
    for m in doc["models"]:
        e = expected[m["model_id"]]
        assert m["n_counted"] == e["n"]
        assert m["n_excluded_disagreement"] == e["dis"]
        # 1..10 scale: a 1 is 0 %, a 10 is 100 %
        assert m["score"] == pytest.approx(100 * e["pts"] / (9 * e["n"]), abs=1e-3)
        assert m["ci_low"] < m["score"] < m["ci_high"]
    assert [m["model_id"] for m in doc["models"]] == ["gpt-3.5-turbo-0125", "gemma-7b-it"]


def test_wildbench_report_runs(wildbench):
    doc = _json("report", "--benchmark", wildbench)
    assert doc["questions_total"] == doc["questions_scored"] == 1024
    assert doc["responses_total"] == 2047
    assert doc["responses_counted"] + doc["responses_excluded_disagreement"] == 2047
    assert doc["n_models"] == 2
    assert doc["auditor_agreement_rate"] is None  # no auditors in this bundle
    assert _text("report", "--benchmark", wildbench).startswith("# Methodology report")


def test_mtbench_one_judge_leaderboard_agreement_and_report(mtbench):
    board = _json("leaderboard", "--benchmark", mtbench, "--bootstrap", "200")
    assert board["judges"] == ["gpt-4"] and board["agreement_rate"] is None
    assert len(board["models"]) == 7
    assert all(m["n_excluded_disagreement"] == 0 for m in board["models"])
    grades = _grades(MTBENCH)
    for m in board["models"]:
        mine = [g["gpt-4"] for (q, model), g in grades.items() if model == m["model_id"]]
        counted = [g for g in mine if g is not None]
        assert m["n_counted"] == len(counted)
        assert m["n_unparsed"] == len(mine) - len(counted)
        assert m["score"] == pytest.approx(
            100 * sum(g - 1 for g in counted) / (9 * len(counted)), abs=1e-3
        )

    agreement = _json("agreement", "--benchmark", mtbench)
    assert agreement["pairs"] == []
    assert any("agreement needs two judges" in n for n in agreement["notes"])
    assert "Agreement needs two judges" in _text("agreement", "--benchmark", mtbench)

    report = _json("report", "--benchmark", mtbench)
    assert report["agreement_rate"] is None and report["n_models"] == 7
    assert report["responses_total"] == 210


def test_both_real_bundles_side_by_side_need_benchmark_names(wildbench, mtbench):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError) as exc:
        _json("leaderboard")
    assert exc.value.returncode == 2
    assert "wildbench-2judges" in str(exc.value) and "mtbench-reference" in str(exc.value)


def test_real_bundle_pages_render(client, wildbench, mtbench):
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_user("v", password="x-very-long-pass-1"))
    body = client.get(f"/leaderboard/{wildbench}/").content.decode()
    assert "gpt-3.5-turbo-0125" in body and "Krippendorff" in body
    body = client.get(f"/leaderboard/{mtbench}/").content.decode()
    assert "Agreement needs two judges." in body
    for b in (wildbench, mtbench):
        assert client.get(f"/report/{b}/").status_code == 200
