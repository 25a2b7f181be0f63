"""Reads for scoring: grade rows of a key edition into the engine, cached leaderboards.

The engine (`engine`) works on arrays; this module is the one place that turns
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Max, Q

from engine import (
    AgreementReport,
    GradeTable,
    Leaderboard,
    compute_agreement,
    compute_leaderboard,
)
from questions.errors import DomainError, NotFoundError
from questions.models import (
    AuditExclusion,
    Benchmark,
    KeyEdition,
    KeyEntry,
    ModelUnderTest,
    Question,
    Response,
)
from questions.selectors import (
    edition_ancestry_ids,
    excluded_entry_ids,
    key_entries_for_edition,
    scored_entries,
)
from scoring.completeness import Completeness, missing_grades
from scoring.models import Grade, Judge
from scoring.refs import EntryMap, JudgeRef

if TYPE_CHECKING:  # pandas costs ~1 s to import: only functions that build frames load it
    import pandas as pd

BANDINGS = ("gap", "ci_overlap")
CACHE_TIMEOUT = 60 * 60 * 24


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
    judge_set: JudgeSet | None = None
    completeness: Completeness | None = None

    @property
    def judge_ids(self) -> list[str]:
        return [j.judge_id for j in self.judges]


# ----------------------------------------------------------------------------- judges
PANEL = "panel"  # the benchmark's judge panel (PanelMember rows, pinned prompt versions)
REQUESTED = "requested"  # judges named explicitly (--judges), at their current prompt versions
NO_PANEL = "active"  # no panel set: every active judge at its current prompt version
CANDIDATE = "candidate"  # the benchmark's candidate panel (CandidateMember rows; issue 31)


@dataclass(frozen=True)
class JudgeSet:
    """The judges a figure is computed from and where that set came from.

    ``kind`` is PANEL, REQUESTED, NO_PANEL or CANDIDATE (see the constants above); ``judges`` are
    sorted by judge_id, each with the prompt version whose grades are used.
    """

    judges: tuple[JudgeRef, ...]
    kind: str

    @property
    def ids(self) -> list[str]:
        return [j.judge_id for j in self.judges]

    def describe(self) -> list[dict[str, str]]:
        """Return [{"judge": judge_id, "prompt_version": v}] for JSON documents."""
        return [{"judge": j.judge_id, "prompt_version": j.prompt_version} for j in self.judges]


def panel_judges(benchmark: Benchmark) -> list[JudgeRef]:
    """Return the benchmark's judge panel (PanelMember rows) sorted by judge_id; [] if unset."""
    from scoring.models import PanelMember

    return [
        JudgeRef(pk, jid, pv)
        for pk, jid, pv in PanelMember.objects.filter(benchmark=benchmark)
        .order_by("judge__judge_id")
        .values_list("judge_id", "judge__judge_id", "prompt_version")
    ]


def panel_drift(benchmarks: Sequence[Benchmark]) -> dict[str, list[str]]:
    """Say, per benchmark name and one sentence a judge, where a re-score would grade with
    something the judge panel does not count (methodology rule 12): a judge able to grade
    (active, with a backend) whose current prompt version is not the one the panel pins, or
    that is not on the panel; then the `panel --set` command that moves the panel to the
    versions its judges grade with now. Benchmarks where they agree, or without a panel
    (every active judge counts then), are left out. Two queries for any number.
    """
    from scoring.models import PanelMember

    names = {b.pk: b.name for b in benchmarks}
    panels: dict[int, dict[str, str]] = {}
    for bench, jid, pinned in PanelMember.objects.filter(benchmark_id__in=names).values_list(
        "benchmark_id", "judge__judge_id", "prompt_version"
    ):
        panels.setdefault(bench, {})[jid] = pinned
    graders = (
        Judge.objects.filter(benchmark_id__in=panels, role=Judge.Role.JUDGE, active=True)
        .exclude(backend="")
        .order_by("benchmark_id", "judge_id")
        .values_list("benchmark_id", "judge_id", "prompt_version")
    )
    said: dict[int, list[str]] = {}
    moved = {bench: dict(panel) for bench, panel in panels.items()}
    for bench, jid, version in graders:
        pinned = panels[bench].get(jid)
        if pinned is None:
            said.setdefault(bench, []).append(
                f"{jid} is not on the judge panel: its grades count in no published figure."
            )
        elif pinned != version:
            moved[bench][jid] = version
            said.setdefault(bench, []).append(
                f"{jid} now grades with prompt {version}, but the judge panel counts its "
                f"{pinned} grades: a re-score adds {version} grades that no figure uses until "
                "the panel is moved."
            )
    for bench, panel in moved.items():
        if panel != panels[bench]:
            spec = ",".join(f"{j}@{v}" for j, v in sorted(panel.items()))
            said[bench].append(
                "To count the panel's judges at the versions they grade with now: "
                f"manage.py panel --benchmark {names[bench]} --set {spec}"
            )
    return {names[bench]: lines for bench, lines in sorted(said.items(), key=lambda x: names[x[0]])}


