"""Leaderboard and report pages, downloads and the scoring API on the `tiny` fixture."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User

from tests.test_leaderboard import _private_cache, build_tiny  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _write_up_ranks(settings):
    """These tests check how the pages render the hand-checked ranks of `tiny` (2-4
    counted responses a model). Issue 21's few-counted rule (default 30) would tie every
    model there; it has its own tests (test_engine_support, test_leaderboard)."""
    settings.SNAGLIST_MIN_COUNTED = 0


@pytest.fixture
def tiny(db):
    return build_tiny()


@pytest.fixture
def member(db):
    return User.objects.create_user("viewer", password="x-very-long-pass-1")


@pytest.fixture
def signed_in(client, member):
    client.force_login(member)
    return client


# ----------------------------------------------------------------------------- pages
def test_index_redirects_to_the_only_benchmark(signed_in, tiny):
    response = signed_in.get("/leaderboard/")
    assert response.status_code == 302 and response["Location"] == "/leaderboard/tiny/"
    response = signed_in.get("/report/")
    assert response.status_code == 302 and response["Location"] == "/report/tiny/"


def test_index_lists_benchmarks_when_several(signed_in, tiny):
    build_tiny("tiny-two")
    body = signed_in.get("/leaderboard/").content.decode()
    assert "/leaderboard/tiny/" in body and "/leaderboard/tiny-two/" in body


def test_anonymous_is_sent_to_login(client, tiny):
    response = client.get("/leaderboard/tiny/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_leaderboard_page_shows_bands_interval_bars_and_banding(signed_in, tiny):
    response = signed_in.get("/leaderboard/tiny/?edition=original")
    assert response.status_code == 200
    body = response.content.decode()
    assert "gap bands, threshold 1.5 points" in body
    assert "not findings" in body
    assert body.count('class="ci-bar"') == 2
    assert "75.0" in body and "62.5" in body
    assert "85.7%" in body  # agreement 6/7
    assert "Cohen's kappa" in body and "Krippendorff" in body
    # heat table: categories c1 and c2, headed by their names (issue 18), ids in the title
    assert "heat-table" in body and 'title="c1">Category c1<' in body
    assert 'title="c2">Category c2<' in body
    assert response["Vary"] and "HX-Request" in response["Vary"]


def test_edition_switch_returns_fragment_for_htmx(signed_in, tiny):
    response = signed_in.get("/leaderboard/tiny/?edition=original", HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body and 'id="edition-select"' in body
    assert 'hx-push-url="true"' in body


def test_edition_switch_has_plain_link_fallback(signed_in, tiny):
    body = signed_in.get("/leaderboard/tiny/").content.decode()
    assert 'href="/leaderboard/tiny/?edition=original"' in body
    assert 'href="/leaderboard/tiny/?edition=corrected-1"' in body


def test_side_by_side_comparison_shows_moves(signed_in, tiny):
    body = signed_in.get("/leaderboard/tiny/?edition=corrected-1&compare=original").content.decode()
    assert "original vs corrected-1" in body
    assert "▲ 1" in body and "▼ 1" in body
    assert "Kendall" in body and "Top 3 unchanged" in body


def test_one_judge_agreement_panel_says_it_needs_two(signed_in, tiny):
    from scoring.models import Judge

    Judge.objects.filter(judge_id="j2").update(active=False)
    body = signed_in.get("/leaderboard/tiny/?edition=original").content.decode()
    assert "Agreement needs two judges." in body


def test_unknown_edition_is_404(signed_in, tiny):
    assert signed_in.get("/leaderboard/tiny/?edition=nope").status_code == 404
    assert signed_in.get("/leaderboard/nope/").status_code == 404


def test_leaderboard_page_query_count_is_bounded(signed_in, tiny, django_assert_max_num_queries):
    signed_in.get("/leaderboard/tiny/?edition=corrected-1&compare=original")  # warm the cache
    # 23 (was 22): the cached board's data version also counts responses (issue 21), once
    # per edition shown; 24: the category table's real names, one query (issue 18). Each is
    # one query whatever the benchmark's size.
    with django_assert_max_num_queries(24):
        response = signed_in.get("/leaderboard/tiny/?edition=corrected-1&compare=original")
    assert response.status_code == 200


def test_leaderboard_page_cold_query_count_is_bounded(
    signed_in, tiny, django_assert_max_num_queries
):
    with django_assert_max_num_queries(40):
        response = signed_in.get("/leaderboard/tiny/?edition=corrected-1&compare=original")
    assert response.status_code == 200


def test_csv_and_json_downloads(signed_in, tiny):
    response = signed_in.get("/leaderboard/tiny/leaderboard.csv?edition=original")
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    lines = response.content.decode().splitlines()
    assert lines[1].startswith("1,1,mB,75.0,")
    response = signed_in.get("/leaderboard/tiny/leaderboard.json?edition=original")
    doc = json.loads(response.content)
    assert doc["edition"] == "original" and doc["models"][0]["model_id"] == "mB"
    assert doc["agreement"]["pairs"][0]["n"] == 7


def test_report_page_defaults_to_comparing_with_the_parent(signed_in, tiny):
    body = signed_in.get("/report/tiny/").content.decode()
    assert "compared with <strong>original</strong>" in body
    assert "Single-auditor flags sent to review" in body
    # the reason in words on the page (the JSON and Markdown keep the code factually_wrong)
    assert "Q2" in body and "<td>Factually wrong</td>" in body


def test_report_page_without_comparison(signed_in, tiny):
    body = signed_in.get("/report/tiny/?edition=corrected-1&compare=").content.decode()
    assert "no comparison edition" in body
    assert "Grade changes per corrected question" not in body


def test_report_page_query_count_is_bounded(signed_in, tiny, django_assert_max_num_queries):
    signed_in.get("/report/tiny/")
    # 50 (was 45): the report's new figures, one query each whatever the size: the judge
    # calls' cost per judge and the edition's runs (issue 20, three) and the shortlist beside
    # the flags still standing (issue 21, two).
    with django_assert_max_num_queries(50):
        assert signed_in.get("/report/tiny/").status_code == 200


def test_report_downloads(signed_in, tiny):
    md = signed_in.get("/report/tiny/report.md?edition=corrected-1&compare=original")
    assert md["Content-Type"].startswith("text/markdown")
    assert md.content.decode().startswith("# Methodology report: tiny")
    doc = json.loads(signed_in.get("/report/tiny/report.json?edition=original&compare=").content)
    assert doc["edition"] == "original" and doc["compare_edition"] is None
    assert doc["responses_counted"] == 6


# ----------------------------------------------------------------------------- API
def test_api_requires_authentication(client, tiny):
    for url in (
        "/api/scoring/tiny/leaderboard/",
        "/api/scoring/tiny/agreement/",
        "/api/scoring/tiny/report/",
    ):
        assert client.get(url).status_code in (401, 403)


def test_api_leaderboard_values(signed_in, tiny):
    response = signed_in.get("/api/scoring/tiny/leaderboard/?edition=original&bootstrap=100")
    assert response.status_code == 200
    doc = response.json()
    assert doc["edition"] == "original" and doc["judges"] == ["j1", "j2"]
    assert doc["n_bootstrap"] == 100
    assert [(m["model_id"], m["score"], m["rank"]) for m in doc["models"]] == [
        ("mB", 75.0, "1"),
        ("mA", 62.5, "2"),
    ]


def test_api_leaderboard_rejects_bad_parameters(signed_in, tiny):
    assert signed_in.get("/api/scoring/tiny/leaderboard/?banding=zigzag").status_code == 400
    assert signed_in.get("/api/scoring/tiny/leaderboard/?edition=nope").status_code == 404
    negative = signed_in.get("/api/scoring/tiny/leaderboard/?seed=-1")
    assert negative.status_code == 400 and "seed" in negative.json()


def test_api_agreement_and_report(signed_in, tiny):
    ag = signed_in.get("/api/scoring/tiny/agreement/?edition=original").json()
    assert ag["pairs"][0]["exact_agreement"] == round(6 / 7, 4)
    rep = signed_in.get("/api/scoring/tiny/report/?edition=corrected-1&compare=original").json()
    assert rep["corrected"] == 1 and rep["top3_unchanged"] is False
    assert rep["grade_changes"][0]["question_id"] == "Q2"


def test_api_token_authentication(client, tiny, member):
    from rest_framework.authtoken.models import Token

    token = Token.objects.create(user=member)
    response = client.get("/api/scoring/tiny/leaderboard/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 200


def test_api_endpoints_are_in_the_generated_schema():
    """The schema of these endpoints is generated by drf-spectacular from their serializers.

    Generated over this module's URL patterns so another part's schema problem cannot hide
    a regression here (the site-wide /api/schema/ includes the same patterns).
    """
    from django.urls import include, path
    from drf_spectacular.generators import SchemaGenerator

    generator = SchemaGenerator(patterns=[path("", include("scoring.board.urls"))])
    schema = generator.get_schema(request=None, public=True)
    paths = schema["paths"]
    for name in ("leaderboard", "agreement", "report"):
        assert f"/api/scoring/{{benchmark}}/{name}/" in paths
        assert "200" in paths[f"/api/scoring/{{benchmark}}/{name}/"]["get"]["responses"]
    components = schema["components"]["schemas"]
    assert "Leaderboard" in components and "ModelScore" in components
    assert "krippendorff_alpha_ordinal" in components["PairAgreement"]["properties"]
    params = {
        p["name"] for p in paths["/api/scoring/{benchmark}/leaderboard/"]["get"]["parameters"]
    }
    assert {"benchmark", "edition", "band_gap", "bootstrap", "seed", "banding"} <= params


def test_not_found_pages_are_the_sites_own_and_say_what_is_missing(signed_in, tiny):
    page = signed_in.get("/leaderboard/tiny/?edition=nope")
    assert page.status_code == 404
    assert [t.name for t in page.templates][:2] == ["404.html", "base.html"]
    assert "no key edition &#x27;nope&#x27;" in page.content.decode()
    other = signed_in.get("/no-such-page/")
    assert other.status_code == 404
    assert "There is no page at this address" in other.content.decode()
