"""Reads for scoring: grade rows of a key edition into the engine, cached leaderboards.

The engine (`scoring.engine`) works on arrays; this module is the one place that turns
database rows into them. Rows are read with `values_list` straight into numpy (no model
instances), in a fixed number of queries whatever the size of the benchmark.

Which grade is used (methodology.md rules 1, 4, 5, 8): for a response to question Q in
key edition E, the grade of judge J that counts is the one given against the *effective*
key entry of Q in E (the entry of the nearest edition in [E, parent, ...] that has one),
with J's *current* prompt version. A grade against a superseded entry, or from an older
prompt, is never used for E. Questions whose effective entry in E is excluded by the key
audit (AuditExclusion) or removed by review (`removed=True`) are carried in the table but
not scored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Max, Q

from questions.errors import DomainError, NotFoundError
from questions.models import (
    AuditExclusion,
    Benchmark,
    KeyEdition,
    KeyEntry,
    ModelUnderTest,
    Question,
)
from questions.selectors import (
    edition_ancestry_ids,
    excluded_entry_ids,
    key_entries_for_edition,
    scored_entries,
)
from scoring.engine import (
    AgreementReport,
    GradeTable,
    Leaderboard,
    compute_agreement,
    compute_leaderboard,
)
from scoring.models import Grade, Judge

BANDINGS = ("gap", "ci_overlap")
CACHE_TIMEOUT = 60 * 60 * 24


@dataclass(frozen=True)
class JudgeRef:
    pk: int
    judge_id: str
    prompt_version: str


@dataclass(frozen=True)
class EntryMap:
    """The effective key entry of every question of an edition (arrays indexed by position).

    ``question_pk``, ``entry_pk``, ``entry_edition_pk``: int64 (N,); ``removed``: bool (N,);
    ``excluded``: bool (N,), the entry is excluded by the key audit (AuditExclusion, rule 4);
    ``scored``: bool (N,), the question is scored (`questions.selectors.scored_entries`).
    ``root_pk`` is the edition at the top of the chain (normally `original`).
    """

    edition_pk: int
    chain: list[int]
    question_pk: np.ndarray
    entry_pk: np.ndarray
    entry_edition_pk: np.ndarray
    removed: np.ndarray
    excluded: np.ndarray
    scored: np.ndarray

    @property
    def root_pk(self) -> int:
        return self.chain[-1]

    def as_dict(self) -> dict[int, int]:
        """Return {question pk: effective entry pk}."""
        return dict(zip(self.question_pk.tolist(), self.entry_pk.tolist(), strict=True))


@dataclass
class EditionGrades:
    """Everything the engine needs for one edition, plus the facts the report names."""

    benchmark: Benchmark
    edition: KeyEdition
    judges: list[JudgeRef]
    table: GradeTable | None
    entries: EntryMap
    questions: pd.DataFrame  # pk, question_id, category, excluded_by_audit, removed, scored
    n_grade_rows: int
    notes: list[str] = field(default_factory=list)

    @property
    def judge_ids(self) -> list[str]:
        return [j.judge_id for j in self.judges]


# ----------------------------------------------------------------------------- judges
def scoring_judges(benchmark: Benchmark, judge_ids: list[str] | None = None) -> list[JudgeRef]:
    """Return the judges (role judge) whose grades count, sorted by judge_id.

    Default: every active judge of the benchmark. `judge_ids` names them explicitly;
    raises NotFoundError for an unknown or non-judge id.
    """
    rows = list(
        Judge.objects.filter(benchmark=benchmark, role=Judge.Role.JUDGE)
        .order_by("judge_id")
        .values_list("pk", "judge_id", "prompt_version", "active")
    )
    if judge_ids:
        by_id = {r[1]: r for r in rows}
        unknown = [j for j in judge_ids if j not in by_id]
        if unknown:
            raise NotFoundError(
                f"benchmark {benchmark.name!r} has no judge {', '.join(map(repr, unknown))} "
                f"(judges: {', '.join(by_id) or 'none'})"
            )
        rows = [by_id[j] for j in sorted(set(judge_ids))]
    else:
        rows = [r for r in rows if r[3]]
    return [JudgeRef(pk, jid, pv) for pk, jid, pv, _ in rows]


def auditors(benchmark: Benchmark) -> list[JudgeRef]:
    """Return the benchmark's auditors (role auditor), sorted by judge_id."""
    return [
        JudgeRef(pk, jid, pv)
        for pk, jid, pv in Judge.objects.filter(benchmark=benchmark, role=Judge.Role.AUDITOR)
        .order_by("judge_id")
        .values_list("pk", "judge_id", "prompt_version")
    ]


