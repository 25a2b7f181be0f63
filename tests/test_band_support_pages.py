"""The leaderboard command and page say which band boundaries the data supports and flag
models with few counted responses (issue 21 item 3), on the `tiny` fixture with the
default SNAGLIST_MIN_COUNTED (30).

original: mB 75.0 (2 counted: Q2 1,1 and Q4 2,2) above mA 62.5 (4 counted), in two gap
bands. Paired on the questions both have counted (Q2, Q4): mB 50 and 100 points, mA 0 and
50, so the difference is 50 points on each: mean 50.0 over 2 questions — too few (< 30)
for a bootstrap to say anything, so the boundary is not tested.
"""

from __future__ import annotations

import pytest

from tests.factories import UserFactory
from tests.test_leaderboard import build_tiny, run, run_json

pytestmark = pytest.mark.django_db


@pytest.fixture
def tiny(db):
    return build_tiny()


def test_leaderboard_json_marks_the_boundary_and_few_counted_models(tiny):
    doc = run_json("leaderboard", "--edition", "original", "--no-cache")
    assert doc["min_counted"] == 30
    [c] = doc["neighbours"]
    assert (c["above"], c["below"], c["n_questions"], c["difference"]) == ("mB", "mA", 2, 50.0)
    assert c["band_boundary"] is True and c["supported"] is None
    assert (doc["band_boundaries"], doc["band_boundaries_supported"]) == (1, 0)
    assert {m["model_id"]: m["few_counted"] for m in doc["models"]} == {"mB": True, "mA": True}
    table, _ = run("leaderboard", "--edition", "original")
    assert "boundary not tested (no bootstrap, or only 2 paired questions" in table
    assert (
        "Band boundaries supported by a paired bootstrap of per-question differences "
        "(Miller 2024, arXiv 2411.00640): 0 of 1." in table
    )


def test_leaderboard_page_badges_few_counted_models(tiny, client):
    client.force_login(UserFactory(username="reader"))
    page = client.get("/leaderboard/tiny/?edition=original").content.decode()
    assert page.count(">few counted</span>") == 2


def test_the_board_and_the_public_site_show_one_tier_where_no_boundary_is_supported(tiny, client):
    """Issue 30 item 10: two bands, their boundary untested (2 paired questions): one tier,
    said in words, on the signed-in board and the public site from the same context."""
    from django.contrib.auth.models import Group, User

    from questions.models import Benchmark
    from questions.services import benchmark_publicity_set

    doc = run_json("leaderboard", "--edition", "original", "--no-cache")
    assert doc["n_bands"] == 2 and doc["n_tiers"] == 1
    assert [m["tier"] for m in doc["models"]] == [1, 1]
    sentence = (
        "Established order: none. The data do not support any of the 1 band boundary, so "
        "all 2 models are shown as one tier; their order within it is not established."
    )
    admin = User.objects.create_user("site-admin", password="x-very-long-pass-1")
    admin.groups.add(Group.objects.get_or_create(name="admin")[0])
    benchmark_publicity_set(
        benchmark=Benchmark.objects.get(name="tiny"),
        user=admin,
        public=True,
        credit_reviewers=False,
    )
    public = client.get("/public/tiny/?edition=original").content.decode()
    client.force_login(UserFactory(username="reader"))
    board = client.get("/leaderboard/tiny/?edition=original").content.decode()
    for page in (board, public):
        assert sentence in page
        assert "<dt>Tiers</dt><dd>1 " in page
        assert page.count('<td class="num tier"><strong>') == 1  # one tier heading
        assert '<span class="muted small tier-bands">bands 1–2</span>' in page
