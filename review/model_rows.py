"""The item page's models table: each response with every judge's grade, flag and
rationale on the cited entry, and the judge panel's agreed grade asked of the engine.

Moved out of review.selectors (which had grown past 700 lines): `model_row_values` reads the
two value queries (compiled once, core.compiled_query), `model_rows` builds the rows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from core.compiled_query import CompiledQuery
from questions.models import Benchmark, KeyEntry, Question, Response
from scoring.models import Grade, Judge


@dataclass(frozen=True)
class GradeCell:
    """One judge's grade of one response (data only: the page styles it with the
    `grade_class` filter).

    `flag`: the flag reason, "" when not flagged; `rationale`: the judge's reason, "" when
    none.
    """

    judge: str
    grade: int | None
    flag: str
    rationale: str


@dataclass
class ModelRow:
    model_id: str
    model_name: str
    response: str
    grades: dict[str, int | None] = field(default_factory=dict)
    flags: dict[str, str] = field(default_factory=dict)
    # each judge's rationale for its grade (issue 18 item 2), in judge order; "" if none
    rationales: dict[str, str] = field(default_factory=dict)
    # filled by model_rows: one GradeCell per judge (judge order)
    cells: list[GradeCell] = field(default_factory=list)
    # the grade the judge panel agreed on (methodology rule 1, asked of the engine:
    # engine.agreed_grade_rows over the panel's grades at its pinned prompt
    # versions), None when the response is not counted; filled by model_rows
    agreed: int | None = None


@dataclass(frozen=True)
class ModelRowValues:
    """The raw rows behind `model_rows`, as two queries return them (value tuples).

    `responses`: (response pk, model id, model name, text) by model id; `grades`:
    (response pk, judge id, grade, flag, flag reason, rationale, prompt version) of judges
    (role judge) on the entry, by judge id. Plain values, so a page can key a cached
    fragment on them (`digest`).
    """

    responses: tuple[tuple, ...]
    grades: tuple[tuple, ...]

    def digest(self, *more: Any) -> str:
        """Return a sha1 hex digest of these values and `more` (anything with a stable repr)."""
        import hashlib

        return hashlib.sha1(repr((self.responses, self.grades, more)).encode()).hexdigest()


def _response_values(question_id: int) -> QuerySet:
    return (
        Response.objects.filter(question_id=question_id)
        .order_by("model__model_id")
        .values_list("pk", "model__model_id", "model__name", "text")
    )


def _grade_values(question_id: int, entry_id: int) -> QuerySet:
    # Ordered by judge (flags keep the judge order), then response: Grade's default
    # ordering would join question, benchmark and model tables for nothing.
    return (
        Grade.objects.filter(
            response__question_id=question_id, key_entry_id=entry_id, judge__role=Judge.Role.JUDGE
        )
        .order_by("judge__judge_id", "response_id")
        .values_list(
            "response_id",
            "judge__judge_id",
            "grade",
            "flag",
            "flag_reason",
            "rationale",
            "prompt_version",
        )
    )


# compiled once (core.compiled_query): the item page asks them on every request
_RESPONSES = CompiledQuery(_response_values, (-987654321,))
_GRADES = CompiledQuery(_grade_values, (-987654321, -987654322))


def model_row_values(question: Question, entry: KeyEntry | None) -> ModelRowValues:
    """Return the question's responses and their judges' grades on `entry` (two queries;
    one when the question has no response or `entry` is None)."""
    responses = tuple(_RESPONSES(question.pk))
    grades: tuple = ()
    if entry is not None and responses:
        grades = tuple(_GRADES(question.pk, entry.pk))
    return ModelRowValues(responses, grades)


def model_rows(
    question: Question,
    entry: KeyEntry | None,
    benchmark: Benchmark | None = None,
    *,
    judges_and_panel: tuple[list[str], list] | None = None,
    values: ModelRowValues | None = None,
) -> tuple[list[str], list[ModelRow]]:
    """Return (judge ids, one row per response with each judge's grade on `entry`).

    Four or five queries (judges; the panel, and without one the active judges; responses;
    grades), one more when `benchmark` (the question's) is not given. `judges_and_panel`
    gives (the judge ids sorted, scoring_judges) as review.page_cache.panel keeps them, and
    `values` what `model_row_values` read: none of their queries then. Each row carries every
    judge's grades, flag reasons and rationales keyed by judge id, the same as `cells` in
    judge order, and `agreed`: the panel's agreed grade as the leaderboard counts it
    (scoring.selectors.scoring_judges: the panel at its pinned prompt versions, or every
    active judge without a panel; engine.agreed_grade_rows), so a judge off the
    panel shows its grade but never changes what counts.
    """
    from engine import agreed_grade_rows
    from scoring.selectors import scoring_judges

    benchmark = benchmark or question.benchmark
    if judges_and_panel is not None:
        judges, panel = judges_and_panel
    else:
        judges = list(
            Judge.objects.filter(benchmark_id=question.benchmark_id, role=Judge.Role.JUDGE)
            .order_by("judge_id")
            .values_list("judge_id", flat=True)
        )
        panel = scoring_judges(benchmark)
    values = values if values is not None else model_row_values(question, entry)
    pinned = {j.judge_id: j.prompt_version for j in panel}
    counted: dict[int, dict[str, int | None]] = defaultdict(dict)
    rows: dict[int, ModelRow] = {
        pk: ModelRow(model_id, name, text) for pk, model_id, name, text in values.responses
    }
    for response_id, judge_id, grade, flag, flag_reason, rationale, version in values.grades:
        row = rows[response_id]
        if pinned.get(judge_id) == version:
            counted[response_id][judge_id] = grade
        row.grades[judge_id] = grade
        row.rationales[judge_id] = rationale
        if flag:
            row.flags[judge_id] = flag_reason or "flagged"
    for row in rows.values():
        row.grades = {j: row.grades.get(j) for j in judges}
        row.cells = [
            GradeCell(j, g, row.flags.get(j, ""), row.rationales.get(j) or "")
            for j, g in row.grades.items()
        ]
    agreed = agreed_grade_rows(
        [[counted[pk].get(j.judge_id) for j in panel] for pk in rows],
        benchmark.grade_scale or [0, 1, 2],
    )
    for row, grade in zip(rows.values(), agreed, strict=True):
        row.agreed = grade
    return judges, list(rows.values())
