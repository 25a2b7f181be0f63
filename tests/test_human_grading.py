"""Judges against people (issue 31 item 2): the blind sample, its weights and its figures.

Hand computations are worked in the comments; sklearn's cohen_kappa_score on replicated
rows is the independent check of the weighted kappa. The demo bundle is the worked
benchmark for the pages, the report, `agreement --format json` and the bundle round trip.
"""

from __future__ import annotations

import json
import shutil
from io import StringIO

import numpy as np
import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from sklearn.metrics import cohen_kappa_score

from core.models import AuditLogEntry
from engine.human import (
    HumanUnits,
    _Stats,
    draw_sample,
    human_agreement,
    inverse_probability_weights,
    weighted_kappa,
    weighted_kappas,
)
from interchange.bundles import BundleError, import_bundle
from questions.models import Benchmark
from tests.conftest import DEMO_BUNDLE

BENCHMARK = "uk-construction-demo"


# ------------------------------------------------------------------------- the engine
def _small_table() -> HumanUnits:
    """Four sampled responses, one judge, one person each.

    stratum disagree: N=2, n=2 -> weight 1; stratum rest: N=10, n=2 -> weight 5.
    i0 (disagree, model A): judge 0, person 1     i1 (disagree, A): judge 2, person 2
    i2 (rest, model B):     judge 1, person 1     i3 (rest, B):     judge 0, person 0
    """
    strata = ["disagree", "disagree", "rest", "rest"]
    weight = inverse_probability_weights(
        strata, {"disagree": 2, "rest": 10}, {"disagree": 2, "rest": 2}
    )
    return HumanUnits(
        item=np.arange(4),
        human=np.array([1.0, 2.0, 1.0, 0.0]),
        rater=["ann"] * 4,
        weight=weight,
        stratum=strata,
        model=["A", "A", "B", "B"],
        judges=np.array([[0.0], [2.0], [1.0], [0.0]]),
        judge_ids=["j1"],
        scale=[0, 1, 2],
    )


def test_weights_and_weighted_figures_equal_a_hand_computation():
    u = _small_table()
    assert u.weight.tolist() == [1.0, 1.0, 5.0, 5.0]
    result = human_agreement(u, n_bootstrap=200, seed=1).to_dict()
    judge = result["judges"][0]
    # Exact agreement: (0 + 1 + 5 + 5) / 12.
    assert judge["exact_agreement"]["value"] == pytest.approx(round(11 / 12, 4))
    # Weighted confusion (rows judge, columns person): [[5, 1, 0], [0, 5, 0], [0, 0, 1]];
    # margins judge [6, 5, 1], person [5, 6, 1] of 12. Quadratic disagreement (i-j)^2:
    # observed 1*1/12; expected sum (i-j)^2 r_i c_j / 144 = (36+24+25+5+20+6)/144 = 116/144;
    # kappa = 1 - (1/12) / (116/144) = 1 - 12/116 = 26/29.
    assert judge["kappa"]["value"] == pytest.approx(round(26 / 29, 4))
    # Unweighted, the same four rows give 0.8 (margins [2,1,1] and [1,2,1]): the weights matter.
    assert cohen_kappa_score([0, 2, 1, 0], [1, 2, 1, 0], weights="quadratic") == pytest.approx(0.8)
    assert judge["confusion_weighted"] == [[5.0, 1.0, 0.0], [0.0, 5.0, 0.0], [0.0, 0.0, 1.0]]
    assert judge["confusion"] == [[1, 1, 0], [0, 1, 0], [0, 0, 1]]
    models = {m["model_id"]: m for m in result["models"]}
    # Model A: people (1*50 + 1*100)/2 = 75; agreement-only (0 + 100)/2 = 50; difference -25.
    assert models["A"]["score_people"]["value"] == 75.0
    assert models["A"]["score_agreement_only"] == 50.0
    assert models["A"]["difference"]["value"] == -25.0
    # Model B: people (5*50 + 5*0)/10 = 25 = agreement-only.
    assert models["B"]["score_people"]["value"] == 25.0
    assert models["B"]["difference"]["value"] == 0.0
    assert result["kappa_weights"] == "quadratic"


