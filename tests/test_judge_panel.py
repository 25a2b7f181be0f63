"""The judge panel (issue 21 item 1, methodology rule 12).

On the `tiny` fixture of test_leaderboard (original edition, judges j1/j2 at prompt v1):
mA 62.5 % on 4 counted, mB 75.0 % on 2 counted. A third judge j3 that gives 0 to every
response would, if it counted, leave mA one counted response (Q2: 0,0,0) -> 0.0 % and mB
none (every other response is a disagreement or unparsed).
"""

from __future__ import annotations

import csv
import io

import pytest
from django.core.management.base import CommandError

from core.actions import Action
from core.models import AuditLogEntry
from interchange.bundles import import_bundle
from questions.errors import DomainError, NotFoundError
from scoring.board.report import build_report
from scoring.models import Grade, Judge, PanelMember
from scoring.runs.services.panel import judge_panel_set, panel_state, parse_panel_spec
from scoring.selectors import resolve_judges
from tests.bundle_factory import write_bundle
from tests.factories import UserFactory
from tests.test_leaderboard import build_tiny, run, run_json

pytestmark = pytest.mark.django_db


@pytest.fixture
def tiny(db):
    data = build_tiny()
    judge_panel_set(benchmark=data["benchmark"], members=[("j1", None), ("j2", None)])
    return data


def _scores(doc: dict) -> dict:
    return {m["model_id"]: (m["score"], m["n_counted"]) for m in doc["models"]}


def _add_j3_grading_everything_zero(tiny: dict) -> Judge:
    j3 = Judge.objects.create(benchmark=tiny["benchmark"], judge_id="j3", name="j3", vendor="v3")
    Grade.objects.bulk_create(
        Grade(response=r, judge=j3, key_entry=tiny["entries"][qid], grade=0)
        for (qid, _), r in tiny["responses"].items()
    )
    return j3


def test_adding_a_judge_with_grades_changes_no_figure_of_the_panel(tiny):
    before = run_json("leaderboard", "--edition", "original", "--no-cache")
    assert _scores(before) == {"mB": (75.0, 2), "mA": (62.5, 4)}
    _add_j3_grading_everything_zero(tiny)
    after = run_json("leaderboard", "--edition", "original", "--no-cache")
    assert _scores(after) == _scores(before)
    assert after["panel"] == [
        {"judge": "j1", "prompt_version": "v1"},
        {"judge": "j2", "prompt_version": "v1"},
    ]
    assert after["judge_set"] == "panel"
    # --judges still asks for any other set, and says it is not the panel.
    other = run_json("leaderboard", "--edition", "original", "--judges", "j1,j2,j3")
    assert _scores(other)["mA"] == (0.0, 1)
    assert other["judge_set"] == "requested"
    assert any("not the benchmark's judge panel" in n for n in other["notes"])


def test_without_a_panel_every_active_judge_counts_and_the_output_says_so(db):
    data = build_tiny(name="nopanel")
    _add_j3_grading_everything_zero(data)
    doc = run_json("leaderboard", "--benchmark", "nopanel", "--edition", "original")
    assert doc["judge_set"] == "active"
    assert _scores(doc)["mA"] == (0.0, 1)
    assert any("has no judge panel" in n for n in doc["notes"])


def test_grades_of_a_new_prompt_version_change_no_figure_of_the_panel(tiny):
    j1 = tiny["judges"]["j1"]
    j1.prompt_version = "v2"
    j1.save()
    Grade.objects.bulk_create(
        Grade(response=r, judge=j1, key_entry=tiny["entries"][qid], grade=0, prompt_version="v2")
        for (qid, _), r in tiny["responses"].items()
    )
    doc = run_json("leaderboard", "--edition", "original", "--no-cache")
    assert _scores(doc) == {"mB": (75.0, 2), "mA": (62.5, 4)}
    assert doc["panel"][0] == {"judge": "j1", "prompt_version": "v1"}