def resolve_judges(benchmark: Benchmark, judge_ids: list[str] | None = None) -> JudgeSet:
    """Return the judges whose grades count: the one place the default set is chosen.

    Default (no `judge_ids`): the benchmark's judge panel at its pinned prompt versions
    (methodology rule 12), so adding a judge or grades of another prompt version changes
    no figure; a benchmark without a panel falls back to every active judge (kind
    NO_PANEL, which callers must say). `judge_ids` asks for another set, each `ID` at the
    judge's current prompt version or `ID@VERSION` at that one; only when that is exactly
    the panel (judges and versions) is it the panel, so a judge whose prompt moved past
    the panel's pin is shown at its new version (issue 31). Raises NotFoundError for an
    unknown or non-judge id. Two queries at most.
    """
    panel = panel_judges(benchmark)
    if not judge_ids:
        if panel:
            return JudgeSet(tuple(panel), PANEL)
        wanted = None
    else:
        pins = {jid.strip(): v.strip() for jid, _, v in (j.partition("@") for j in judge_ids)}
        wanted = sorted(pins)
    rows = list(
        Judge.objects.filter(benchmark=benchmark, role=Judge.Role.JUDGE)
        .order_by("judge_id")
        .values_list("pk", "judge_id", "prompt_version", "active")
    )
    if wanted:
        by_id = {r[1]: r for r in rows}
        unknown = [j for j in wanted if j not in by_id]
        if unknown:
            raise NotFoundError(
                f"benchmark {benchmark.name!r} has no judge {', '.join(map(repr, unknown))} "
                f"(judges: {', '.join(by_id) or 'none'})"
            )
        asked = tuple(JudgeRef(by_id[j][0], j, pins[j] or by_id[j][2]) for j in wanted)
        return JudgeSet(asked, PANEL if list(asked) == panel else REQUESTED)
    rows = [r for r in rows if r[3]]
    return JudgeSet(tuple(JudgeRef(pk, jid, pv) for pk, jid, pv, _ in rows), NO_PANEL)


def scoring_judges(benchmark: Benchmark, judge_ids: list[str] | None = None) -> list[JudgeRef]:
    """Return the judges (role judge) whose grades count, sorted by judge_id.

    `resolve_judges(benchmark, judge_ids).judges` as a list: the judge panel by default.
    """
    return list(resolve_judges(benchmark, judge_ids).judges)


def judge_set_note(benchmark: Benchmark, judge_set: JudgeSet) -> str | None:
    """Return the sentence every output carries when its judges are not the panel, or None."""
    if judge_set.kind == NO_PANEL:
        return (
            f"benchmark {benchmark.name!r} has no judge panel: these figures use every active "
            "judge and change when one is added (an admin sets the panel: manage.py panel --set)"
        )
    if judge_set.kind == REQUESTED:
        return (
            "judges chosen for this query, not the benchmark's judge panel: these are not "
            "the published figures"
        )
    if judge_set.kind == CANDIDATE:
        return (
            "the candidate panel, not the benchmark's judge panel: a preview for admins and "
            "editors, not the published figures, until an admin adopts it"
        )
    return None


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
    import pandas as pd

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
    edition: KeyEdition,
    *,
    judge_ids: list[str] | None = None,
    judge_set: JudgeSet | None = None,
) -> EditionGrades:
    """Load the grade table of `edition` for the engine (about nine queries in all).

    `completeness` counts the responses of scored questions lacking a grade from a judge
    of the set (`scoring.completeness.missing_grades`); `notes` say so in words.

    The judges are `judge_set` when given (already resolved), else
    `resolve_judges(benchmark, judge_ids)`: the judge panel by default. Raises
    NotFoundError for an unknown judge id. `table` is None when no grade row is usable (a
    note says so); callers decide whether that is an error.
    """
    import pandas as pd

    benchmark = edition.benchmark
    if judge_set is None:
        judge_set = resolve_judges(benchmark, judge_ids)
    judges = list(judge_set.judges)
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
    completeness = missing_grades(
        edition_name=edition.name, entries=entries, judges=judges, rows=rows
    )
    notes: list[str] = [n for n in [judge_set_note(benchmark, judge_set)] if n]
    notes += completeness.sentences()
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
        judge_set=judge_set,
        completeness=completeness,
    )


