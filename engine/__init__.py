"""The scoring engine: pure maths over a dense grade table (no Django import).

Public API (methodology.md rules in brackets):

``GradeTable.from_frame(grades, *, scale, questions=None) -> GradeTable``
    Pivot grade rows (question_id, model_id, judge_id, grade-or-null) into a
    dense int array [question, model, judge].  ``questions`` carries each
    question's category and status ("scored"/"excluded").  This is the entry
    point for a Django selector: build two DataFrames, call this.
    Also ``GradeTable.from_records(...)`` and ``GradeTable.from_arrays(...)``.

``compute_leaderboard(table, *, band_gap=DEFAULT_BAND_GAP, banding="gap", n_bootstrap=1000,
seed=0, confidence=0.95) -> Leaderboard``
    Per model n_counted / n_excluded_disagreement / n_unparsed /
    n_missing_grade, score in percent [1, 2], bootstrap or Wilson interval,
    rank and band [9]; per category the same figures; agreement rate [1].
    ``Leaderboard.with_banding("ci_overlap")`` re-bands without recomputing.

``model_scores(table) -> {model_id: score %}``
    Rule 2 scores alone, the same figures as ``compute_leaderboard`` (for triage's
    detectors) [1, 2].

``compute_agreement(table, *, scored_only=True) -> AgreementReport``
    Per judge pair: n, n_missing, exact_agreement, cohen_kappa,
    cohen_kappa_quadratic, krippendorff_alpha_ordinal, confusion, notes.
    ``pair_statistics(grades_a, grades_b, scale)`` does one pair of vectors.

``compare_leaderboards(original, corrected, *, top=3, bottom=5) -> Robustness``
    Rank and band of each model under two key editions, rank move,
    top3_unchanged, bottom5_unchanged, Kendall's tau, band changes [10].

``grade_changes(before, after, *, question_ids=None) -> list[GradeChange]``
    Per corrected question: up / down / same / not_comparable (newly, no longer,
    neither counted) [11].
    ``agreed_grades(table)`` gives the {(question_id, model_id): grade|None}
    input; ``agreed_grade_rows(rows, scale)`` the same rule for a few responses (the
    item page's), one grade per panel judge in each row.

``assign_bands(scores, gap=DEFAULT_BAND_GAP) -> list[Placement]`` and
``assign_bands_ci_overlap(scores, intervals) -> list[Placement]``
    Ranks ("=N" for ties, competition ranking) and bands of a score mapping.

``wilson_interval(k, n, z=1.96) -> (low, high)``
    Wilson (1927) score interval, fractions 0-1.

Every result is a dataclass whose ``to_dict()`` returns JSON-safe values with
the keys of /work/shared/spec/cli.md (no NaN: undefined figures are None).
Percentages are 0-100, rates and statistics fractions 0-1.
"""

from __future__ import annotations

from .agreement import AgreementReport, PairAgreement, compute_agreement, pair_statistics
from .bands import Placement, assign_bands, assign_bands_ci_overlap
from .intervals import bootstrap_score_intervals, wilson_interval
from .leaderboard import CategoryScore, Leaderboard, ModelScore, compute_leaderboard, model_scores
from .robustness import GradeChange, ModelMove, Robustness, compare_leaderboards, grade_changes
from .table import GradeTable, agreed_grade_rows, agreed_grades, classify_responses

__all__ = [
    "AgreementReport",
    "CategoryScore",
    "GradeChange",
    "GradeTable",
    "Leaderboard",
    "ModelMove",
    "ModelScore",
    "PairAgreement",
    "Placement",
    "Robustness",
    "agreed_grade_rows",
    "agreed_grades",
    "assign_bands",
    "assign_bands_ci_overlap",
    "bootstrap_score_intervals",
    "classify_responses",
    "compare_leaderboards",
    "compute_agreement",
    "compute_leaderboard",
    "grade_changes",
    "model_scores",
    "pair_statistics",
    "wilson_interval",
]