# ----------------------------------------------------------------------------- key entries
def effective_entries(edition: KeyEdition) -> EntryMap:
    """Return the effective key entry of every question keyed in `edition` as arrays.

    The entries are `questions.selectors.key_entries_for_edition` (value rows, no model
    instances), `scored` is `questions.selectors.scored_entries`; this only lays them out
    for numpy. Three queries.
    """
    chain = edition_ancestry_ids(edition)
    rows = key_entries_for_edition(edition, fields=("id", "edition_id", "removed"), chain=chain)
    excluded = excluded_entry_ids(edition)
    scored = scored_entries(edition, entries=rows, excluded=excluded)
    values = [row for _, row in sorted(rows.items())]  # question pk order, as before
    entry_pk = np.fromiter((r.id for r in values), dtype=np.int64, count=len(values))
    return EntryMap(
        edition_pk=edition.pk,
        chain=chain,
        question_pk=np.fromiter((r.question_id for r in values), dtype=np.int64, count=len(values)),
        entry_pk=entry_pk,
        entry_edition_pk=np.fromiter(
            (r.edition_id for r in values), dtype=np.int64, count=len(values)
        ),
        removed=np.fromiter((r.removed for r in values), dtype=bool, count=len(values)),
        excluded=np.isin(entry_pk, np.fromiter(excluded, dtype=np.int64, count=len(excluded))),
        scored=np.isin(entry_pk, np.fromiter(scored.values(), dtype=np.int64, count=len(scored))),
    )


# ----------------------------------------------------------------------------- grade rows
def _lookup(pks: list[int], values: list[Any]) -> np.ndarray:
    """Return a dense array mapping pk -> value (object), for vectorised id translation."""
    out = np.empty((max(pks) + 1) if pks else 1, dtype=object)
    out[np.asarray(pks, dtype=np.int64)] = values
    return out


def _judge_filter(judges: list[JudgeRef]) -> Q:
    condition = Q(pk__in=[])
    for judge in judges:
        condition |= Q(judge_id=judge.pk, prompt_version=judge.prompt_version)
    return condition


def grade_rows(entries: EntryMap, judges: list[JudgeRef]) -> np.ndarray:
    """Return the usable grade rows as an int64 array (n, 4): entry pk, model pk, judge pk, grade.

    A null grade (unparsed) is -1_000_000 (off any scale); one query.
    """
    if not judges or entries.entry_pk.size == 0:
        return np.empty((0, 4), dtype=np.int64)
    qs = (
        Grade.objects.filter(key_entry_id__in=entries.entry_pk.tolist())
        .filter(_judge_filter(judges))
        # order_by(): Grade's default ordering joins and sorts by response and judge
        # (four extra joins and an on-disk sort); the engine sorts ids itself.
        .order_by()
        .values_list("key_entry_id", "response__model_id", "judge_id", "grade")
    )
    rows = list(qs)
    if not rows:
        return np.empty((0, 4), dtype=np.int64)
    frame = pd.DataFrame.from_records(rows, columns=["entry", "model", "judge", "grade"])
    frame["grade"] = frame["grade"].fillna(NULL_GRADE)
    return frame.to_numpy(dtype=np.int64)


NULL_GRADE = -1_000_000