def test_weighted_kappa_equals_sklearn_on_replicated_rows():
    rng = np.random.default_rng(7)
    a = rng.integers(0, 3, 40).astype(float)
    b = np.clip(a + rng.integers(-1, 2, 40), 0, 2)
    w = rng.integers(1, 6, 40).astype(float)
    mine = weighted_kappa(a, b, w, [0, 1, 2])
    # Integer weights = each row repeated that many times (an independent computation).
    rep = np.repeat(np.arange(40), w.astype(int))
    theirs = cohen_kappa_score(a[rep], b[rep], labels=[0, 1, 2], weights="quadratic")
    assert mine == pytest.approx(theirs, abs=1e-12)
    linear = cohen_kappa_score(a[rep], b[rep], labels=[0, 1, 2], weights="linear")
    assert weighted_kappa(a, b, w, [0, 1, 2], weights="linear") == pytest.approx(linear)
    assert weighted_kappa(a, b, np.zeros(40), [0, 1, 2]) is None


def _kappa_cases(rng):
    """Random (a, b, W, scale) cases for the vectorised kappa, the degenerate ones included."""
    for case in range(120):
        k = int(rng.integers(2, 6))
        scale = sorted(rng.choice(10, k, replace=False).tolist())
        n = int(rng.integers(0, 40))
        a = rng.integers(0, k, n)
        kind = case % 6
        if kind == 0:  # one category only, in both
            a = np.full(n, rng.integers(0, k))
            b = a.copy()
        elif kind == 1:  # perfect agreement
            b = a.copy()
        elif kind == 2:  # each vector in one (different) category
            a = np.full(n, 0)
            b = np.full(n, k - 1)
        else:
            b = np.clip(a + rng.integers(-1, 2, n), 0, k - 1)
        # Rows of weights as a resample makes them: bootstrap counts times N_h/n_h, with
        # whole strata drawn zero times (empty strata) and an all-zero row.
        counts = rng.multinomial(n, np.ones(n) / n, size=4) if n else np.zeros((4, 0))
        strata = rng.integers(0, 2, n)
        counts[1, strata == 0] = 0
        counts[2, strata == 1] = 0
        counts[3] = 0
        ipw = np.where(strata == 0, 1.0, rng.uniform(1, 20))
        yield a, b, counts * ipw, scale


def test_the_resampled_kappas_equal_sklearns_to_1e12():
    """engine.human.weighted_kappas (all resamples at once) against cohen_kappa_score called
    row by row (engine.human.weighted_kappa): equal to 1e-12, undefined in the same rows."""
    rng = np.random.default_rng(2026)
    undefined = defined = 0
    for a, b, w, scale in _kappa_cases(rng):
        values = np.array(scale, dtype=float)
        for weights in ("quadratic", "linear")[: 1 + (len(a) % 3 == 0)]:
            mine = weighted_kappas(a, b, w, len(scale), weights=weights)
            assert mine.shape == (w.shape[0],)
            for row, value in zip(w, mine, strict=True):
                theirs = weighted_kappa(values[a], values[b], row, scale, weights=weights)
                if theirs is None:
                    assert np.isnan(value)
                    undefined += 1
                else:
                    assert abs(value - theirs) <= 1e-12, (value, theirs)
                    defined += 1
    assert undefined > 150 and defined > 250  # both branches are exercised


