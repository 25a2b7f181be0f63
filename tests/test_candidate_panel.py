"""The candidate panel (issue 31 item 1): tried beside the judge panel, adopted when chosen.

On the `tiny` fixture of test_leaderboard (original edition; panel j1@v1, j2@v1: mA 62.5 %
on 4 counted, mB 75.0 % on 2, agreement 6/7). j1 moves to prompt v2 and grades as j2 did,
except mB/Q1, where it now gives 0 like j2 (v1 gave 1: a disagreement). The candidate
j1@v2, j2@v1 then counts mB/Q1 (0, 0): mB (0 + 1 + 2) / 6 = 50.0 % on 3 (Q3 is unparsed
by j2), mA unchanged 62.5 % on 4 (Q1 2, Q2 0, Q3 2, Q4 1 out of 8), agreement 7/7. So mA
goes from band 2 to 1, mB from 1 to 2, and mB's score moves by -25 points.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from core.actions import Action
from core.models import AuditLogEntry
from questions.errors import DomainError
from scoring.board.candidate import candidate_preview
from scoring.models import Grade, Judge
from scoring.runs.services.candidate import (
    candidate_adopt,
    candidate_clear,
    candidate_set,
    candidate_state,
)
from scoring.runs.services.panel import judge_panel_set, panel_state
from scoring.selectors import resolve_judges
from tests.factories import UserFactory
from tests.test_leaderboard import ORIGINAL_GRADES, build_tiny, run_json

pytestmark = pytest.mark.django_db


@pytest.fixture
def tiny(db):
    data = build_tiny()
    bench = data["benchmark"]
    judge_panel_set(benchmark=bench, members=[("j1", None), ("j2", None)])
    j1 = data["judges"]["j1"]
    j1.prompt_version = "v2"
    j1.save()
    rows = []
    for qid, per_model in ORIGINAL_GRADES.items():
        for model, (_, j2_grade) in per_model.items():
            grade = 0 if (qid, model) == ("Q1", "mB") else (j2_grade if j2_grade is not None else 2)
            rows.append(
                Grade(
                    response=data["responses"][(qid, model)],
                    judge=j1,
                    key_entry=data["entries"][qid],
                    grade=grade,
                    prompt_version="v2",
                )
            )
    Grade.objects.bulk_create(rows)
    bench.is_public = True
    bench.save()
    return data


def _scores(doc: dict) -> dict:
    return {m["model_id"]: (m["score"], m["n_counted"]) for m in doc["models"]}


PUBLISHED = {"mB": (75.0, 2), "mA": (62.5, 4)}
CANDIDATE = {"mA": (62.5, 4), "mB": (50.0, 3)}


def _boards(client) -> tuple[dict, dict, dict]:
    """The published figures three ways: the command, the signed-in API, the public site."""
    cli = run_json("leaderboard", "--edition", "original", "--no-cache")
    api = client.get(reverse("scoring:api-leaderboard", args=["tiny"]) + "?edition=original").json()
    public = client.get(
        reverse("public:leaderboard-json", args=["tiny"]) + "?edition=original"
    ).json()
    return cli, api, public


def test_a_candidate_changes_nothing_public_until_adopted_and_adopting_is_logged(tiny, client):
    admin = UserFactory(username="ada", roles=["admin"])
    client.force_login(admin)
    before = _boards(client)
    assert [_scores(d) for d in before] == [PUBLISHED] * 3

    candidate_set(benchmark=tiny["benchmark"], members=[("j1", "v2"), ("j2", None)], actor=admin)
    entry = AuditLogEntry.objects.get(action=Action.CANDIDATE_PANEL_SET)
    assert entry.actor == admin and entry.before == []
    assert entry.after == [
        {"judge": "j1", "prompt_version": "v2"},
        {"judge": "j2", "prompt_version": "v1"},
    ]
    during = _boards(client)
    assert [_scores(d) for d in during] == [PUBLISHED] * 3
    assert all(d["judge_set"] == "panel" for d in during)
    assert (
        not AuditLogEntry.objects.filter(action=Action.JUDGE_PANEL_SET).exclude(actor=None).exists()
    )

    cand = run_json("leaderboard", "--edition", "original", "--panel", "candidate", "--no-cache")
    assert _scores(cand) == CANDIDATE and cand["judge_set"] == "candidate"
    assert cand["agreement_rate"] == 1.0
    assert any("the candidate panel, not the benchmark's judge panel" in n for n in cand["notes"])

    after = candidate_adopt(benchmark=tiny["benchmark"], actor=admin)
    assert after == panel_state(tiny["benchmark"]) == entry.after
    assert candidate_state(tiny["benchmark"]) == []
    panel_set = AuditLogEntry.objects.filter(action=Action.JUDGE_PANEL_SET, actor=admin).get()
    assert panel_set.after == entry.after and panel_set.before[0]["prompt_version"] == "v1"
    assert (
        AuditLogEntry.objects.filter(action=Action.CANDIDATE_PANEL_ADOPT, actor=admin).count() == 1
    )
    adopted = _boards(client)
    assert [_scores(d) for d in adopted] == [CANDIDATE] * 3


def test_the_preview_says_which_models_move_which_bands_change_and_the_agreement(tiny):
    candidate_set(benchmark=tiny["benchmark"], members=[("j1", "v2"), ("j2", None)])
    preview = candidate_preview(tiny["original"])
    assert sorted(preview["models_moved"]) == ["mA", "mB"]
    moves = {m["model_id"]: m for m in preview["comparison"]["models"]}
    assert moves["mB"]["change"] == -25.0 and moves["mA"]["change"] == 0.0
    # ranks are shared ("=1") under both: four questions do not tell the two apart
    assert (moves["mA"]["rank_original"], moves["mA"]["rank_corrected"]) == ("=1", "=1")
    # bands: the gaps 75 -> 62.5 and 62.5 -> 50 (12.5 points) both exceed 1.5, so two
    # bands each, and the two models swap them
    changes = {
        c["model_id"]: (c["band_original"], c["band_corrected"])
        for c in preview["comparison"]["band_changes"]
    }
    assert changes == {"mA": (2, 1), "mB": (1, 2)}
    assert round(preview["published"]["agreement_rate"], 4) == round(6 / 7, 4)
    assert preview["candidate"]["agreement_rate"] == 1.0
    assert preview["candidate"]["figures_state"] == "complete"
    # no judge has a backend: nothing to grade, no call, no cost
    assert preview["cost"]["estimate"]["needed"] == 0
    assert preview["cost"]["spent"]["calls"] == 0


def test_judges_named_on_the_command_line_are_at_their_current_versions(tiny):
    bench = tiny["benchmark"]
    # j1 grades with v2 now: naming the panel's judges shows j1's v2 grades, not the pin
    asked = resolve_judges(bench, ["j1", "j2"])
    assert asked.kind == "requested"
    assert [(j.judge_id, j.prompt_version) for j in asked.judges] == [("j1", "v2"), ("j2", "v1")]
    doc = run_json("leaderboard", "--edition", "original", "--judges", "j1,j2", "--no-cache")
    assert _scores(doc) == CANDIDATE
    # naming the pinned versions is the panel itself
    assert resolve_judges(bench, ["j1@v1", "j2"]).kind == "panel"


def test_a_bad_candidate_is_refused_and_discarding_is_logged(tiny):
    bench = tiny["benchmark"]
    with pytest.raises(DomainError, match="is an auditor"):
        candidate_set(benchmark=bench, members=[("a1", None)])
    with pytest.raises(DomainError, match="no candidate panel to adopt"):
        candidate_adopt(benchmark=bench)
    candidate_set(benchmark=bench, members=[("j2", None)])
    assert candidate_clear(benchmark=bench) is True
    assert AuditLogEntry.objects.filter(action=Action.CANDIDATE_PANEL_CLEAR).count() == 1
    assert candidate_state(bench) == [] and panel_state(bench)[0]["prompt_version"] == "v1"


def test_panel_command_defines_and_adopts_a_candidate(tiny):
    UserFactory(username="ada", roles=["admin"])
    out = io.StringIO()
    call_command(
        "panel", "--benchmark", "tiny", "--candidate", "j1@v2,j2", "--format", "json", stdout=out
    )
    doc = json.loads(out.getvalue())
    assert doc["changed"] is False and doc["candidate_changed"] is True
    assert doc["candidate"][0] == {"judge": "j1", "prompt_version": "v2"}
    out = io.StringIO()
    call_command("panel", "--benchmark", "tiny", "--adopt-candidate", "--user", "ada", stdout=out)
    assert "the judge panel now j1@v2, j2@v1" in out.getvalue()


def test_pages_and_api_are_for_editors_and_admins_and_only_admins_change_it(tiny, client):
    candidate_set(benchmark=tiny["benchmark"], members=[("j1", "v2"), ("j2", None)])
    url = reverse("scoring:candidate", args=["tiny"]) + "?edition=original"
    api = reverse("scoring:api-candidate", args=["tiny"]) + "?edition=original"
    action = reverse("scoring:candidate-action", args=["tiny"])
    client.force_login(UserFactory(username="rita", roles=["reviewer"]))
    assert client.get(url).status_code == 403 and client.get(api).status_code == 403
    client.force_login(UserFactory(username="ed", roles=["editor"]))
    page = client.get(url).content.decode()
    assert "2 models would move (" in page and "Adopt as the judge panel" not in page
    assert client.get(api).json()["models_moved"] == ["mA", "mB"]
    assert client.post(action, {"action": "adopt"}).status_code == 403
    assert panel_state(tiny["benchmark"])[0]["prompt_version"] == "v1"
    client.force_login(UserFactory(username="ada", roles=["admin"]))
    assert "Adopt as the judge panel" in client.get(url).content.decode()
    assert client.post(action, {"action": "adopt", "edition": "original"}).status_code == 303
    assert panel_state(tiny["benchmark"])[0]["prompt_version"] == "v2"
    nav = client.get(reverse("home")).content.decode()
    assert reverse("scoring:candidate-index") in nav and "Candidate panel" in nav


@pytest.mark.django_db(transaction=True)
def test_a_budget_stopped_rescore_for_a_new_prompt_leaves_one_state(demo_bundle_path):
    """The demo: ref-strict moves to judge-v2 and a candidate with it is re-scored under a
    100-token cap, which stops the run before its first call (each call needs ~1,500). The
    judge panel's board (judge-v1) owes nothing: complete, not stale. The candidate's
    board lacks every ref-strict grade (276 responses) and is incomplete, naming the run
    that stopped: never `complete: true` beside `stale: true`."""
    from questions.models import Benchmark

    call_command("import_bundle", str(demo_bundle_path), verbosity=0)
    bench = Benchmark.objects.get()
    Judge.objects.filter(benchmark=bench, judge_id="ref-strict").update(prompt_version="judge-v2")
    candidate_set(benchmark=bench, members=[("ref-lenient", None), ("ref-strict", None)])
    out = io.StringIO()
    call_command(
        "rescore",
        "--panel",
        "candidate",
        "--budget-tokens",
        "100",
        "--format",
        "json",
        stdout=out,
        stderr=io.StringIO(),
    )
    assert json.loads(out.getvalue())["status"] == "stopped"
    published = run_json("leaderboard", "--no-cache")
    assert (published["complete"], published["stale"]) == (True, False)
    assert published["figures_state"] == "complete"
    cand = run_json("leaderboard", "--panel", "candidate", "--no-cache")
    assert (cand["complete"], cand["stale"], cand["figures_state"]) == (False, True, "incomplete")
    words = cand["figures_state_words"]
    assert words.startswith("Incomplete: 276 responses of scored questions lack a grade")
    assert "stopped at its budget" in words
    for doc in (published, cand):
        assert not (doc["complete"] and doc["stale"])


@pytest.mark.django_db(transaction=True)
def test_the_page_rescores_for_the_candidate_with_a_budget_and_skips_a_stale_pin(
    demo_bundle_path, client
):
    """On the demo, ref-strict grades with judge-v2 now. A candidate pinning it at judge-v1
    cannot be re-scored for it (a run grades at the current version): it is skipped with a
    note. Pinned at judge-v2, the page shows the estimate of its 276 ungraded responses and
    a re-score started from the page carries its token cap and stops at it."""
    from questions.models import Benchmark
    from scoring.models import ScoringRun
    from scoring.runs.services.candidate import candidate_graders

    call_command("import_bundle", str(demo_bundle_path), verbosity=0)
    bench = Benchmark.objects.get()
    Judge.objects.filter(benchmark=bench, judge_id="ref-strict").update(prompt_version="judge-v2")
    candidate_set(benchmark=bench, members=[("ref-lenient", None), ("ref-strict", "judge-v1")])
    graders, notes = candidate_graders(bench)
    assert [j.judge_id for j in graders] == ["ref-lenient"]
    assert notes == [
        "ref-strict: skipped, the candidate pins prompt judge-v1 but the judge grades with "
        "judge-v2 now (a run grades at the judge's current prompt version)"
    ]

    client.force_login(UserFactory(username="ada", roles=["admin"]))
    action = reverse("scoring:candidate-action", args=[bench.name])
    client.post(action, {"action": "set", "spec": "ref-lenient,ref-strict@judge-v2"})
    assert candidate_state(bench)[1] == {"judge": "ref-strict", "prompt_version": "judge-v2"}
    preview = candidate_preview(bench.editions.get(name="original"))
    assert preview["cost"]["estimate"]["judges"][1]["pairs"] == 276
    page = client.get(reverse("scoring:candidate", args=[bench.name])).content.decode()
    assert preview["cost"]["estimate"]["summary"] in page
    response = client.post(action, {"action": "rescore", "budget_tokens": "100"})
    run = ScoringRun.objects.get()
    assert response.status_code == 303 and response["Location"].endswith(f"/runs/{run.pk}/")
    assert (run.status, run.budget_tokens, run.graded) == ("stopped", 100, 0)
    assert sorted(run.judges.values_list("judge_id", flat=True)) == ["ref-lenient", "ref-strict"]


def test_agreement_reads_the_candidate_panel_when_asked(tiny):
    """`agreement --panel candidate` (issue 31): the pairs of j1@v2 and j2@v1, not the
    judge panel's. j1@v2 grades as j2 did on the 7 responses both graded (module
    docstring): 7/7 exact agreement against the panel's 6/7, confusion all on the diagonal
    (j1@v2 rows: Q1 mA 2, Q1 mB 0, Q2 0 and 1, Q3 mA 2, Q4 1 and 2)."""
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="has no candidate panel"):
        run_json("agreement", "--edition", "original", "--panel", "candidate")
    candidate_set(benchmark=tiny["benchmark"], members=[("j1", "v2"), ("j2", None)])
    published = run_json("agreement", "--edition", "original")
    assert published["judge_set"] == "panel"
    assert published["pairs"][0]["exact_agreement"] == round(6 / 7, 4)
    cand = run_json("agreement", "--edition", "original", "--panel", "candidate")
    assert cand["judge_set"] == "candidate"
    assert cand["panel"] == [
        {"judge": "j1", "prompt_version": "v2"},
        {"judge": "j2", "prompt_version": "v1"},
    ]
    [pair] = cand["pairs"]
    assert pair["n"] == 7 and pair["exact_agreement"] == 1.0
    assert pair["confusion"] == [[2, 0, 0], [0, 2, 0], [0, 0, 3]]
    assert any("the candidate panel, not the benchmark's judge panel" in n for n in cand["notes"])
    assert cand["human_agreement"] is None  # no blind sample drawn
    with pytest.raises(CommandError, match="give no --judges"):
        run_json("agreement", "--panel", "candidate", "--judges", "j1,j2")
