"""Every CSV the product writes is spreadsheet-safe (issue 21 item 6).

A cell beginning with `=`, `+`, `-`, `@`, a tab or a carriage return runs as a formula in
a spreadsheet (OWASP "CSV Injection"). The leaderboard command, the leaderboard page's
CSV download and the bundle export all write through `scoring.spreadsheet.csv_text`.
"""

from __future__ import annotations

import csv
import io

import pytest

from scoring.models import Grade
from scoring.runs.services.panel import judge_panel_set
from scoring.spreadsheet import csv_text, neutralise
from tests.factories import UserFactory
from tests.test_leaderboard import ORIGINAL_GRADES, build_tiny, run

pytestmark = pytest.mark.django_db

DANGEROUS = tuple("=+-@\t\r")


@pytest.fixture
def hostile(db):
    """tiny, with mB graded exactly like mA (a tie: both 62.5 % on 4, rank "=1") and the
    two model ids renamed to formulas."""
    data = build_tiny()
    judge_panel_set(benchmark=data["benchmark"], members=[("j1", None), ("j2", None)])
    for qid, per_model in ORIGINAL_GRADES.items():
        for k, jid in enumerate(("j1", "j2")):
            Grade.objects.filter(
                response=data["responses"][(qid, "mB")],
                judge=data["judges"][jid],
                key_entry=data["entries"][qid],
            ).update(grade=per_model["mA"][k])
    for old, new in (("mA", "=1+2"), ("mB", "@SUM(A1)")):
        model = data["models"][old]
        model.model_id = new
        model.save()
    return data


def _cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_neutralise_prefixes_one_apostrophe_to_each_dangerous_start():
    for value in ("=3", "+1", "-cmd", "@SUM(A1)", "\tx", "\rx", "'=x"):
        assert neutralise(value) == "'" + value
    for value in ("3", "model-a", "'hello", "", "a=b"):
        assert neutralise(value) == value
    assert csv_text(["a", "b"], [["=1+2", None], [-1, 2.5]]) == "a,b\n'=1+2,\n'-1,2.5\n"


def test_leaderboard_csv_command_neutralises_tie_ranks_and_model_ids(hostile):
    out, _ = run("leaderboard", "--edition", "original", "--format", "csv")
    rows = _cells(out)
    header, body = rows[0], rows[1:]
    by_model = {r[header.index("model_id")]: r for r in body}
    assert set(by_model) == {"'=1+2", "'@SUM(A1)"}
    assert {r[header.index("rank")] for r in body} == {"'=1"}
    assert {r[header.index("score")] for r in body} == {"62.5"}
    assert not any(cell.startswith(DANGEROUS) for row in rows for cell in row)


def test_leaderboard_page_download_is_neutralised_too(hostile, client):
    client.force_login(UserFactory(username="reader"))
    response = client.get("/leaderboard/tiny/leaderboard.csv?edition=original")
    assert response.status_code == 200
    rows = _cells(response.content.decode())
    assert "'=1+2" in [r[2] for r in rows[1:]]
    assert not any(cell.startswith(DANGEROUS) for row in rows for cell in row)
