"""Judges against people (issue 31 item 2): draw a blind sample, record people's grades,
and compute the weighted figures for the report, `agreement` and the public site.

Writes (`human_sample_draw`, `human_grade_record`) run in one transaction each and log
themselves in the audit log (core.actions HUMAN_SAMPLE_DRAW, HUMAN_GRADE_RECORD). The
mathematics is engine.human's; the judges' grades come from
scoring.selectors.load_edition_grades, the same table as the leaderboard.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from core.actions import Action
from core.services import audit_log
from engine import classify_responses
from engine.human import (
    DEFAULT_DISAGREE_SHARE,
    STRATA,
    HumanUnits,
    draw_sample,
    human_agreement,
    inverse_probability_weights,
)
from questions.errors import DomainError, NotFoundError
from questions.models import Benchmark, KeyEdition, Response
from questions.selectors import latest_published_edition
from scoring.human_models import HumanGrade, HumanSample, HumanSampleItem
from scoring.selectors import CACHE_TIMEOUT, EditionGrades, data_version, load_edition_grades

#: A sample's size unless the person drawing it says otherwise.
DEFAULT_SIZE = 60


# ------------------------------------------------------------------------------ writes
@transaction.atomic
def human_sample_draw(
    benchmark: Benchmark,
    *,
    actor: Any,
    edition: KeyEdition | None = None,
    size: int = DEFAULT_SIZE,
    seed: int = 0,
    disagree_share: float = DEFAULT_DISAGREE_SHARE,
    name: str = "",
) -> HumanSample:
    """Draw a blind grading sample of `size` responses of `edition` (default: the latest
    published) and store it, logged as HUMAN_SAMPLE_DRAW.

    The population is every response of a scored question with a grade row from a judge
    of the panel; its strata are "disagree" (every judge graded, not all alike) and
    "rest"; engine.human.draw_sample picks the responses with `seed`. Each item
    keeps the key entry the judges graded against. Raises DomainError when there is no
    published edition, no graded response, or the name is taken.
    """
    edition = edition or latest_published_edition(benchmark)
    if edition is None:
        raise DomainError(f"benchmark {benchmark.name!r} has no published key edition")
    data = load_edition_grades(edition)
    table = data.table
    if table is None:
        raise DomainError(f"key edition {edition.name} has no grades to draw a sample from")
    status = classify_responses(table.codes, table.scale)
    population = status.present & table.scored[:, None]
    q_idx, m_idx = np.nonzero(population)
    if q_idx.size == 0:
        raise DomainError(f"key edition {edition.name} has no graded response of a scored question")
    draw = draw_sample(
        status.disagreement[q_idx, m_idx], size, seed=seed, disagree_share=disagree_share
    )
    name = name or f"s{HumanSample.objects.filter(benchmark=benchmark).count() + 1}"
    if HumanSample.objects.filter(benchmark=benchmark, name=name).exists():
        raise DomainError(f"benchmark {benchmark.name!r} already has a sample called {name!r}")
    sample = HumanSample.objects.create(
        benchmark=benchmark,
        name=name,
        edition=edition,
        seed=seed,
        size=len(draw.order),
        disagree_share=disagree_share,
        judges=data_judges(data),
        created_by=actor,
    )
    pk_of_question = dict(zip(data.questions["question_id"], data.questions["pk"], strict=True))
    entry_of = data.entries.as_dict()
    response_of = {
        (q, m): pk
        for q, m, pk in Response.objects.filter(question__benchmark=benchmark).values_list(
            "question__question_id", "model__model_id", "pk"
        )
    }
    items = []
    for position, (k, stratum) in enumerate(zip(draw.order, draw.strata, strict=True), start=1):
        qid, mid = table.question_ids[q_idx[k]], table.model_ids[m_idx[k]]
        items.append(
            HumanSampleItem(
                sample=sample,
                response_id=response_of[(qid, mid)],
                key_entry_id=entry_of[pk_of_question[qid]],
                position=position,
                stratum=stratum,
                stratum_population=draw.population[stratum],
                stratum_drawn=draw.drawn[stratum],
            )
        )
    HumanSampleItem.objects.bulk_create(items)
    audit_log(
        actor=actor,
        action=Action.HUMAN_SAMPLE_DRAW,
        target_type="human_sample",
        target_id=sample.pk,
        target_label=str(sample),
        benchmark_name=benchmark.name,
        after={
            "name": name,
            "edition": edition.name,
            "seed": seed,
            "size": sample.size,
            "disagree_share": disagree_share,
            "population": draw.population,
            "drawn": draw.drawn,
        },
    )
    return sample


def data_judges(data: EditionGrades) -> list[dict[str, str]]:
    """The judges of `data` with their prompt versions, as stored on a sample."""
    return [{"judge_id": j.judge_id, "prompt_version": j.prompt_version} for j in data.judges]


@transaction.atomic
def human_grade_record(
    item: HumanSampleItem, *, reviewer: Any, grade: int, note: str = ""
) -> HumanGrade:
    """Record (or change) `reviewer`'s blind grade of a sampled response, logged as
    HUMAN_GRADE_RECORD with the grade before and after.

    `grade` must be on the benchmark's grade scale (Benchmark.grade_scale, [0, 1, 2] when
    unset); a second call by the same reviewer replaces their grade and note but keeps
    the time of the first, so "who graded first" stays fixed. Raises DomainError for a
    grade off the scale.
    """
    benchmark = item.sample.benchmark
    scale = list(benchmark.grade_scale or [0, 1, 2])
    if grade not in scale:
        raise DomainError(f"grade {grade!r} is not on the scale {scale}")
    existing = HumanGrade.objects.select_for_update().filter(item=item, reviewer=reviewer).first()
    before = {"grade": existing.grade, "note": existing.note} if existing else None
    if existing is None:
        row = HumanGrade.objects.create(
            item=item, reviewer=reviewer, grade=grade, note=note, created_at=timezone.now()
        )
    else:
        existing.grade, existing.note = grade, note
        existing.save(update_fields=["grade", "note"])
        row = existing
    audit_log(
        actor=reviewer,
        action=Action.HUMAN_GRADE_RECORD,
        target_type="human_grade",
        target_id=row.pk,
        target_label=f"{item.response} in sample {item.sample.name}",
        benchmark_name=benchmark.name,
        before=before,
        after={"grade": grade, "note": note, "sample": item.sample.name, "position": item.position},
    )
    return row


# ------------------------------------------------------------------------------- reads
def latest_sample(benchmark: Benchmark) -> HumanSample | None:
    """The benchmark's most recently drawn sample, or None."""
    return HumanSample.objects.filter(benchmark=benchmark).order_by("-created_at", "-id").first()