def test_changing_the_panel_is_logged_with_before_and_after(tiny):
    admin = UserFactory(username="ada")
    bench = tiny["benchmark"]
    panel = judge_panel_set(benchmark=bench, members=[("j1", None)], actor=admin)
    assert panel == [{"judge": "j1", "prompt_version": "v1"}]
    entry = AuditLogEntry.objects.filter(action=Action.JUDGE_PANEL_SET).latest("id")
    assert entry.actor == admin and entry.benchmark_name == "tiny"
    assert entry.before == [
        {"judge": "j1", "prompt_version": "v1"},
        {"judge": "j2", "prompt_version": "v1"},
    ]
    assert entry.after == [{"judge": "j1", "prompt_version": "v1"}]
    # Setting the same panel again changes nothing and logs nothing.
    n = AuditLogEntry.objects.filter(action=Action.JUDGE_PANEL_SET).count()
    judge_panel_set(benchmark=bench, members=[("j1", "v1")], actor=admin)
    assert AuditLogEntry.objects.filter(action=Action.JUDGE_PANEL_SET).count() == n
    # One judge on the panel: mA's figures are j1's grades alone (Q1 2, Q2 0, Q3 2, Q4 1).
    doc = run_json("leaderboard", "--edition", "original", "--no-cache")
    assert doc["judges"] == ["j1"] and _scores(doc)["mA"] == (62.5, 4)


@pytest.mark.parametrize(
    ("members", "error", "words"),
    [
        ([], DomainError, "at least one judge"),
        ([("j1", None), ("j1", "v1")], DomainError, "named twice"),
        ([("a1", None)], DomainError, "is an auditor"),
        ([("nobody", None)], NotFoundError, "has no judge 'nobody'"),
    ],
)
def test_a_bad_panel_is_refused_and_the_old_one_kept(tiny, members, error, words):
    with pytest.raises(error, match=words):
        judge_panel_set(benchmark=tiny["benchmark"], members=members)
    assert [m["judge"] for m in panel_state(tiny["benchmark"])] == ["j1", "j2"]


def test_panel_spec_parses_versions_and_names_a_bad_item():
    assert parse_panel_spec("j1, j2@v7") == [("j1", None), ("j2", "v7")]
    with pytest.raises(DomainError, match="panel item 2 'j2@'"):
        parse_panel_spec("j1,j2@")


def test_panel_command_shows_and_sets_the_panel(tiny):
    UserFactory(username="ada")
    doc = run_json("panel")
    assert doc == {
        "benchmark": "tiny",
        "panel": [
            {"judge": "j1", "prompt_version": "v1"},
            {"judge": "j2", "prompt_version": "v1"},
        ],
        "changed": False,
        "candidate": [],
        "candidate_changed": False,
    }
    doc = run_json("panel", "--set", "j2@v0", "--user", "ada")
    assert doc["panel"] == [{"judge": "j2", "prompt_version": "v0"}] and doc["changed"]
    assert AuditLogEntry.objects.latest("id").actor_label == "ada"
    out, _ = run("panel")
    assert out == "Benchmark tiny: the judge panel is j2@v0\n"
    with pytest.raises(CommandError, match="no user 'nobody'"):
        run("panel", "--set", "j1", "--user", "nobody")
    with pytest.raises(CommandError, match="is an auditor"):
        run("panel", "--set", "a1")


def test_every_output_names_its_edition_and_panel(tiny, client):
    words = "judge panel j1@v1, j2@v1"
    table, _ = run("leaderboard", "--edition", "original")
    assert "key edition original, " + words in table
    rows = list(csv.DictReader(io.StringIO(run("leaderboard", "--format", "csv")[0])))
    assert {(r["edition"], r["panel"]) for r in rows} == {("corrected-1", "j1@v1 j2@v1")}
    agreement = run_json("agreement", "--edition", "original")
    assert agreement["edition"] == "original" and agreement["judge_set"] == "panel"
    assert agreement["panel"][1] == {"judge": "j2", "prompt_version": "v1"}
    assert words in run("agreement")[0]
    report = build_report(tiny["original"])
    assert report["panel"] == agreement["panel"] and report["edition"] == "original"
    assert words in run("report", "--edition", "original")[0]
    client.force_login(UserFactory(username="reader"))
    page = client.get("/leaderboard/tiny/?edition=original")
    assert page.status_code == 200
    assert "key edition original, " + words in page.content.decode()
    api = client.get("/api/scoring/tiny/leaderboard/?edition=original")
    assert api.status_code == 200
    assert api.json()["panel"] == agreement["panel"] and api.json()["edition"] == "original"


