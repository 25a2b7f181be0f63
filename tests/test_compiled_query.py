"""core.compiled_query: a query compiled once gives the ORM's rows for every new value.

Each query is run both ways on the same rows (the ORM's queryset, evaluated, is the
independent answer); the page queries that use it are checked against the ORM the same
way, and a query that cannot be compiled is shown to fall back to the ORM.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.db.models import Count
from django.test.utils import CaptureQueriesContext

from core import roles
from core.compiled_query import CompiledQuery
from questions.models import Question
from review import model_rows, selectors
from review.filters import QueueFilters
from review.models import ReviewItem
from tests.factories import ReviewItemFactory
from tests.review_fixtures import *  # noqa: F403
from tests.review_fixtures import build_world

pytestmark = pytest.mark.django_db


def _by_benchmark_text(benchmark_id: int, from_qid: str):
    return (
        Question.objects.filter(benchmark_id=benchmark_id, question_id__gte=from_qid)
        .order_by("question_id")
        .values_list("question_id", "text")
    )


def test_rows_are_the_orms_for_each_new_value_with_one_query_each():
    world = build_world(n_questions=4, n_models=1)
    compiled = CompiledQuery(_by_benchmark_text, (-987654321, "\x00stand-in"))
    assert compiled.compiled()
    for from_qid in ("Q0001", "Q0003", "Q0009"):
        with CaptureQueriesContext(connection) as ctx:
            rows = compiled(world.benchmark.pk, from_qid)
        assert len(ctx.captured_queries) == 1
        assert rows == list(_by_benchmark_text(world.benchmark.pk, from_qid))
    assert [qid for qid, _text in compiled(world.benchmark.pk, "Q0002")] == ["Q0002", "Q0003"]
    assert compiled(world.benchmark.pk + 1, "Q0001") == []


def test_a_flat_query_gives_values_and_an_annotation_is_converted():
    build_world(n_questions=3, n_models=1)
    flat = CompiledQuery(
        lambda low: (
            Question.objects.filter(id__gte=low)
            .order_by("question_id")
            .values_list("question_id", flat=True)
        ),
        (-987654321,),
    )
    assert flat(0) == ["Q0000", "Q0001", "Q0002"]
    counts = CompiledQuery(
        lambda: Question.objects.order_by().values_list("benchmark_id").annotate(n=Count("id")),
        (),
    )
    assert counts.compiled()
    [(benchmark_id, n)] = counts()
    assert n == 3 and type(n) is int


def test_a_pattern_parameter_is_not_compiled_and_runs_through_the_orm():
    build_world(n_questions=3, n_models=1)
    like = CompiledQuery(
        lambda text: (
            Question.objects.filter(question_id__icontains=text)
            .order_by("question_id")
            .values_list("question_id", flat=True)
        ),
        ("\x00stand-in",),
    )
    assert not like.compiled()  # the parameter is "%...%", not the stand-in
    assert like("0002") == ["Q0002"]


def test_model_instances_are_not_compiled():
    build_world(n_questions=2, n_models=1)
    compiled = CompiledQuery(lambda: Question.objects.order_by("question_id"), ())
    assert not compiled.compiled()
    assert [q.question_id for q in compiled()] == ["Q0000", "Q0001"]


def test_the_page_queries_are_compiled_and_agree_with_the_orm(reviewer):
    world = build_world(n_questions=4, n_models=3)
    items = [
        ReviewItemFactory(question=world.q(n), benchmark=world.benchmark, priority=p)
        for n, p in ((0, 5), (1, 9), (2, 5), (3, 1))
    ]
    postgres = connection.vendor == "postgresql"
    for compiled in (model_rows._RESPONSES, model_rows._GRADES, selectors._BENCHMARKS):
        assert compiled.compiled()
    if postgres:  # SQLite runs the two halves of the union as two ORM queries
        assert selectors._NEIGHBOURS.compiled()
    for item in items:
        args = (world.benchmark.name, item.pk, item.priority)
        if postgres:
            assert sorted(selectors._NEIGHBOURS(*args)) == sorted(selectors._neighbour_union(*args))
        entry = world.entry(items.index(item))
        assert model_rows._RESPONSES(item.question_id) == list(
            item.question.responses.order_by("model__model_id").values_list(
                "pk", "model__model_id", "model__name", "text"
            )
        )
        grades = model_rows._GRADES(item.question_id, entry.pk)
        assert len(grades) == 3 * 2  # three responses, two judges
        assert grades == list(model_rows._grade_values(item.question_id, entry.pk))
    # the queue's order: priority 9, then the two 5s by id, then 1
    assert selectors.neighbour_item_ids(items[0]) == (items[1].pk, items[2].pk)
    assert selectors.neighbour_item_ids(items[3]) == (items[2].pk, None)
    counts = selectors.status_counts(QueueFilters())
    assert counts[ReviewItem.Status.OPEN] == 4
    assert dict(selectors._ALL_STATUS_COUNTS()) == {"open": 4}
    assert roles._GROUP_NAMES(reviewer.pk) == list(reviewer.groups.values_list("name", flat=True))
    assert roles._GROUP_NAMES(reviewer.pk) == ["reviewer"]


def test_group_names_follow_a_change_of_groups():
    user = User.objects.create(username="someone")
    assert roles.user_roles(user) == set()
    user.groups.add(Group.objects.get(name="editor"))
    user = User.objects.get(pk=user.pk)  # a new request's user
    assert roles.user_roles(user) == {roles.Role.REVIEWER, roles.Role.EDITOR}


def test_a_queue_page_is_the_paginators_rows(reviewer):
    from django.core.paginator import Paginator

    from review import queue_rows

    world = build_world(n_questions=6, n_models=1)
    for n in range(6):
        ReviewItemFactory(question=world.q(n), benchmark=world.benchmark, priority=n % 3)
    plain = QueueFilters()
    qs = queue_rows.queue_row_values(selectors.queue_items(plain))
    for number in (1, 2, 3):
        page = Paginator(qs, 4).get_page(number)  # 4 + 2 rows; page 3 is page 2 again
        rows = queue_rows.page_values(plain, page)
        assert rows == list(page.object_list)
        assert len(rows) == (4 if number == 1 else 2)
    assert queue_rows._PAGES[(4, 4)].compiled()
    # priority 2, 1, 0, each tie by id: the first page's question ids by hand
    first = queue_rows.page_values(plain, Paginator(qs, 4).get_page(1))
    assert [r["qid"] for r in first] == ["Q0002", "Q0005", "Q0001", "Q0004"]
    filtered = QueueFilters(status="open")
    page = Paginator(queue_rows.queue_row_values(selectors.queue_items(filtered)), 4).get_page(1)
    assert queue_rows.page_values(filtered, page) == list(page.object_list)
