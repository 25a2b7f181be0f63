"""The report's judge diagnostics from stored data (issue 21 item 4).

Reads response lengths and vendors for the grades of an edition (`EditionGrades`) and
hands arrays to `engine.diagnostics`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db.models.functions import Length

from engine.diagnostics import length_grade_correlation, own_vendor_difference
from questions.models import ModelUnderTest, Response
from scoring.models import Judge
from scoring.selectors import EditionGrades


def judge_diagnostics(data: EditionGrades) -> list[dict[str, Any]]:
    """Return per judge of `data` (the panel by default) its length and vendor diagnostics.

    Each entry: {"judge", "length_grade": {n, spearman, ci_low, ci_high, cannot_compute}
    (Spearman's rho of response length in characters with the judge's grade, 95% interval;
    `engine.diagnostics.length_grade_correlation`), "own_vendor": {vendor,
    own_vendor_models, n_own, n_other, own_vendor_difference, other_vendor_difference,
    excess, cannot_compute} (grade points against judges of other vendors;
    `own_vendor_difference`)}. Scored questions
    only. [] when the edition has no grades. Three queries.
    """
    table = data.table
    if table is None:
        return []
    qids = table.question_ids[table.scored]
    q_index = {q: i for i, q in enumerate(qids.tolist())}
    m_index = {m: i for i, m in enumerate(table.model_ids.tolist())}
    lengths = np.full((len(qids), len(m_index)), np.nan)
    for qid, mid, n in (
        Response.objects.filter(
            question__benchmark=data.benchmark, question__question_id__in=list(q_index)
        )
        .annotate(n=Length("text"))
        .order_by()
        .values_list("question__question_id", "model__model_id", "n")
    ):
        if qid in q_index and mid in m_index:
            lengths[q_index[qid], m_index[mid]] = n
    model_vendors = dict(
        ModelUnderTest.objects.filter(benchmark=data.benchmark).values_list("model_id", "vendor")
    )
    judge_vendors = dict(
        Judge.objects.filter(
            benchmark=data.benchmark, judge_id__in=list(table.judge_ids)
        ).values_list("judge_id", "vendor")
    )
    grades = table.grade_values(table.scored_codes())
    vendor_rows = own_vendor_difference(table, model_vendors, judge_vendors)
    out = []
    for j, judge in enumerate(table.judge_ids.tolist()):
        own = {k: v for k, v in vendor_rows[j].items() if k != "judge"}
        out.append(
            {
                "judge": judge,
                "length_grade": length_grade_correlation(lengths.ravel(), grades[:, :, j].ravel()),
                "own_vendor": own,
            }
        )
    return out