def test_every_resampled_statistic_equals_the_sklearn_evaluation():
    """_Stats.resampled (numpy kappas) against _Stats.evaluate with sklearn's kappa for each
    resample, on a sample with pairs of people, null judge grades and resamples that miss
    a stratum or a model: every statistic equal to 1e-12, NaN in the same places."""
    rng = np.random.default_rng(31)
    n = 24
    judges = rng.integers(1, 5, (n, 2)).astype(float)
    judges[rng.random((n, 2)) < 0.1] = np.nan
    human = np.where(rng.random(n) < 0.6, np.nan_to_num(judges[:, 0], nan=1), 3.0)
    strata = ["disagree"] * 8 + ["rest"] * 16
    again = np.arange(0, n, 3)
    u = HumanUnits(
        item=np.concatenate([np.arange(n), again]),
        human=np.concatenate([human, np.where(rng.random(again.size) < 0.7, human[again], 2)]),
        rater=["ann"] * n + ["bob"] * again.size,
        weight=inverse_probability_weights(
            strata, {"disagree": 30, "rest": 300}, {"disagree": 8, "rest": 16}
        ),
        stratum=strata,
        model=["A", "B", "C"] * 8,
        judges=judges,
        judge_ids=["j1", "j2"],
        scale=[1, 2, 3, 4],
    )
    stats = _Stats(u)
    counts = rng.multinomial(n, np.ones(n) / n, size=40).astype(float)
    counts[:5, :8] = 0  # no response of the disagreement stratum
    counts[5:10, 8:] = 0
    counts[10:15, 0::3] = 0  # model A not drawn
    counts[15] = 0
    mine = stats.resampled(counts)
    theirs = stats.evaluate(counts, kappas=stats._sklearn)
    assert mine.shape == theirs.shape == (len(stats.names), 40)
    assert np.array_equal(np.isnan(mine), np.isnan(theirs))
    assert np.isnan(mine).any() and not np.isnan(mine).all()
    assert np.nanmax(np.abs(mine - theirs)) <= 1e-12


def test_the_draw_is_stratified_seeded_and_shuffled():
    disagree = np.array([True] * 10 + [False] * 90)
    one = draw_sample(disagree, 20, seed=3, disagree_share=0.5)
    again = draw_sample(disagree, 20, seed=3, disagree_share=0.5)
    other = draw_sample(disagree, 20, seed=4, disagree_share=0.5)
    assert one == again and one.order != other.order
    assert one.population == {"disagree": 10, "rest": 90}
    assert one.drawn == {"disagree": 10, "rest": 10}
    assert sorted(s for s in one.strata) == ["disagree"] * 10 + ["rest"] * 10
    assert all(disagree[i] == (s == "disagree") for i, s in zip(one.order, one.strata, strict=True))
    assert len(set(one.order)) == 20
    # The strata are mixed: position says nothing of the stratum.
    assert one.strata[:10] != ["disagree"] * 10
    # A stratum too small hands the rest of its share to the other.
    small = draw_sample(disagree, 30, seed=3, disagree_share=0.8)
    assert small.drawn == {"disagree": 10, "rest": 20}
    # Over-represented: 10 of 20 drawn where 10 of 100 disagree; weights undo it.
    w = inverse_probability_weights(one.strata, one.population, one.drawn)
    assert sorted(set(w.tolist())) == [1.0, 9.0] and w.sum() == 100
    with pytest.raises(ValueError):
        draw_sample(disagree, 0, seed=1)


def test_the_bootstrap_interval_is_seeded_and_holds_the_estimate():
    rng = np.random.default_rng(11)
    n = 30
    judges = rng.integers(0, 3, (n, 2)).astype(float)
    human = np.where(rng.random(n) < 0.7, judges[:, 0], rng.integers(0, 3, n))
    strata = ["disagree"] * 10 + ["rest"] * 20
    u = HumanUnits(
        item=np.arange(n),
        human=human.astype(float),
        rater=["ann"] * n,
        weight=inverse_probability_weights(
            strata, {"disagree": 20, "rest": 180}, {"disagree": 10, "rest": 20}
        ),
        stratum=strata,
        model=["A", "B", "C"] * 10,
        judges=judges,
        judge_ids=["j1", "j2"],
        scale=[0, 1, 2],
    )
    one = human_agreement(u, n_bootstrap=300, seed=5).to_dict()
    two = human_agreement(u, n_bootstrap=300, seed=5).to_dict()
    assert one == two
    for j in one["judges"]:
        k = j["kappa"]
        assert k["low"] <= k["value"] <= k["high"] and k["width"] > 0.1
    assert one["people"]["n_responses"] == 0 and one["people"]["kappa"]["value"] is None