# ----------------------------------------------------------------------------- data version
def data_version(edition: KeyEdition, judges: list[JudgeRef]) -> str:
    """Return a short digest that changes whenever an input of the edition's figures changes.

    Covers: the grades of the benchmark (max id + count), exclusions by audit of the chain's
    entries (count + max id), the edition chain (ids, status, entries max id + count), the
    benchmark's responses (count + max id, for the missing-grade counts) and the judges'
    prompt versions. Five queries (with the chain's).
    """
    grades = Grade.objects.filter(judge__benchmark_id=edition.benchmark_id).aggregate(
        n=Count("id"), last=Max("id")
    )
    chain = edition_ancestry_ids(edition)
    excluded = AuditExclusion.objects.filter(key_entry__edition_id__in=chain).aggregate(
        n=Count("id"), last=Max("id")
    )
    keyed = KeyEntry.objects.filter(edition_id__in=chain).aggregate(n=Count("id"), last=Max("id"))
    # Responses too: a response with no grade yet changes the completeness figures.
    responses = Response.objects.filter(question__benchmark_id=edition.benchmark_id).aggregate(
        n=Count("id"), last=Max("id")
    )
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
        responses["n"],
        responses["last"],
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
    panel: list[dict[str, str]] = field(default_factory=list)
    judge_set: str = PANEL
    completeness: Completeness | None = None

    def leaderboard_dict(self) -> dict[str, Any]:
        """Return the cli.md `leaderboard --format json` document (plus extra keys)."""
        base: dict[str, Any] = {
            "benchmark": self.benchmark,
            "edition": self.edition,
            "judges": list(self.judges),
            "panel": [dict(m) for m in self.panel],
            "judge_set": self.judge_set,
            "band_gap": self.band_gap,
            "banding": self.banding,
            "agreement_rate": None,
            "n_bands": 0,
            "n_tiers": 0,
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
        if self.completeness is not None:
            # The engine sees only responses with a grade row; these counts are over every
            # response of a scored question (rule 12: missing grades are never silent).
            base.update(self.completeness.to_dict())
            by_model = self.completeness.by_model
            for m in base["models"]:
                m["n_missing_grade"] = by_model.get(m["model_id"], 0)
            shown = {m["model_id"] for m in base["models"]}
            unseen = [
                f"model {model_id} has no row: none of its {by_model[model_id]} responses "
                "has a grade from these judges"
                for model_id in sorted(set(by_model) - shown)
            ]
        else:
            unseen = []
        base["notes"] = (
            list(self.notes)
            + [n for n in (base.get("notes") or []) if n not in self.notes]
            + unseen
        )
        return base

    def agreement_dict(self) -> dict[str, Any]:
        """Return the cli.md `agreement --format json` document (plus extra keys)."""
        out: dict[str, Any] = {
            "benchmark": self.benchmark,
            "edition": self.edition,
            "judges": list(self.judges),
            "panel": [dict(m) for m in self.panel],
            "judge_set": self.judge_set,
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
            data.table,
            band_gap=band_gap,
            banding=banding,
            n_bootstrap=n_bootstrap,
            seed=seed,
            min_counted=settings.SNAGLIST_MIN_COUNTED,
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
        panel=data.judge_set.describe() if data.judge_set else [],
        judge_set=data.judge_set.kind if data.judge_set else PANEL,
        completeness=data.completeness,
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
    judge_set: JudgeSet | None = None,
) -> BoardResult:
    """Return the leaderboard and agreement of `edition`, from the cache when still valid.

    The judges are `judge_set` when given (a candidate panel's, say), else
    `resolve_judges(benchmark, judge_ids)`: the judge panel by default;
    `panel` and `judge_set` on the result say which. Cache key: (benchmark, edition, kind
    of judge set, judges, band gap, bootstrap, seed, banding) plus the data version (`data_version`), so a new grade, an exclusion or a changed edition
    computes afresh. Raises NotFoundError for an unknown judge, DomainError for a bad
    banding.
    """
    band_gap, n_bootstrap, seed = _defaults(band_gap, n_bootstrap, seed)
    if banding not in BANDINGS:
        raise DomainError(f"banding must be one of {', '.join(BANDINGS)}, not {banding!r}")
    judge_set = judge_set or resolve_judges(edition.benchmark, judge_ids)
    judges = list(judge_set.judges)
    version = data_version(edition, judges)
    key = (
        "scoring:board:"
        + hashlib.sha1(
            repr(
                (
                    edition.benchmark_id,
                    edition.pk,
                    judge_set.kind,
                    [j.judge_id for j in judges],
                    band_gap,
                    n_bootstrap,
                    seed,
                    banding,
                    settings.SNAGLIST_MIN_COUNTED,
                    version,
                    "tiers",  # rows cached before ModelScore.tier carry no tiers
                )
            ).encode()
        ).hexdigest()
    )
    if use_cache:
        hit = cache.get(key)
        if hit is not None:
            return hit
    data = load_edition_grades(edition, judge_set=judge_set)
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
