"""review.detectors.panel: answers read and grouped into the panel's labels (issue 27)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from engine.panel_fit import fit_panel
from review.detectors.panel import panel_detail, panel_inputs

QUESTIONS = {pk: f"A crate holds {pk + 2} boxes of 3 apples. How many apples are there?" for pk in range(8)}  # fmt: skip


def test_answers_become_labels_with_the_key_first_and_an_unread_one_is_no_label():
    entries = {pk: SimpleNamespace(answer=f"The answer is {3 * (pk + 2)}.") for pk in range(8)}
    responses = {
        pk: {f"m{j}": f"So the answer is {3 * (pk + 2)}." for j in range(5)} for pk in range(8)
    }
    # question 0: the key says 6; four models answer 60, one says nothing readable
    entries[0] = SimpleNamespace(answer="The answer is 6.")
    responses[0] = {f"m{j}": "So the answer is 60." for j in range(4)} | {"m4": "I am not sure."}
    data, readings = panel_inputs(entries, QUESTIONS, responses, None, {})
    assert data.model_ids == ["m0", "m1", "m2", "m3", "m4"]
    assert data.key_label.tolist() == [0] * 8
    assert data.labels[0].tolist() == [1, 1, 1, 1, -1]  # 60 is label 1; m4 unread
    assert data.n_labels[0] == 2 and data.n_labels[1] == 1
    assert np.all(data.labels[1:] == 0)
    fit = fit_panel(data)
    detail = panel_detail(fit, 0, readings[0], data)
    assert (detail["key_answer"], detail["suggested_answer"]) == ("6", "60")
    assert (detail["n_read"], detail["n_key"], detail["basis"]) == (4, 0, "answers")
    assert [m["model"] for m in detail["models"]] == ["m0", "m1", "m2", "m3"]
    assert detail["p_wrong"] > 0.5
    assert panel_detail(fit, 1, readings[1], data)["p_wrong"] < 0.5
