"""Detector `models_against_key`: strong models marked down against their record (issue 17 item 1).

The statistic is scoring.engine.key_fit.models_against_key (an ability-weighted shortfall,
a simplified Rasch item-fit residual; method and sources in its docstring), computed on the
grade table the leaderboard uses (scoring.selectors.load_edition_grades), so it works with
one judge or more and on any grade scale.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scoring.engine import GradeTable
from scoring.engine.key_fit import DEFAULT_DROP, models_against_key


def models_against_key_findings(
    table: GradeTable | None, qpk_of: Mapping[Any, int]
) -> list[tuple[int, dict]]:
    """Return [(question pk, detail)] for the questions where the detector fires.

    `table`: the edition's grade table with this triage run's exclusions already unscored
    (None: no grades, nothing found); `qpk_of`: {question_id: question pk}. Detail keys:
    "shortfall" (0-1 of the scale, the ranking statistic), "n_models", "n_strongest",
    "drop" (the threshold, fraction of the scale) and "marked_down" (list of {"model",
    "grade" on the benchmark's scale, "expected" 0-1, "overall_score" percent}).
    """
    if table is None:
        return []
    found = []
    for qid, fit in models_against_key(table).items():
        if fit.fires and qid in qpk_of:
            found.append((qpk_of[qid], {**fit.to_dict(), "drop": DEFAULT_DROP}))
    return sorted(found, key=lambda pair: pair[0])