def human_changed_at(benchmark: Benchmark) -> Any:
    """When the benchmark's blind grades last changed (a draw or a grade, new or replaced,
    from the audit log), or None: for the public site's ETag and Last-Modified."""
    from django.db.models import Max

    from core.models import AuditLogEntry

    return AuditLogEntry.objects.filter(
        benchmark_name=benchmark.name,
        action__in=[str(Action.HUMAN_SAMPLE_DRAW), str(Action.HUMAN_GRADE_RECORD)],
    ).aggregate(t=Max("created_at"))["t"]


def next_item(sample: HumanSample, user: Any) -> HumanSampleItem | None:
    """The first item (by position) `user` has not graded, or None when they graded all.

    Positions are a random order of the sample, so every reviewer's first k grades are
    a random subsample of each stratum, and a second reviewer starting from the top
    grades the same responses again (people against people)."""
    return sample.items.exclude(grades__reviewer=user).order_by("position").first()


def sample_progress(sample: HumanSample, user: Any) -> dict[str, int]:
    """Counts for the grading page: items, graded (by anyone), graded twice, by `user`."""
    counts = sample.items.annotate(n=Count("grades")).aggregate(
        graded=Count("pk", filter=Q(n__gte=1)), twice=Count("pk", filter=Q(n__gte=2))
    )
    mine = HumanGrade.objects.filter(item__sample=sample, reviewer=user).count()
    return {
        "items": sample.size,
        "graded": counts["graded"],
        "twice": counts["twice"],
        "mine": mine,
    }


