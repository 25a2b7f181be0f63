"""What the busiest pages cost to serve (issue 18, load): query bounds and the shortcuts.

The bounds are the counts measured after the issue 18 load work (PostgreSQL, Redis as
cache): queue 10, item page 16 (17 when the quote is not in the cited passage), claim-next
6 plus its savepoint pair. A database-backed session (no Redis) adds one query to each,
SQLite one more for the item's neighbours and claim-next's candidate loop.
"""

from __future__ import annotations

import re
import unicodedata

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils.text import Truncator

from questions.models import AuditExclusion, KeyEdition, Section
from questions.selectors import (
    edition_ancestry_ids,
    latest_published_edition,
    match_locator,
    section_for_locator,
    working_edition_and_chain,
)
from review import queue_rows, selectors, services
from review.models import ReviewItem
from tests.factories import BenchmarkFactory, KeyEditionFactory, ReviewItemFactory, publish
from tests.review_fixtures import *  # noqa: F403
from tests.review_fixtures import build_world

pytestmark = pytest.mark.django_db

# The item page's queries: 16 since the issue 18 load work, + 2 since the agreed grades
# are the engine's over the judge panel (issue 29 item 2: the panel, and without one the
# active judges, scoring.selectors.resolve_judges).
ITEM_PAGE_QUERIES = 18


def _session_queries() -> int:
    """1 when each request reads its session from the database, 0 when from the cache."""
    return 0 if settings.SESSION_ENGINE.endswith("cached_db") else 1


def _sqlite() -> int:
    return int(connection.vendor == "sqlite")


def _items(world, n):
    return [
        ReviewItemFactory(question=world.q(i), benchmark=world.benchmark, priority=300 - i)
        for i in range(n)
    ]


@pytest.mark.parametrize("n", [3, 40])
def test_queue_page_costs_ten_queries_whatever_the_rows(
    client, reviewer, django_assert_max_num_queries, n
):
    world = build_world(n_questions=n, n_models=2, with_grades=False, with_audits=False)
    items = _items(world, n)
    services.review_item_claim(item=items[1], user=reviewer)
    client.force_login(reviewer)
    client.get("/review/")
    with django_assert_max_num_queries(10 + _session_queries()):
        body = client.get("/review/?benchmark=demo").content.decode()
    assert f"{n} items shown" in body and "Claimed: 1" in body
    # one CSRF field, rendered once, in every row's Claim form
    tokens = re.findall(
        r'/claim/" class="inline"><input type="hidden" name="csrfmiddlewaretoken" value="(\w+)"',
        body,
    )
    assert len(tokens) == n - 1 and len(set(tokens)) == 1  # the claimed row has no form


@pytest.mark.parametrize(("n_models", "quote_found"), [(2, True), (18, True), (18, False)])
def test_item_page_query_count_is_fixed(
    client, reviewer, django_assert_max_num_queries, n_models, quote_found
):
    world = build_world(n_questions=4, n_models=n_models)
    if not quote_found:  # the quote sits in 1.3, not in the cited 1.1: all passages are read
        ada = world.documents["ADA"]
        Section.objects.filter(document=ada, locator="1.1").update(text="See paragraph 1.3.")
        Section.objects.filter(document=ada, locator="1.3").update(
            text="For type 1 the minimum bearing is 101 mm."
        )
    item = _items(world, 4)[1]
    services.review_item_claim(item=item, user=reviewer)
    client.force_login(reviewer)
    client.get(f"/review/items/{item.pk}/")
    bound = ITEM_PAGE_QUERIES + (not quote_found) + _session_queries() + _sqlite()
    with django_assert_max_num_queries(bound):
        body = client.get(f"/review/items/{item.pk}/").content.decode()
    assert body.count('class="grade grade-2"') == 2 * n_models
    if quote_found:
        assert "<mark>minimum bearing is 101 mm</mark>" in body
    else:
        assert "The quoted words were not found in this passage. They are in 1.3." in body
    # neighbours in the queue order (priorities 300, 299, 298, 297: item 1 is second)
    assert 'rel="prev"' in body and 'rel="next"' in body


def test_claim_next_costs_six_queries_and_claims_the_top_item(
    client, reviewer, django_assert_max_num_queries
):
    world = build_world(n_questions=5, n_models=1, with_grades=False, with_audits=False)
    items = _items(world, 5)
    client.force_login(reviewer)
    client.get("/review/")
    # + 2 for the savepoint pair of the claim's transaction inside the test's transaction
    bound = 6 + 2 + _session_queries() + 2 * _sqlite()
    with django_assert_max_num_queries(bound):
        response = client.post("/review/next/", {"benchmark": "demo"})
    assert response.status_code == 303 and response["Location"] == f"/review/items/{items[0].pk}/"
    claimed = ReviewItem.objects.select_related("claimed_by").get(pk=items[0].pk)
    assert claimed.claimed_by == reviewer and claimed.version == 2
    # the audit entry names the item with its benchmark and question read by the locked select
    from core.models import AuditLogEntry

    entry = AuditLogEntry.objects.get(action="review_item.claim", target_id=str(items[0].pk))
    assert entry.target_label == "demo/Q0000" and entry.after["claimed_by"] == "reviewer"


