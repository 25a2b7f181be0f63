"""The item page's agreed grades are the engine's (issue 29 item 2): one rule, asked once.

Two panels that the page used to get wrong: a one-judge panel (the page needed two grades,
so grade 0 agreed by the only panel judge showed as not agreed) and a two-judge panel with
a third judge off the panel who disagrees (the page used every judge of the benchmark).
"""

from __future__ import annotations

import pytest

from engine import agreed_grade_rows, agreed_grades
from questions.models import KeyEntry
from review.model_rows import model_rows
from scoring.models import Grade, Judge
from scoring.runs.services.panel import judge_panel_set
from scoring.selectors import load_edition_grades
from tests.review_fixtures import *  # noqa: F403
from tests.review_fixtures import set_grades


def _page_and_engine(world, i: int) -> tuple[dict[str, int | None], dict[str, int | None]]:
    question = world.q(i)
    entry = KeyEntry.objects.get(edition=world.original, question=question)
    _, rows = model_rows(question, entry)
    page = {r.model_id: r.agreed for r in rows}
    table = load_edition_grades(world.original).table
    engine = {m: g for (q, m), g in agreed_grades(table).items() if q == question.question_id}
    return page, engine


def test_a_one_judge_panel_agrees_with_itself(world):
    judge_panel_set(benchmark=world.benchmark, members=[("j1", None)])
    set_grades(world, 0, 0, judges=[world.judges[0]])  # j1 says 0; j2 (off the panel) 2
    page, engine = _page_and_engine(world, 0)
    assert set(page.values()) == {0}  # was None on the page: "needs two grades"
    assert page == engine


def test_a_judge_off_the_panel_does_not_change_what_counts(world):
    judge_panel_set(benchmark=world.benchmark, members=[("j1", None), ("j2", None)])
    j3 = Judge.objects.create(
        benchmark=world.benchmark, judge_id="j3", name="Judge Three", vendor="C", role="judge"
    )
    entry = KeyEntry.objects.get(edition=world.original, question=world.q(1))
    Grade.objects.bulk_create(
        Grade(response=g.response, judge=j3, key_entry=entry, grade=0, prompt_version="v1")
        for g in Grade.objects.filter(key_entry=entry, judge=world.judges[0])
    )
    page, engine = _page_and_engine(world, 1)
    assert set(page.values()) == {2}  # j1 and j2 agree on 2; j3's 0 is shown, not counted
    assert page == engine
    _, rows = model_rows(world.q(1), entry)
    assert all(r.grades == {"j1": 2, "j2": 2, "j3": 0} for r in rows)


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([[2, 2], [2, 1], [None, None], [0, 0], []], [2, None, None, 0, None]),
        ([[1]], [1]),  # one judge: its grade counts
        ([[7, 7]], [None]),  # off the scale: not counted
    ],
)
def test_agreed_grade_rows_by_hand(rows, expected):
    assert agreed_grade_rows(rows, [0, 1, 2]) == expected