def test_a_stratum_of_one_graded_response_is_in_every_resample():
    """The first grades often leave a stratum with one graded response; scipy refuses a
    sample of one, so the engine keeps it in every resample once (all a resample of one
    can be). Hand check: the disagreement response (weight 5/1) is the judge's only miss,
    the three of the rest (weight 50/3 each) match, so every resample's exact agreement
    is 50 / (50 + 5) = 10/11 and so is its interval."""
    strata = ["disagree", "rest", "rest", "rest"]
    u = HumanUnits(
        item=np.arange(4),
        human=np.array([2.0, 1.0, 2.0, 1.0]),
        rater=["ann"] * 4,
        weight=inverse_probability_weights(
            strata, {"disagree": 5, "rest": 50}, {"disagree": 1, "rest": 3}
        ),
        stratum=strata,
        model=["A"] * 4,
        judges=np.array([[0.0], [1.0], [2.0], [1.0]]),
        judge_ids=["j1"],
        scale=[0, 1, 2],
    )
    exact = human_agreement(u, n_bootstrap=200, seed=1).to_dict()["judges"][0]["exact_agreement"]
    assert exact["value"] == exact["low"] == exact["high"] == round(10 / 11, 4)
    # Two responses, one per stratum: every resample is the sample; no interval.
    two = HumanUnits(
        item=np.arange(2),
        human=u.human[:2],
        rater=["ann"] * 2,
        weight=np.array([5.0, 50.0]),
        stratum=strata[:2],
        model=["A"] * 2,
        judges=u.judges[:2],
        judge_ids=["j1"],
        scale=[0, 1, 2],
    )
    exact = human_agreement(two, n_bootstrap=200, seed=1).to_dict()["judges"][0]["exact_agreement"]
    assert exact["value"] == round(50 / 55, 4) and exact["low"] is exact["high"] is None


# --------------------------------------------------------------------- the worked demo
@pytest.fixture
def demo(db):
    call_command("import_bundle", str(DEMO_BUNDLE), verbosity=0)
    benchmark = Benchmark.objects.get(name=BENCHMARK)
    users = {}
    for name, role in (("hg-editor", "editor"), ("hg-ann", "reviewer"), ("hg-bob", "reviewer")):
        users[name] = User.objects.create_user(name, password="pw-human-grade-9")
        users[name].groups.add(Group.objects.get_or_create(name=role)[0])
    return benchmark, users


def _grade_thirty(benchmark, users):
    """Draw 30 and grade them: ann all 30 (the judges' first grade, or 1), bob the first 8."""
    from scoring.board.human import human_grade_record, human_sample_draw

    sample = human_sample_draw(benchmark, actor=users["hg-editor"], size=30, seed=2)
    rng = np.random.default_rng(0)
    for item in sample.items.order_by("position"):
        grade = int(rng.integers(0, 3)) if rng.random() < 0.3 else _judge_grade(item)
        human_grade_record(item, reviewer=users["hg-ann"], grade=grade, note="")
        if item.position <= 8:
            human_grade_record(item, reviewer=users["hg-bob"], grade=grade, note="same")
    return sample


def _judge_grade(item) -> int:
    from scoring.models import Grade

    g = (
        Grade.objects.filter(response=item.response, key_entry=item.key_entry)
        .exclude(grade=None)
        .first()
    )
    return g.grade if g else 1