@pytest.mark.sqlite
def test_neighbours_follow_the_queue_order_with_ties_broken_by_id(db):
    world = build_world(n_questions=5, n_models=1, with_grades=False, with_audits=False)
    # priorities 200, 150, 150, 150, 100: ties ordered by id, as the queue lists them
    items = [
        ReviewItemFactory(question=world.q(i), benchmark=world.benchmark, priority=p)
        for i, p in enumerate([200, 150, 150, 150, 100])
    ]
    ids = [i.pk for i in items]
    assert selectors.neighbour_item_ids(items[0]) == (None, ids[1])
    assert selectors.neighbour_item_ids(items[1]) == (ids[0], ids[2])
    assert selectors.neighbour_item_ids(items[2]) == (ids[1], ids[3])
    assert selectors.neighbour_item_ids(items[3]) == (ids[2], ids[4])
    assert selectors.neighbour_item_ids(items[4]) == (ids[3], None)
    # a closed item is not in the queue, so not a neighbour
    ReviewItem.objects.filter(pk=ids[2]).update(status=ReviewItem.Status.CONFIRMED)
    assert selectors.neighbour_item_ids(items[1]) == (ids[0], ids[3])


def test_item_page_shows_the_exclusion_read_with_the_entry(client, reviewer):
    world = build_world(n_questions=3, n_models=2)
    AuditExclusion.objects.create(key_entry=world.entry(1), reason="auditors_agree")
    excluded, plain = (
        ReviewItemFactory(question=world.q(i), benchmark=world.benchmark) for i in (1, 2)
    )
    client.force_login(reviewer)
    body = client.get(f"/review/items/{excluded.pk}/").content.decode()
    assert (
        "Excluded from scoring wherever key edition original’s entry applies: both auditors"
        " found the key entry wrong or ungradeable (rule 4)" in body
    )
    body = client.get(f"/review/items/{plain.pk}/").content.decode()
    assert "Excluded from scoring" not in body


@pytest.mark.parametrize(
    "text",
    [
        "short",
        "x" * 110,
        "y" * 111,
        "e\u0301" * 60,  # not NFC: 120 code points, 60 characters once composed
        "Ａ" * 200,
        "",
    ],
)
def test_truncate_chars_is_djangos_truncatechars(text):
    assert queue_rows.truncate_chars(text, 110) == Truncator(text).chars(110)
    assert unicodedata.is_normalized("NFC", queue_rows.truncate_chars(text, 110))


def test_match_locator_prefers_the_exact_locator_then_the_normalised_one(db):
    assert match_locator(["1.1", "1.2"], "1.2") == "1.2"
    assert match_locator(["para 1.3", "1.3"], "1.3") == "1.3"  # exact wins over first
    assert match_locator(["1.1", "Para 1.2"], "§1.2") == "Para 1.2"  # same normalised form
    assert match_locator(["1.1", "1.2"], "9.9") is None
    world = build_world(n_questions=2, n_models=1, with_grades=False, with_audits=False)
    ada = world.documents["ADA"]
    assert section_for_locator(ada, "1.1").text.startswith("Paragraph 1:")
    assert section_for_locator(ada, "7.7") is None


def test_server_timing_header_counts_the_requests_queries(client, reviewer, settings):
    settings.MIDDLEWARE = ["config.middleware.ServerTimingMiddleware", *settings.MIDDLEWARE]
    world = build_world(n_questions=2, n_models=2)
    item = ReviewItemFactory(question=world.q(0), benchmark=world.benchmark)
    client.force_login(reviewer)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(f"/review/items/{item.pk}/")
    header = response["Server-Timing"]
    parts = dict(p.strip().split(";", 1) for p in header.split(","))
    assert set(parts) == {"app", "cpu", "db"}
    assert parts["db"].endswith(f'desc="{len(ctx.captured_queries)} queries"')
    wall = float(parts["app"].removeprefix("dur="))
    assert 0 < wall < 60_000 and float(parts["cpu"].removeprefix("dur=")) >= 0


@pytest.mark.sqlite
def test_working_edition_and_chain_is_the_latest_published_and_its_ancestry(
    db, django_assert_num_queries
):
    benchmark = BenchmarkFactory(name="chain")
    with django_assert_num_queries(1):
        assert working_edition_and_chain(benchmark) == (None, [])
    original = publish(KeyEditionFactory(benchmark=benchmark, name="original"))
    second = publish(KeyEditionFactory(benchmark=benchmark, name="second", parent=original))
    KeyEditionFactory(benchmark=benchmark, name="draft", parent=second)  # never published
    with django_assert_num_queries(1):
        edition, chain = working_edition_and_chain(benchmark.pk)
    assert edition == second and chain == [second.pk, original.pk]
    assert (edition, chain) == (latest_published_edition(benchmark), edition_ancestry_ids(second))
    # two published at the same instant: the higher id is the later, as in
    # latest_published_edition's order
    other = BenchmarkFactory(name="tie")
    when = second.published_at
    first = KeyEditionFactory(benchmark=other, name="original")
    first.status, first.published_at = KeyEdition.Status.PUBLISHED, when
    first.save(update_fields=["status", "published_at"])
    twin = KeyEditionFactory(benchmark=other, name="twin", parent=first)
    twin.status, twin.published_at = KeyEdition.Status.PUBLISHED, when
    twin.save(update_fields=["status", "published_at"])
    assert working_edition_and_chain(other) == (twin, [twin.pk, first.pk])
    assert latest_published_edition(other) == twin