def load_edition_grades(
    edition: KeyEdition, *, judge_ids: list[str] | None = None
) -> EditionGrades:
    """Load the grade table of `edition` for the engine (about seven queries in all).

    Raises NotFoundError for an unknown judge id. `table` is None when no grade row is
    usable (a note says so); callers decide whether that is an error.
    """
    benchmark = edition.benchmark
    judges = scoring_judges(benchmark, judge_ids)
    entries = effective_entries(edition)

    q_rows = list(
        Question.objects.filter(benchmark=benchmark)
        .order_by()
        .values_list("pk", "question_id", "category__category_id")
    )
    q_frame = pd.DataFrame.from_records(q_rows, columns=["pk", "question_id", "category"])
    removed_by_q = dict(zip(entries.question_pk.tolist(), entries.removed.tolist(), strict=True))
    excluded_qs = set(entries.question_pk[entries.excluded].tolist())
    scored_qs = set(entries.question_pk[entries.scored].tolist())
    q_frame["keyed"] = q_frame["pk"].map(lambda pk: pk in removed_by_q)
    q_frame["excluded_by_audit"] = q_frame["pk"].map(lambda pk: pk in excluded_qs)
    q_frame["removed"] = q_frame["pk"].map(lambda pk: bool(removed_by_q.get(pk, False)))
    q_frame["scored"] = q_frame["pk"].map(lambda pk: pk in scored_qs)
    q_frame = q_frame[q_frame["keyed"]].reset_index(drop=True)

    rows = grade_rows(entries, judges)
    notes: list[str] = []
    table = None
    if len(rows):
        entry_to_q = _lookup(entries.entry_pk.tolist(), entries.question_pk.tolist())
        qid_of = _lookup(q_frame["pk"].tolist(), q_frame["question_id"].tolist())
        model_pairs = list(
            ModelUnderTest.objects.filter(benchmark=benchmark)
            .order_by()
            .values_list("pk", "model_id")
        )
        mid_of = _lookup([p for p, _ in model_pairs], [m for _, m in model_pairs])
        jid_of = _lookup([j.pk for j in judges], [j.judge_id for j in judges])
        q_pk = entry_to_q[rows[:, 0]].astype(np.int64)
        grade = rows[:, 3].astype(float)
        grade[rows[:, 3] == NULL_GRADE] = np.nan
        frame = pd.DataFrame(
            {
                "question_id": qid_of[q_pk],
                "model_id": mid_of[rows[:, 1]],
                "judge_id": jid_of[rows[:, 2]],
                "grade": grade,
            }
        )
        table = GradeTable.from_frame(
            frame,
            scale=benchmark.grade_scale or [0, 1, 2],
            questions=q_frame[["question_id", "category", "scored"]],
        )
        graded = set(table.judge_ids.tolist())
        idle = [j.judge_id for j in judges if j.judge_id not in graded]
        if idle:
            who = f"judge {idle[0]} has" if len(idle) == 1 else f"judges {', '.join(idle)} have"
            notes.append(f"{who} no grade against this edition's key entries")
    else:
        notes.append(f"no grade against the key entries of edition {edition.name!r} yet")
    return EditionGrades(
        benchmark=benchmark,
        edition=edition,
        judges=judges,
        table=table,
        entries=entries,
        questions=q_frame,
        n_grade_rows=len(rows),
        notes=notes,
    )


# ----------------------------------------------------------------------------- data version
def data_version(edition: KeyEdition, judges: list[JudgeRef]) -> str:
    """Return a short digest that changes whenever an input of the edition's figures changes.

    Covers: the grades of the benchmark (max id + count), exclusions by audit of the chain's
    entries (count + max id), the edition chain (ids, status, entries max id + count) and
    the judges' prompt versions. Four queries (with the chain's).
    """
    grades = Grade.objects.filter(judge__benchmark_id=edition.benchmark_id).aggregate(
        n=Count("id"), last=Max("id")
    )
    chain = edition_ancestry_ids(edition)
    excluded = AuditExclusion.objects.filter(key_entry__edition_id__in=chain).aggregate(
        n=Count("id"), last=Max("id")
    )
    keyed = KeyEntry.objects.filter(edition_id__in=chain).aggregate(n=Count("id"), last=Max("id"))
    parts = [
        grades["n"],
        grades["last"],
        excluded["n"],
        excluded["last"],
        chain,
        edition.status,
        edition.published_at,
        keyed["n"],
        keyed["last"],
        [(j.pk, j.prompt_version) for j in judges],
    ]
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------- results
@dataclass
class BoardResult:
    """A leaderboard and agreement report for one edition with what they were computed from."""

    benchmark: str
    edition: str
    edition_status: str
    judges: list[str]
    band_gap: float
    banding: str
    n_bootstrap: int
    seed: int
    leaderboard: Leaderboard | None
    agreement: AgreementReport | None
    questions_total: int
    questions_scored: int
    excluded_by_audit: int
    removed_by_review: int
    notes: list[str]
    version: str

    def leaderboard_dict(self) -> dict[str, Any]:
        """Return the cli.md `leaderboard --format json` document (plus extra keys)."""
        base: dict[str, Any] = {
            "benchmark": self.benchmark,
            "edition": self.edition,
            "judges": list(self.judges),
            "band_gap": self.band_gap,
            "banding": self.banding,
            "agreement_rate": None,
            "n_bands": 0,
            "n_bootstrap": self.n_bootstrap,
            "seed": self.seed,
            "questions_total": self.questions_total,
            "questions_scored": self.questions_scored,
            "excluded_by_audit": self.excluded_by_audit,
            "removed_by_review": self.removed_by_review,
            "models": [],
        }
        if self.leaderboard is not None:
            lb = self.leaderboard.to_dict()
            lb.pop("judges", None)
            lb.pop("questions_scored", None)
            base.update(lb)
        base["notes"] = list(self.notes) + [
            n for n in (base.get("notes") or []) if n not in self.notes
        ]
        return base

    def agreement_dict(self) -> dict[str, Any]:
        """Return the cli.md `agreement --format json` document (plus extra keys)."""
        out: dict[str, Any] = {
            "benchmark": self.benchmark,
            "edition": self.edition,
            "judges": list(self.judges),
            "pairs": [],
            "notes": list(self.notes),
        }
        if self.agreement is not None:
            ag = self.agreement.to_dict()
            out["scale"] = ag["scale"]
            out["pairs"] = ag["pairs"]
            out["notes"] += [n for n in ag["notes"] if n not in out["notes"]]
        elif len(self.judges) < 2:
            out["notes"].append("one judge only: agreement needs two judges")
        return out