def test_after_thirty_blind_grades_the_report_shows_each_judges_kappa_with_its_interval(
    demo, client
):
    benchmark, users = demo
    sample = _grade_thirty(benchmark, users)
    assert sample.items.count() == 30
    assert sample.items.filter(stratum="disagree").count() > 0
    from questions.selectors import latest_published_edition
    from scoring.board.report import build_report

    doc = build_report(latest_published_edition(benchmark))
    human = doc["human_agreement"]
    assert human["n_grades"] == 38
    # The figures with the default resamples and seed (SNAGLIST_BOOTSTRAP 1,000,
    # SNAGLIST_BOOTSTRAP_SEED 20240301), recorded from the code that called
    # cohen_kappa_score once per resample (main at d1d5a2c): the vectorised bootstrap
    # must give the same numbers. People copy each other here, so their kappa is 1.
    figures = human["figures"]
    assert (figures["n_bootstrap"], figures["seed"]) == (1000, 20240301)
    pinned = {
        "ref-lenient": ((0.7527, 0.3738, 0.9717), (0.857, 0.686, 0.9807)),
        "ref-strict": ((0.7203, 0.3455, 0.9171), (0.7507, 0.5797, 0.8744)),
    }
    for j in figures["judges"]:
        kappa, exact = pinned[j["judge"]]
        assert (j["kappa"]["value"], j["kappa"]["low"], j["kappa"]["high"]) == kappa
        e = j["exact_agreement"]
        assert (e["value"], e["low"], e["high"]) == exact
    people = figures["people"]["kappa"]
    assert (people["value"], people["low"], people["high"]) == (1.0, 1.0, 1.0)
    assert "people's kappa with each other: undefined in 18 of 1000 resamples" in " ".join(
        figures["notes"]
    )
    assert len(human["figures"]["judges"]) == len(doc["judges"]) >= 2
    for j in human["figures"]["judges"]:
        assert j["kappa"]["value"] is not None
        assert j["kappa"]["low"] <= j["kappa"]["value"] <= j["kappa"]["high"]
    assert human["figures"]["people"]["n_responses"] == 8
    assert any("wide" in s for s in human["sentences"])
    from scoring.board.render import report_markdown

    md = report_markdown(doc)
    assert "## Judges against people" in md and "| people against people | " in md
    client.force_login(users["hg-ann"])
    html = client.get(f"/report/{BENCHMARK}/").content.decode()
    assert "Judges against people" in html and " wide" in html
    # Audit log: one draw, 38 grades.
    assert AuditLogEntry.objects.filter(action="human_sample.draw").count() == 1
    assert AuditLogEntry.objects.filter(action="human_grade.record").count() == 38
    # agreement --format json: the old keys and the new one.
    out = StringIO()
    call_command("agreement", benchmark=BENCHMARK, format="json", stdout=out)
    agreement = json.loads(out.getvalue())
    assert {"judges", "pairs", "scale", "notes", "human_agreement"} <= set(agreement)
    assert agreement["human_agreement"]["figures"]["judges"] == human["figures"]["judges"]


def test_the_blind_page_never_shows_a_judges_grade(demo, client):
    from scoring.board.human import human_sample_draw
    from scoring.models import Grade

    benchmark, users = demo
    sample = human_sample_draw(benchmark, actor=users["hg-editor"], size=12, seed=1)
    client.force_login(users["hg-ann"])
    for item in sample.items.all():
        html = client.get(f"/review/blind/{sample.pk}/{item.position}/").content.decode()
        assert item.response.question.question_id in html
        grades = Grade.objects.filter(response=item.response).select_related("judge")
        assert grades.exists()
        for g in grades:
            assert g.judge.judge_id not in html
            if g.rationale.strip():
                assert g.rationale.strip()[:40] not in html
        for word in ("disagree", "Judges agree", "rationale", "flagged", "grades-table"):
            assert word not in html, word
    # Posting a grade moves on and is logged; a grade off the scale is refused.
    first = sample.items.get(position=1)
    reply = client.post(f"/review/blind/{sample.pk}/1/", {"grade": "2", "note": "fine"})
    assert reply.status_code == 302
    assert first.grades.get().grade == 2
    assert client.post(f"/review/blind/{sample.pk}/2/", {"grade": "7"}).status_code == 422
    assert "Blind grading" in client.get("/").content.decode()