def get_item(sample: HumanSample, position: int) -> HumanSampleItem:
    """The item at `position` of `sample`, with its response, question and key entry.
    Raises NotFoundError."""
    try:
        return HumanSampleItem.objects.select_related(
            "response__question", "response__model", "key_entry__edition", "sample__benchmark"
        ).get(sample=sample, position=position)
    except HumanSampleItem.DoesNotExist:
        raise NotFoundError(f"sample {sample.name} has no response {position}") from None


def human_figures(
    edition: KeyEdition,
    data: EditionGrades,
    *,
    n_bootstrap: int | None = None,
    seed: int | None = None,
) -> dict[str, Any] | None:
    """Return judges against people for `edition` (JSON-safe), or None without a sample.

    Uses the benchmark's latest sample and, of its graded responses, those whose key entry
    is `edition`'s effective entry (a response graded against an entry since corrected is
    left out, and a note counts it). The judges are `data`'s (the panel by default), their
    grades from `data.table`. Weights: N_h / g_h, with g_h the graded responses of
    stratum h (positions are a random order, so the graded ones are a random subsample of
    each stratum). Bootstrap: settings.SNAGLIST_BOOTSTRAP resamples, seed
    settings.SNAGLIST_BOOTSTRAP_SEED unless given. Keys: sample, n_grades, figures
    (engine.human.HumanAgreement.to_dict), sentences (the interval widths in
    words), notes. Cached (Django's cache, CACHE_TIMEOUT) under a key of the edition, the
    sample, its grade count, the last blind-grading audit-log time, the edition's data
    version and judges, resamples and seed: a new or changed grade is a new key.
    """
    sample = latest_sample(edition.benchmark)
    if sample is None:
        return None
    n_bootstrap = int(settings.SNAGLIST_BOOTSTRAP if n_bootstrap is None else n_bootstrap)
    seed = int(settings.SNAGLIST_BOOTSTRAP_SEED if seed is None else seed)
    # Computing them takes a few hundredths of a second since the resamples are evaluated
    # at once (bench/bench_human.py), and a report view, `agreement` and the public page
    # may ask several times: the figures are cached by everything they are computed from.
    key = (
        "scoring:human:"
        + hashlib.sha1(
            repr(
                (
                    edition.pk,
                    sample.pk,
                    HumanGrade.objects.filter(item__sample=sample).count(),
                    human_changed_at(edition.benchmark),
                    data_version(edition, data.judges),
                    [j.judge_id for j in data.judges],
                    n_bootstrap,
                    seed,
                )
            ).encode()
        ).hexdigest()
    )
    hit = cache.get(key)
    if hit is not None:
        return hit
    doc = _compute_figures(edition, data, sample, n_bootstrap, seed)
    cache.set(key, doc, CACHE_TIMEOUT)
    return doc


def _compute_figures(
    edition: KeyEdition, data: EditionGrades, sample: HumanSample, n_bootstrap: int, seed: int
) -> dict[str, Any]:
    """human_figures without the cache."""
    rows = list(
        HumanGrade.objects.filter(item__sample=sample)
        .order_by("created_at", "id")
        .values_list(
            "item_id",
            "grade",
            "reviewer__username",
            "item__key_entry_id",
            "item__stratum",
            "item__stratum_population",
            "item__response__question__question_id",
            "item__response__model__model_id",
        )
    )
    doc: dict[str, Any] = {
        "sample": {
            "name": sample.name,
            "edition": sample.edition.name,
            "seed": sample.seed,
            "size": sample.size,
            "disagree_share": sample.disagree_share,
        },
        "n_grades": 0,
        "figures": None,
        "sentences": [],
        "notes": [],
    }
    current = set(data.entries.entry_pk.tolist())
    stale = {r[0] for r in rows if r[3] not in current}
    if stale:
        doc["notes"].append(
            f"{len(stale)} graded response{'s' if len(stale) != 1 else ''} left out: graded "
            f"against a key entry that is not edition {edition.name}'s"
        )
    rows = [r for r in rows if r[0] not in stale]
    doc["n_grades"] = len(rows)
    if not rows or data.table is None:
        return doc
    units = _units(rows, data)
    result = human_agreement(units, n_bootstrap=n_bootstrap, seed=seed).to_dict()
    doc["figures"] = result
    doc["sentences"] = width_sentences(result)
    return doc