def _defaults(band_gap, n_bootstrap, seed) -> tuple[float, int, int]:
    return (
        float(settings.SNAGLIST_BAND_GAP if band_gap is None else band_gap),
        int(settings.SNAGLIST_BOOTSTRAP if n_bootstrap is None else n_bootstrap),
        int(settings.SNAGLIST_BOOTSTRAP_SEED if seed is None else seed),
    )


def compute_board(
    data: EditionGrades,
    *,
    band_gap: float | None = None,
    n_bootstrap: int | None = None,
    seed: int | None = None,
    banding: str = "gap",
    version: str = "",
) -> BoardResult:
    """Run the engine on loaded grades; no database access."""
    band_gap, n_bootstrap, seed = _defaults(band_gap, n_bootstrap, seed)
    if banding not in BANDINGS:
        raise DomainError(f"banding must be one of {', '.join(BANDINGS)}, not {banding!r}")
    q = data.questions
    board = agreement = None
    notes = list(data.notes)
    if data.table is not None:
        board = compute_leaderboard(
            data.table, band_gap=band_gap, banding=banding, n_bootstrap=n_bootstrap, seed=seed
        )
        agreement = compute_agreement(data.table)
    return BoardResult(
        benchmark=data.benchmark.name,
        edition=data.edition.name,
        edition_status=data.edition.status,
        judges=data.judge_ids,
        band_gap=band_gap,
        banding=banding,
        n_bootstrap=n_bootstrap,
        seed=seed,
        leaderboard=board,
        agreement=agreement,
        questions_total=int(len(q)),
        questions_scored=int(q["scored"].sum()) if len(q) else 0,
        excluded_by_audit=int(q["excluded_by_audit"].sum()) if len(q) else 0,
        removed_by_review=int((q["removed"] & ~q["excluded_by_audit"]).sum()) if len(q) else 0,
        notes=notes,
        version=version,
    )