def test_import_seats_the_bundles_judges_once_and_keeps_the_panel_after(tmp_path):
    folder = tmp_path / "small"
    write_bundle(folder, n_questions=6, n_models=2, seed=1, name="small", corrections=0)
    import_bundle(folder)
    seated = list(PanelMember.objects.values_list("judge__judge_id", flat=True))
    bundle_judges = sorted(
        Judge.objects.filter(role=Judge.Role.JUDGE).values_list("judge_id", flat=True)
    )
    assert len(bundle_judges) == 2 and sorted(seated) == bundle_judges
    assert AuditLogEntry.objects.filter(action=Action.JUDGE_PANEL_SET).count() == 1
    bench = Judge.objects.first().benchmark
    judge_panel_set(benchmark=bench, members=[(bundle_judges[0], None)])
    result = import_bundle(folder)
    assert [m["judge"] for m in panel_state(bench)] == [bundle_judges[0]]
    assert any("not on the judge panel" in w for w in result.warnings)
    assert resolve_judges(bench).kind == "panel"


def test_the_runs_page_says_where_the_judges_and_the_panel_differ(tiny, client):
    """A re-score grades at each judge's current prompt version; the panel counts its pinned
    versions. The Runs page says so before an admin starts a run that no figure would use;
    a judge that cannot grade (no backend: imported grades only) is not warned about."""
    from django.core.management import call_command

    from scoring.selectors import panel_drift

    bench = tiny["benchmark"]
    name = bench.name
    Judge.objects.filter(benchmark=bench).update(backend="reference")
    assert panel_drift([bench]) == {}
    Judge.objects.filter(benchmark=bench, judge_id="j1").update(prompt_version="v2")
    Judge.objects.create(
        benchmark=bench, judge_id="j3", name="j3", vendor="v3", backend="reference"
    )
    Judge.objects.create(benchmark=bench, judge_id="j4", name="j4", vendor="v4")  # no backend
    assert panel_drift([bench]) == {
        name: [
            "j1 now grades with prompt v2, but the judge panel counts its v1 grades: a re-score "
            "adds v2 grades that no figure uses until the panel is moved.",
            "j3 is not on the judge panel: its grades count in no published figure.",
            "To count the panel's judges at the versions they grade with now: "
            f"manage.py panel --benchmark {name} --set j1@v2,j2@v1",
        ]
    }
    client.force_login(UserFactory(username="root", is_superuser=True, is_staff=True))
    page = client.get("/runs/").content.decode()
    assert f"{name}: the judges and the judge panel differ." in page
    assert "j1 now grades with prompt v2" in page and "j3 is not on the judge panel" in page
    assert "j4 " not in page and "j4 is" not in page  # a CSRF token may hold "j4"
    call_command("panel", "--benchmark", name, "--set", "j1@v2,j2@v1")  # the command said
    assert panel_drift([bench]) == {
        name: ["j3 is not on the judge panel: its grades count in no published figure."]
    }
    judge_panel_set(benchmark=bench, members=[("j1", "v2"), ("j2", None), ("j3", None)])
    assert panel_drift([bench]) == {}
    assert "the judges and the judge panel differ" not in client.get("/runs/").content.decode()


def test_panel_drift_takes_two_queries_for_any_number_of_benchmarks(
    tiny, django_assert_num_queries
):
    from questions.models import Benchmark
    from scoring.selectors import panel_drift

    others = [build_tiny(name=f"more{i}")["benchmark"] for i in range(3)]
    for b in others:
        judge_panel_set(benchmark=b, members=[("j1", None)])
    Judge.objects.update(backend="reference")
    with django_assert_num_queries(2):
        drift = panel_drift(list(Benchmark.objects.none()) + [tiny["benchmark"], *others])
    assert sorted(drift) == ["more0", "more1", "more2"]  # their j2 is off the panel
    assert drift["more0"] == [
        "j2 is not on the judge panel: its grades count in no published figure."
    ]
