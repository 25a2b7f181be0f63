"""Per-model agreement and the note on near-zero statistics (issue 21 item 4, in part).

Per-model Cohen's kappa and Krippendorff's alpha in `agreement --format json` are checked
on the shared WildBench bundle against scikit-learn and krippendorff computed here,
straight from grades.jsonl (never through our code).
"""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from engine.agreement import pair_statistics
from tests.test_agreement_real_data import WILDBENCH, _grades, _json, _text, wildbench  # noqa: F401


def test_high_agreement_on_nearly_constant_grades_carries_a_note():
    # The case: judge A all 2s, judge B nine 2s and one 1.
    a, b = [2] * 10, [2] * 9 + [1]
    p = pair_statistics(a, b, [0, 1, 2])
    assert p.exact_agreement == 0.9
    assert p.cohen_kappa == pytest.approx(cohen_kappa_score(a, b, labels=[0, 1, 2]), abs=1e-9)
    assert p.cohen_kappa == pytest.approx(0.0, abs=1e-9)
    alpha = krippendorff.alpha(
        reliability_data=np.vstack([a, b]).astype(float),
        level_of_measurement="ordinal",
        value_domain=[0, 1, 2],
    )
    assert p.krippendorff_alpha_ordinal == pytest.approx(alpha, abs=1e-9)
    [note] = [n for n in p.notes if "kappa paradox" in n]
    assert "raw agreement 90.0%" in note and "95% of the grades are 2" in note


def test_no_note_where_grades_vary_or_statistics_are_not_near_zero():
    # Varied grades, kappa near zero: a real lack of agreement, no paradox note.
    a = [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]
    b = [1, 2, 0, 2, 0, 1, 0, 1, 2, 1]
    varied = pair_statistics(a, b, [0, 1, 2])
    assert abs(varied.cohen_kappa) < 0.2
    assert not any("kappa paradox" in n for n in varied.notes)
    # Nearly constant grades but the one off-grade agreed on: kappa 1, no note.
    agreed = pair_statistics([2] * 9 + [1], [2] * 9 + [1], [0, 1, 2])
    assert agreed.cohen_kappa == pytest.approx(1.0)
    assert not any("kappa paradox" in n for n in agreed.notes)


@pytest.mark.django_db
def test_wildbench_per_model_kappa_and_alpha_match_sklearn_and_krippendorff(wildbench):  # noqa: F811
    doc = _json("agreement", "--benchmark", wildbench)
    [pair] = doc["pairs"]
    ja, jb = pair["judges"]
    labels = list(range(1, 11))
    by_model: dict[str, list[tuple[int, int]]] = {}
    for (_, model_id), g in _grades(WILDBENCH).items():
        if g.get(ja) is not None and g.get(jb) is not None:
            by_model.setdefault(model_id, []).append((g[ja], g[jb]))
    per_model = {m["model_id"]: m for m in pair["per_model"]}
    assert set(per_model) == set(by_model) == {"gpt-3.5-turbo-0125", "gemma-7b-it"}
    for model_id, both in by_model.items():
        a = np.array([x for x, _ in both])
        b = np.array([y for _, y in both])
        got = per_model[model_id]
        assert got["n"] == len(both)
        assert got["exact_agreement"] == pytest.approx(float(np.mean(a == b)), abs=1e-4)
        assert got["cohen_kappa"] == pytest.approx(cohen_kappa_score(a, b, labels=labels), abs=1e-4)
        assert got["cohen_kappa_quadratic"] == pytest.approx(
            cohen_kappa_score(a, b, labels=labels, weights="quadratic"), abs=1e-4
        )
        alpha = krippendorff.alpha(
            reliability_data=np.vstack([a, b]).astype(float),
            level_of_measurement="ordinal",
            value_domain=labels,
        )
        assert got["krippendorff_alpha_ordinal"] == pytest.approx(alpha, abs=1e-4)
    assert sum(m["n"] for m in per_model.values()) == pair["n"]
    text = _text("agreement", "--benchmark", wildbench)
    assert "per model (n, exact agreement, kappa, quadratic kappa, alpha):" in text
    assert "    gemma-7b-it: " in text