def _units(rows: list[tuple], data: EditionGrades) -> HumanUnits:
    """Build the engine's arrays from human grade rows (oldest first) and the judge table."""
    table = data.table
    items: dict[int, int] = {}
    for r in rows:
        items.setdefault(r[0], len(items))
    first = {}
    for r in rows:
        first.setdefault(r[0], r)
    info = [first[pk] for pk in items]
    strata = [r[4] for r in info]
    graded = {s: strata.count(s) for s in STRATA}
    population = {s: next((r[5] for r in info if r[4] == s), 0) for s in STRATA}
    q_index = {q: i for i, q in enumerate(table.question_ids.tolist())}
    m_index = {m: i for i, m in enumerate(table.model_ids.tolist())}
    judges = np.full((len(info), len(table.judge_ids)), np.nan)
    for i, r in enumerate(info):
        q, m = q_index.get(r[6]), m_index.get(r[7])
        if q is not None and m is not None:
            judges[i] = table.grade_values(table.codes[q, m])
    return HumanUnits(
        item=np.array([items[r[0]] for r in rows], dtype=int),
        human=np.array([r[1] for r in rows], dtype=float),
        rater=[r[2] for r in rows],
        weight=inverse_probability_weights(strata, population, graded),
        stratum=strata,
        model=[r[7] for r in info],
        judges=judges,
        judge_ids=table.judge_ids.tolist(),
        scale=[int(v) for v in table.scale],
    )


def width_sentences(figures: dict[str, Any]) -> list[str]:
    """Say in words how wide each judge's kappa interval is, for `figures` (the engine's
    HumanAgreement.to_dict()). One sentence per judge, then people against people."""
    pct = round(100 * figures["confidence"])
    out = []
    for j in figures["judges"]:
        k = j["kappa"]
        if k["value"] is None:
            out.append(f"{j['judge']}: kappa against people is undefined on these grades.")
        elif k["width"] is None:
            out.append(f"{j['judge']}: kappa {k['value']:.2f} from {k['n']} grades, no interval.")
        else:
            out.append(
                f"{j['judge']}: kappa {k['value']:.2f} from {k['n']} human grades, {pct}% "
                f"interval {k['low']:.2f} to {k['high']:.2f} — {k['width']:.2f} wide"
                + (
                    ", too wide to tell a fair judge from a good one; more grades narrow it."
                    if k["width"] >= 0.3
                    else "."
                )
            )
    p = figures["people"]["kappa"]
    if p["value"] is not None and p["width"] is not None:
        out.append(
            f"People against people: kappa {p['value']:.2f} over {p['n']} responses graded "
            f"twice, {pct}% interval {p['low']:.2f} to {p['high']:.2f} ({p['width']:.2f} wide)."
        )
    return out


def human_markdown(h: dict[str, Any] | None) -> list[str]:
    """Return the "Judges against people" lines of the Markdown report and of `agreement
    --format table` for `h` (human_figures' dict; no lines for None)."""
    if not h:
        return []
    s = h["sample"]
    md = [
        "",
        "## Judges against people",
        "",
        f"Blind sample {s['name']} ({s['size']} responses, key edition {s['edition']}, seed "
        f"{s['seed']}); {h['n_grades']} human grades. Inverse-probability weighted; kappa "
        "with quadratic weights; intervals from a stratified bootstrap.",
    ]
    f = h["figures"]
    if not f:
        return md + ["", "No blind grades yet."]
    md += ["", *h["sentences"], "", "| judge | kappa | interval | exact agreement | grades |"]
    md.append("|---|---:|---|---:|---:|")

    def row(name: str, k: dict[str, Any], e: dict[str, Any], n: Any) -> str:
        kv = "–" if k["value"] is None else f"{k['value']:.2f}"
        ki = "–" if k["low"] is None else f"{k['low']:.2f} to {k['high']:.2f}"
        ev = "–" if e["value"] is None else f"{100 * e['value']:.0f}%"
        return f"| {name} | {kv} | {ki} | {ev} | {n} |"

    md += [row(j["judge"], j["kappa"], j["exact_agreement"], j["kappa"]["n"]) for j in f["judges"]]
    p = f["people"]
    md.append(row("people against people", p["kappa"], p["exact_agreement"], p["n_responses"]))
    return md + [f"- {n}" for n in h["notes"]]
