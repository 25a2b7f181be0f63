"""The review pages' cache between requests (issue 28 item 3): hits, and every change seen.

Each test turns the content cache on over a private LocMemCache (one process here, so a
per-process cache is shared by the "workers") and checks that the next request after a
change shows it: a newly published key edition, a changed passage (saved, or rewritten in
bulk as import_sources does), a changed judge panel.
"""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core import content_cache
from questions.models import Section
from questions.services import key_edition_create, key_edition_publish, key_entry_create
from review import page_cache
from scoring.models import Grade
from scoring.runs.services.panel import judge_panel_set
from tests.factories import ReviewItemFactory
from tests.review_fixtures import *  # noqa: F403
from tests.review_fixtures import build_world

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _content_cache_on(settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "test-page-cache",
        }
    }
    settings.SNAGLIST_CONTENT_CACHE = True
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


def _page(client, item) -> tuple[str, int]:
    """The item page's HTML (CSRF tokens masked: they differ per response) and its queries."""
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(f"/review/items/{item.pk}/")
    assert response.status_code == 200
    body = re.sub(
        r'("X-CSRFToken": "|name="csrfmiddlewaretoken" value=")\w+',
        r"\1-",
        response.content.decode(),
    )
    return body, len(ctx.captured_queries)


@pytest.fixture
def page(client, reviewer):
    world = build_world(n_questions=3, n_models=2)
    item = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    client.force_login(reviewer)
    return world, item


def test_second_request_reads_the_key_passage_and_panel_from_the_cache(client, page):
    world, item = page
    first, n_first = _page(client, item)
    second, n_second = _page(client, item)
    assert first == second
    assert "<mark>minimum bearing is 101 mm</mark>" in second
    # edition, entry, passage (two), the judges and the panel's one or two: six at least
    assert n_first - n_second >= 6, (n_first, n_second)


def test_off_without_a_shared_cache(client, page, settings):
    settings.SNAGLIST_CONTENT_CACHE = False
    world, item = page
    _, n_first = _page(client, item)
    _, n_second = _page(client, item)
    assert n_first == n_second
    assert not content_cache.enabled()


def test_a_newly_published_edition_is_seen_on_the_next_request(client, page, editor):
    world, item = page
    body, _ = _page(client, item)
    assert "(key edition original)" in body and "101 mm" in body
    draft = key_edition_create(
        benchmark=world.benchmark, name="corrected-1", parent=world.original, user=editor
    )
    key_entry_create(
        edition=draft,
        question=world.q(1),
        answer="150 mm",
        citation_doc_id="ADA",
        citation_locator="1.3",
        citation_quote="minimum bearing is 103 mm",
    )
    body, _ = _page(client, item)  # a draft changes nothing on the page
    assert "(key edition original)" in body
    key_edition_publish(edition=draft, user=editor)
    body, _ = _page(client, item)
    assert "(key edition corrected-1)" in body
    assert '<dd class="answer">150 mm</dd>' in body
    assert "<mark>minimum bearing is 103 mm</mark>" in body  # its passage, 1.3
    # no grade on the new entry yet: the table says so rather than showing the old grades
    assert 'class="grade grade-2"' not in body


def test_a_changed_passage_is_seen_on_the_next_request(client, page):
    world, item = page
    body, _ = _page(client, item)
    assert "<mark>minimum bearing is 101 mm</mark>" in body
    section = Section.objects.get(document=world.documents["ADA"], locator="1.1")
    section.text = "Amended: the minimum bearing is 101 mm, or 150 mm on masonry."
    section.save()  # as the admin saves it
    body, _ = _page(client, item)
    assert "Amended: the <mark>minimum bearing is 101 mm</mark>, or 150 mm on masonry." in body


def test_passages_rewritten_in_bulk_are_seen_after_the_writers_bump(client, page):
    world, item = page
    _page(client, item)
    # import_sources deletes and bulk-creates the passages: no signal, so it bumps
    Section.objects.filter(document=world.documents["ADA"], locator="1.1").update(
        text="Rewritten: nothing about bearings."
    )
    body, _ = _page(client, item)
    assert "<mark>minimum bearing is 101 mm</mark>" in body  # still the cached copy
    content_cache.bump(world.benchmark.pk, "sources")
    body, _ = _page(client, item)
    assert "Rewritten: nothing about bearings." in body
    assert "The quoted words were not found in this passage." in body


def test_a_changed_judge_panel_is_seen_on_the_next_request(client, page):
    world, item = page
    # j1 gives 0, j2 gives 2 on Q0001: no agreed grade while both sit on the panel
    Grade.objects.filter(response__question=world.q(1), judge=world.judges[0]).update(grade=0)
    body, _ = _page(client, item)
    assert "0 with agreed grades" in body
    judge_panel_set(benchmark=world.benchmark, members=[("j2", None)])
    body, _ = _page(client, item)
    assert "2 with agreed grades" in body  # j2 alone: both responses agreed at 2


def test_a_changed_grade_is_a_new_key_for_the_models_table(client, page):
    world, item = page
    body, _ = _page(client, item)
    assert body.count('class="grade grade-2"') == 4
    Grade.objects.filter(response__question=world.q(1), judge=world.judges[1]).update(
        grade=1, rationale="half right"
    )  # raw writes, as a scoring run's: no signal, no bump
    body, _ = _page(client, item)
    assert body.count('class="grade grade-2"') == 2 and body.count('class="grade grade-1"') == 2
    assert "half right" in body


def test_tokens_name_the_database_and_change_on_a_bump(page):
    world, _item = page
    benchmark_id = world.benchmark.pk
    before = content_cache.tokens(benchmark_id, ["editions", "sources"])
    with connection.cursor() as cursor:
        cursor.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
        oid = cursor.fetchone()[0]
    assert before.startswith(f"{connection.settings_dict['NAME']}.{oid}:")
    assert content_cache.tokens(benchmark_id, ["editions", "sources"]) == before
    content_cache.bump(benchmark_id, "sources")
    after = content_cache.tokens(benchmark_id, ["editions", "sources"])
    assert after.split(":")[1].split(".")[0] == before.split(":")[1].split(".")[0]  # editions
    assert after.split(":")[1].split(".")[1] != before.split(":")[1].split(".")[1]  # sources
    with pytest.raises(ValueError, match="unknown content scope"):
        content_cache.tokens(benchmark_id, ["grades"])


def test_the_cached_key_part_is_the_databases(page):
    world, _item = page
    edition, chain = page_cache.working_edition_with_chain(world.benchmark.pk)
    assert edition == world.original and chain == [world.original.pk]
    part = page_cache.key_part(world.q(1), world.benchmark)
    assert part.entry == world.entry(1) and part.passage.quote_found
    assert part.judges_and_panel[0] == ["j1", "j2"]