def board_for_edition(
    edition: KeyEdition,
    *,
    judge_ids: list[str] | None = None,
    band_gap: float | None = None,
    n_bootstrap: int | None = None,
    seed: int | None = None,
    banding: str = "gap",
    use_cache: bool = True,
) -> BoardResult:
    """Return the leaderboard and agreement of `edition`, from the cache when still valid.

    Cache key: (benchmark, edition, judges, band gap, bootstrap, seed, banding) plus the
    data version (`data_version`), so a new grade, an exclusion or a changed edition
    computes afresh. Raises NotFoundError for an unknown judge, DomainError for a bad
    banding.
    """
    band_gap, n_bootstrap, seed = _defaults(band_gap, n_bootstrap, seed)
    if banding not in BANDINGS:
        raise DomainError(f"banding must be one of {', '.join(BANDINGS)}, not {banding!r}")
    judges = scoring_judges(edition.benchmark, judge_ids)
    version = data_version(edition, judges)
    key = (
        "scoring:board:"
        + hashlib.sha1(
            repr(
                (
                    edition.benchmark_id,
                    edition.pk,
                    [j.judge_id for j in judges],
                    band_gap,
                    n_bootstrap,
                    seed,
                    banding,
                    version,
                )
            ).encode()
        ).hexdigest()
    )
    if use_cache:
        hit = cache.get(key)
        if hit is not None:
            return hit
    data = load_edition_grades(edition, judge_ids=[j.judge_id for j in judges] or None)
    result = compute_board(
        data,
        band_gap=band_gap,
        n_bootstrap=n_bootstrap,
        seed=seed,
        banding=banding,
        version=version,
    )
    if use_cache:
        cache.set(key, result, CACHE_TIMEOUT)
    return result


def answered_attempts(pairs: Iterable[tuple[int, int, int, str]]) -> dict[tuple, int]:
    """Return {(response id, judge id, key entry id, prompt version): calls sent} (1 query).

    A call sent is a ledger row (scoring.models.JudgeCall) with outcome `ok` (the judge
    replied, parsed or not) or `lost` (sent and paid; a later run that takes the pair again
    marks the earlier runs' `ok` rows lost, ledger.mark_lost_many). Pairs with none are
    absent. Used to cap how often an unparsed reply is asked again
    (SNAGLIST_UNPARSED_RETRIES, issue 17).
    """
    from scoring.models import JudgeCall

    wanted = set(pairs)
    if not wanted:
        return {}
    counts: dict[tuple, int] = {}
    for pair in (
        JudgeCall.objects.filter(
            outcome__in=[JudgeCall.Outcome.OK, JudgeCall.Outcome.LOST],
            response_id__in={p[0] for p in wanted},
            judge_id__in={p[1] for p in wanted},
        )
        .order_by()
        .values_list("response_id", "judge_id", "key_entry_id", "prompt_version")
    ):
        if pair in wanted:
            counts[pair] = counts.get(pair, 0) + 1
    return counts


def asks_left(grade_is_null: bool, answered: int, retries: int) -> bool:
    """Return True when a pair's stored grade should be asked for again (issue 17).

    Only a null (unparsed) grade is asked again, while its calls sent (answered_attempts)
    do not exceed `retries` (the first ask plus `retries` more). An imported null grade has
    no call: it is asked (when its judge can grade).
    """
    return grade_is_null and answered <= retries


def unparsed_past_retries(edition: KeyEdition, retries: int) -> dict[int, list[dict]]:
    """Return {question pk: [{"model", "judge", "asked"}]} of replies that stay unparsed.

    A pair of the edition's current judge panel (scoring_judges, current prompt versions)
    whose grade against the question's effective entry is null and will not be asked
    again: its calls sent (answered_attempts) exceed `retries`, or its judge cannot grade (no backend or
    inactive: imported grades only). Three queries plus the entries' selector.
    """
    entries = effective_entries(edition)
    judges = {j.pk: j for j in Judge.objects.filter(benchmark_id=edition.benchmark_id)}
    panel = {ref.pk: ref.prompt_version for ref in scoring_judges(edition.benchmark)}
    entry_q = dict(zip(entries.entry_pk.tolist(), entries.question_pk.tolist(), strict=True))
    rows = list(
        Grade.objects.filter(
            key_entry_id__in=list(entry_q), judge_id__in=list(panel), grade__isnull=True
        )
        .order_by()
        .values_list(
            "response_id", "judge_id", "key_entry_id", "prompt_version", "response__model__model_id"
        )
    )
    rows = [r for r in rows if panel.get(r[1]) == r[3]]
    answered = answered_attempts(r[:4] for r in rows)
    out: dict[int, list[dict]] = {}
    for r in rows:
        judge = judges[r[1]]
        can_ask = bool(judge.backend) and judge.active
        asked = answered.get(r[:4], 0)
        if can_ask and asks_left(True, asked, retries):
            continue
        out.setdefault(entry_q[r[2]], []).append(
            {"model": r[4], "judge": judge.judge_id, "asked": asked}
        )
    return {q: sorted(v, key=lambda d: (d["model"], d["judge"])) for q, v in out.items()}