def test_human_grades_travel_in_bundles_and_bad_rows_refuse_the_bundle(demo, tmp_path):
    from questions.benchmark_delete import delete_benchmark
    from scoring.human_models import HumanGrade

    benchmark, users = demo
    _grade_thirty(benchmark, users)

    def dump():
        return sorted(
            HumanGrade.objects.filter(item__sample__benchmark__name=BENCHMARK).values_list(
                "item__sample__name",
                "item__sample__seed",
                "item__position",
                "item__stratum",
                "item__stratum_population",
                "item__stratum_drawn",
                "item__response__question__question_id",
                "item__response__model__model_id",
                "item__key_entry__edition__name",
                "reviewer__username",
                "grade",
                "note",
                "created_at",
            )
        )

    before = dump()
    backup = tmp_path / "backup"
    call_command("export_bundle", str(backup), benchmark=BENCHMARK, verbosity=0)
    lines = (backup / "human_grades.jsonl").read_text().splitlines()
    assert len(lines) == 30
    delete_benchmark(Benchmark.objects.get(name=BENCHMARK))
    assert not HumanGrade.objects.exists()
    result = import_bundle(backup)
    assert result.created["human grades"] == 38
    assert dump() == before
    # Importing the same bundle again adds nothing.
    again = import_bundle(backup)
    assert again.created.get("human grades", 0) == 0 and dump() == before
    # Bad rows: every problem named FILE:LINE: FIELD, and nothing written.
    bad = tmp_path / "bad"
    shutil.copytree(backup, bad)
    rows = [json.loads(x) for x in lines]
    rows[1]["stratum"] = "maybe"
    rows[2]["grades"][0]["created_at"] = "yesterday"
    rows[3]["question_id"] = "Q999"
    (bad / "human_grades.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    delete_benchmark(Benchmark.objects.get(name=BENCHMARK))
    with pytest.raises(BundleError) as caught:
        import_bundle(bad)
    problems = caught.value.problems
    for prefix in (
        "human_grades.jsonl:2: stratum:",
        "human_grades.jsonl:3: grades[0].created_at:",
        "human_grades.jsonl:4: question_id:",
    ):
        assert any(p.startswith(prefix) for p in problems), (prefix, problems)
    assert not Benchmark.objects.filter(name=BENCHMARK).exists()


def test_the_public_site_shows_judges_against_people_and_its_etag_follows_the_grades(demo, client):
    from questions.services import benchmark_publicity_set
    from scoring.board.human import human_grade_record

    benchmark, users = demo
    admin = User.objects.create_user("hg-admin")
    admin.groups.add(Group.objects.get_or_create(name="admin")[0])
    benchmark_publicity_set(benchmark=benchmark, user=admin, public=True, credit_reviewers=False)
    sample = _grade_thirty(benchmark, users)
    url = f"/public/{BENCHMARK}/report/"
    first = client.get(url)
    html = first.content.decode()
    assert first.status_code == 200 and "Judges against people" in html
    assert "/review/blind/" not in html and "hg-ann" not in html
    etag = first["ETag"]
    assert client.get(url, HTTP_IF_NONE_MATCH=etag).status_code == 304
    # A changed grade changes the page: no stale 304.
    item = sample.items.get(position=30)
    old = item.grades.get(reviewer=users["hg-ann"]).grade
    human_grade_record(item, reviewer=users["hg-ann"], grade=(old + 1) % 3)
    assert client.get(url, HTTP_IF_NONE_MATCH=etag).status_code == 200
