"""The input of the scoring engine: a dense grade table.

Rows of (question, model, judge, grade-or-null) are pivoted once into an integer
array ``codes[question, model, judge]`` so every figure downstream is a
vectorised numpy reduction.  No Django here: a selector builds a pandas
DataFrame from the database and calls :meth:`GradeTable.from_frame`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pandas costs ~1 s to import: only functions that build frames load it
    import pandas as pd

#: Code for "this judge has no grade row for this response" (not graded yet,
#: or the response does not exist).
ABSENT = -1
#: Code for "the judge answered but its grade could not be parsed" (a null grade).
NULL = -2

SCORED = "scored"
EXCLUDED = "excluded"


def normalise_scale(scale: Iterable[int]) -> np.ndarray:
    """Return the ordinal grade scale as a sorted int64 array.

    Shape: (K,) with K >= 2 distinct integers, e.g. [0, 1, 2] or [1, ..., 10].
    Raises ValueError for fewer than two values, duplicates or non-integers.
    """
    values = list(scale)
    if any(isinstance(v, bool) or int(v) != v for v in values):
        raise ValueError(f"grade scale must hold integers, got {values!r}")
    arr = np.asarray(sorted(int(v) for v in values), dtype=np.int64)
    if arr.size < 2:
        raise ValueError(f"grade scale needs at least two grades, got {values!r}")
    if np.unique(arr).size != arr.size:
        raise ValueError(f"grade scale has duplicate grades: {values!r}")
    return arr


@dataclass(frozen=True, eq=False)
class GradeTable:
    """Hold every grade of one key edition as a dense [question, model, judge] array.

    Fields (Q questions, M models, J judges, K grades on the scale):

    - ``question_ids`` (Q,), ``model_ids`` (M,), ``judge_ids`` (J,): object arrays,
      each sorted, so results never depend on the order rows arrived in.
    - ``codes`` (Q, M, J) int8/int16: index into ``scale`` of the grade, or
      ``ABSENT`` (-1, no grade row) or ``NULL`` (-2, a null/unparsed grade).
    - ``scale`` (K,) int64, sorted: the ordinal grade scale.
    - ``scored`` (Q,) bool: the question's scoring status is "scored"; excluded
      questions (key audit, removal by review; methodology.md rules 4-5) are
      carried but never counted.
    - ``categories`` (Q,) object: the question's category id (None if unknown).

    Build it with :meth:`from_frame`, :meth:`from_records` or :meth:`from_arrays`.
    """

    question_ids: np.ndarray
    model_ids: np.ndarray
    judge_ids: np.ndarray
    codes: np.ndarray
    scale: np.ndarray
    scored: np.ndarray
    categories: np.ndarray

    def __post_init__(self) -> None:
        q, m, j = len(self.question_ids), len(self.model_ids), len(self.judge_ids)
        if j == 0:
            raise ValueError("a grade table needs at least one judge (no grade rows?)")
        if self.codes.shape != (q, m, j):
            raise ValueError(f"codes has shape {self.codes.shape}, expected {(q, m, j)}")
        if self.scored.shape != (q,) or self.categories.shape != (q,):
            raise ValueError("scored and categories must have one entry per question")

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_frame(
        cls,
        grades: pd.DataFrame,
        *,
        scale: Iterable[int],
        questions: pd.DataFrame | None = None,
    ) -> GradeTable:
        """Build a table from a grades DataFrame (the entry point for Django selectors).

        ``grades`` columns: ``question_id``, ``model_id``, ``judge_id``, ``grade``
        (float with NaN for a null grade, pandas nullable ``Int64``, or object with
        None).  ``questions`` (optional) columns: ``question_id`` and any of
        ``category`` / ``category_id`` and ``status`` ("scored"/"excluded") or
        ``scored`` (bool).  Without ``questions`` every graded question is scored
        and uncategorised.  Ids may be str or int (one type per column).

        Raises ValueError on a missing column, a grade off the scale, a duplicate
        (question, model, judge) row, or a graded question absent from ``questions``.
        """
        import pandas as pd

        scale_arr = normalise_scale(scale)
        missing = {"question_id", "model_id", "judge_id", "grade"} - set(grades.columns)
        if missing:
            raise ValueError(f"grades frame lacks column(s): {sorted(missing)}")

        q_info = _question_frame(questions) if questions is not None else None
        if q_info is not None:
            q_ids = np.asarray(sorted(pd.unique(q_info["question_id"]), key=_id_key), dtype=object)
            q_codes, unknown = _codes_in(grades["question_id"].to_numpy(), q_ids)
            if unknown is not None:
                raise ValueError(
                    f"grades row {unknown}: question_id {grades['question_id'].iloc[unknown]!r} "
                    "is not in the questions frame"
                )
        else:
            q_codes, q_ids = _factorize_sorted(grades["question_id"].to_numpy())
        m_codes, m_ids = _factorize_sorted(grades["model_id"].to_numpy())
        j_codes, j_ids = _factorize_sorted(grades["judge_id"].to_numpy())

        grade_codes = _grade_codes(grades["grade"], scale_arr)
        dtype = np.int8 if scale_arr.size < 120 else np.int16
        codes = np.full((len(q_ids), len(m_ids), len(j_ids)), ABSENT, dtype=dtype)
        flat = (q_codes * len(m_ids) + m_codes) * len(j_ids) + j_codes
        if flat.size:
            counts = np.bincount(flat, minlength=codes.size)
            if counts.max() > 1:
                dup = int(np.flatnonzero(counts[flat] > 1)[1])
                raise ValueError(
                    f"grades row {dup}: duplicate grade for question "
                    f"{grades['question_id'].iloc[dup]!r}, model {grades['model_id'].iloc[dup]!r}, "
                    f"judge {grades['judge_id'].iloc[dup]!r}"
                )
            codes.reshape(-1)[flat] = grade_codes

        if q_info is not None:
            order = pd.Index(q_info["question_id"]).get_indexer(q_ids)
            scored = q_info["scored"].to_numpy(dtype=bool)[order]
            categories = q_info["category"].to_numpy(dtype=object)[order]
        else:
            scored = np.ones(len(q_ids), dtype=bool)
            categories = np.full(len(q_ids), None, dtype=object)
        return cls(
            question_ids=q_ids,
            model_ids=m_ids,
            judge_ids=j_ids,
            codes=codes,
            scale=scale_arr,
            scored=scored,
            categories=categories,
        )

    @classmethod
    def from_records(
        cls,
        grades: Iterable[Mapping[str, Any]],
        *,
        scale: Iterable[int],
        questions: Iterable[Mapping[str, Any]] | None = None,
    ) -> GradeTable:
        """Build a table from dicts with the keys of :meth:`from_frame` (e.g. parsed JSONL rows)."""
        import pandas as pd

        frame = pd.DataFrame.from_records(
            [
                {
                    "question_id": r["question_id"],
                    "model_id": r["model_id"],
                    "judge_id": r["judge_id"],
                    "grade": r.get("grade"),
                }
                for r in grades
            ],
            columns=["question_id", "model_id", "judge_id", "grade"],
        )
        q_frame = pd.DataFrame.from_records(list(questions)) if questions is not None else None
        return cls.from_frame(frame, scale=scale, questions=q_frame)

    @classmethod
    def from_arrays(
        cls,
        question_id: Sequence[Hashable] | np.ndarray,
        model_id: Sequence[Hashable] | np.ndarray,
        judge_id: Sequence[Hashable] | np.ndarray,
        grade: Sequence[float | None] | np.ndarray,
        *,
        scale: Iterable[int],
        questions: pd.DataFrame | None = None,
    ) -> GradeTable:
        """Build a table from four parallel 1-D arrays (NaN or None = null grade)."""
        import pandas as pd

        frame = pd.DataFrame(
            {
                "question_id": np.asarray(question_id),
                "model_id": np.asarray(model_id),
                "judge_id": np.asarray(judge_id),
                "grade": pd.array(grade, dtype="Float64")
                if not isinstance(grade, np.ndarray)
                else grade,
            }
        )
        return cls.from_frame(frame, scale=scale, questions=questions)

    # ------------------------------------------------------------------ views
    @property
    def n_judges(self) -> int:
        return len(self.judge_ids)

    def scored_codes(self) -> np.ndarray:
        """Return ``codes`` restricted to scored questions, shape (Q_scored, M, J)."""
        return self.codes[self.scored]

    def without_questions(self, question_ids: Iterable[Hashable]) -> GradeTable:
        """Return a copy in which the given questions are carried but no longer scored.

        For a caller that has decided to exclude questions whose exclusion is not stored
        yet (triage's rule-4 outcome of the run it is computing). Unknown ids are ignored.
        """
        drop = np.isin(self.question_ids, np.asarray(list(question_ids), dtype=object))
        return dataclasses.replace(self, scored=self.scored & ~drop)

    def grade_values(self, codes: np.ndarray) -> np.ndarray:
        """Map grade codes to grade values as float (NaN where absent or null)."""
        out = np.full(codes.shape, np.nan)
        ok = codes >= 0
        out[ok] = self.scale[codes[ok]]
        return out


@dataclass(frozen=True)
class ResponseStatus:
    """Classify every response (question, model) once; all arrays shape (Q, M).

    Exactly one of ``counted``, ``disagreement``, ``unparsed``, ``missing_grade``
    is true for a response that has at least one grade row (``present``):

    - ``unparsed``: some judge returned a null grade — counted separately, never
      as 0 (rule 1 needs a grade from every judge).
    - ``missing_grade``: no null, but some judge has no grade row yet.
    - ``counted``: every judge gave the same grade (methodology.md rule 1).
    - ``disagreement``: every judge graded, not all the same (rule 1: excluded
      on disagreement, never resolved by preferring one judge).

    ``points`` holds the agreed grade minus the scale minimum (int64, 0 where not
    counted), so scores are exact ratios of integers.
    """

    present: np.ndarray
    counted: np.ndarray
    disagreement: np.ndarray
    unparsed: np.ndarray
    missing_grade: np.ndarray
    points: np.ndarray


def classify_responses(codes: np.ndarray, scale: np.ndarray) -> ResponseStatus:
    """Classify responses of a (Q, M, J) code array; see :class:`ResponseStatus`."""
    present = (codes != ABSENT).any(axis=2)
    unparsed = (codes == NULL).any(axis=2)
    all_graded = (codes >= 0).all(axis=2)
    missing_grade = present & ~unparsed & ~all_graded
    first = codes[:, :, 0]
    same = (codes == first[:, :, None]).all(axis=2)
    counted = all_graded & same
    disagreement = all_graded & ~same
    offsets = (scale - scale[0]).astype(np.int64)
    points = np.where(counted, offsets[np.where(counted, first, 0)], 0)
    return ResponseStatus(
        present=present,
        counted=counted,
        disagreement=disagreement,
        unparsed=unparsed,
        missing_grade=missing_grade,
        points=points,
    )


def agreed_grade_rows(
    rows: Sequence[Sequence[int | None]], scale: Iterable[int]
) -> list[int | None]:
    """Rule 1 for a handful of responses (an item page's): the agreed grade of each row.

    Each row holds one grade per judge of the panel, in any fixed order: an int on
    `scale`, or None where the judge's grade is null (unparsed) or not there yet. Returns,
    per row, the grade every judge gave, or None when the response is not counted (a None
    in the row, judges that differ, a grade off the scale, or no judges at all). The same
    classify_responses as the leaderboard, so the page and the board cannot disagree.
    """
    scale_arr = normalise_scale(scale)
    width = max((len(r) for r in rows), default=0)
    if not rows or width == 0:
        return [None] * len(rows)
    index = {int(v): i for i, v in enumerate(scale_arr)}
    codes = np.full((1, len(rows), width), ABSENT, dtype=np.int16)
    for m, row in enumerate(rows):
        for j, grade in enumerate(row):
            codes[0, m, j] = NULL if grade is None else index.get(int(grade), NULL)
    status = classify_responses(codes, scale_arr)
    return [
        int(scale_arr[codes[0, m, 0]]) if status.counted[0, m] else None for m in range(len(rows))
    ]


def agreed_grades(
    table: GradeTable, *, scored_only: bool = False
) -> dict[tuple[Any, Any], int | None]:
    """Return the agreed grade per response: {(question_id, model_id): grade or None}.

    None marks a response that is not counted (disagreement, null or missing grade).
    Responses without any grade row are left out.  Feed two of these (before and
    after a correction) to :func:`engine.grade_changes` (methodology.md rule 11).
    """
    mask = table.scored if scored_only else np.ones(len(table.question_ids), dtype=bool)
    codes = table.codes[mask]
    status = classify_responses(codes, table.scale)
    q_ids = table.question_ids[mask]
    out: dict[tuple[Any, Any], int | None] = {}
    qi, mi = np.nonzero(status.present)
    values = table.scale[np.where(status.counted, codes[:, :, 0], 0)]
    for q, m in zip(qi.tolist(), mi.tolist(), strict=True):
        out[(q_ids[q], table.model_ids[m])] = int(values[q, m]) if status.counted[q, m] else None
    return out


# ---------------------------------------------------------------------- helpers
def _id_key(value: Any) -> tuple[int, Any]:
    """Sort ints numerically and everything else as text, ints first."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (0, int(value))
    return (1, str(value))


def _py(value: Any) -> Any:
    """Turn numpy scalars into plain Python values (JSON-safe ids)."""
    return value.item() if isinstance(value, np.generic) else value


def _factorize_sorted(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd

    codes, uniques = pd.factorize(values, sort=False)
    if (codes < 0).any():
        raise ValueError(f"row {int(np.flatnonzero(codes < 0)[0])}: missing id")
    uniques = np.asarray([_py(u) for u in uniques], dtype=object)
    order = sorted(range(len(uniques)), key=lambda i: _id_key(uniques[i]))
    rank = np.empty(len(uniques), dtype=np.int64)
    rank[order] = np.arange(len(uniques))
    return rank[codes], uniques[order]


def _codes_in(values: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, int | None]:
    import pandas as pd

    idx = pd.Index(ids).get_indexer(values)
    bad = np.flatnonzero(idx < 0)
    return idx.astype(np.int64), (int(bad[0]) if bad.size else None)


def _grade_codes(grades: pd.Series, scale: np.ndarray) -> np.ndarray:
    """Map grade values to scale indices; NULL for null; ValueError if off the scale."""
    import pandas as pd

    values = pd.to_numeric(grades, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    raw_null = grades.isna().to_numpy()
    bad_text = np.flatnonzero(np.isnan(values) & ~raw_null)
    if bad_text.size:
        i = int(bad_text[0])
        raise ValueError(f"grades row {i}: grade {grades.iloc[i]!r} is not a number")
    null = np.isnan(values)
    idx = np.searchsorted(scale, np.where(null, scale[0], values))
    idx = np.clip(idx, 0, scale.size - 1)
    off = ~null & (scale[idx] != values)
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise ValueError(
            f"grades row {i}: grade {grades.iloc[i]!r} is not on the scale {scale.tolist()}"
        )
    return np.where(null, NULL, idx)


def _question_frame(questions: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    if "question_id" not in questions.columns:
        raise ValueError("questions frame lacks column 'question_id'")
    if questions["question_id"].duplicated().any():
        dup = questions["question_id"][questions["question_id"].duplicated()].iloc[0]
        raise ValueError(f"questions frame: duplicate question_id {dup!r}")
    out = pd.DataFrame({"question_id": [_py(v) for v in questions["question_id"]]})
    if "category" in questions.columns:
        cat = questions["category"]
    elif "category_id" in questions.columns:
        cat = questions["category_id"]
    else:
        cat = pd.Series([None] * len(questions))
    out["category"] = [None if pd.isna(c) else _py(c) for c in cat]
    if "scored" in questions.columns:
        out["scored"] = questions["scored"].astype(bool).to_numpy()
    elif "status" in questions.columns:
        status = questions["status"].astype(str).str.lower()
        bad = ~status.isin([SCORED, EXCLUDED])
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(
                f"questions row {i}: status {questions['status'].iloc[i]!r} is not "
                f"{SCORED!r} or {EXCLUDED!r}"
            )
        out["scored"] = (status == SCORED).to_numpy()
    else:
        out["scored"] = True
    return out
