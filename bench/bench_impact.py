"""Benchmark the impact previews (issue 18 item 4) at full scale.

Usage (from the project root)::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/snaglist_impact .venv/bin/python bench/bench_impact.py

Set-up (not timed): the seeded full-scale bundle of `tests/bundle_factory.py` (1,001
questions, 18 models, 2 judges, published corrected-1 with 37 corrections) is imported
under its own benchmark name, the responses to corrected-1's corrections are graded
against their entries, and a draft `corrected-2` is opened with 20 corrections (graded,
as a preview re-score would) and 10 removals. Timed, best of a few repeats, with a
process-local cache:

- `scoring.board.impact.draft_impact(draft)`: the whole-draft preview (the report's comparison
  plus each change alone), with an empty cache, with only the two leaderboards cached
  (the usual case: a finished run warms its edition's board) and with a warm cache;
- `scoring.board.impact.pending_impacts(draft, 30 removals)`: the approvals page's impact column,
  cold and warm;
- the naive alternative: a full `compute_leaderboard` (1,000 bootstrap resamples) of the
  draft without each question, per proposal (3 timed, scaled to 30).
"""

from __future__ import annotations

import io
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BENCHMARK = "uk-construction-impact"


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.conf import settings

    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from questions.models import Benchmark

    if not Benchmark.objects.filter(name=BENCHMARK).exists():
        from tests.bundle_factory import write_bundle

        with tempfile.TemporaryDirectory() as tmp:
            write_bundle(
                Path(tmp) / "bundle",
                n_questions=1001,
                n_models=18,
                seed=0,
                corrections=37,
                name=BENCHMARK,
            )
            print("importing the full-scale bundle ...", file=sys.stderr)
            call_command("import_bundle", str(Path(tmp) / "bundle"), stdout=io.StringIO())
    _grade("corrected-1")
    _draft()
    _grade("corrected-2")


def _grade(name: str) -> None:
    """Grade every response to the edition's corrections against their entries (seeded)."""
    from questions.models import KeyEdition, KeyEntry, Response
    from scoring.models import Grade, Judge

    edition = KeyEdition.objects.get(benchmark__name=BENCHMARK, name=name)
    entries = list(KeyEntry.objects.filter(edition=edition, removed=False))
    if Grade.objects.filter(key_entry__in=entries).exists():
        return
    judges = list(Judge.objects.filter(benchmark=edition.benchmark, role=Judge.Role.JUDGE))
    rng = random.Random(7)
    rows = []
    for entry in entries:
        for response in Response.objects.filter(question_id=entry.question_id):
            agreed = rng.choice([0, 1, 2, 2])
            for judge in judges:
                grade = agreed if rng.random() < 0.85 else rng.choice([0, 1, 2])
                rows.append(
                    Grade(
                        response=response,
                        judge=judge,
                        key_entry=entry,
                        grade=grade,
                        prompt_version=judge.prompt_version,
                    )
                )
    Grade.objects.bulk_create(rows, batch_size=2000)


def _draft() -> None:
    from questions import services
    from questions.models import KeyEdition, Question

    if KeyEdition.objects.filter(benchmark__name=BENCHMARK, name="corrected-2").exists():
        return
    parent = KeyEdition.objects.get(benchmark__name=BENCHMARK, name="corrected-1")
    draft = services.key_edition_create(
        benchmark=parent.benchmark, name="corrected-2", parent=parent, note="bench"
    )
    questions = list(Question.objects.filter(benchmark=parent.benchmark).order_by("pk"))
    taken = set(parent.entries.values_list("question_id", flat=True))
    free = [q for q in questions if q.pk not in taken]
    for q in free[:20]:
        services.key_entry_create(edition=draft, question=q, answer="A corrected answer.")
    for q in free[20:30]:
        services.key_entry_create(edition=draft, question=q, removed=True, reason="ungradeable")


def _best(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    _setup()
    from django.conf import settings
    from django.core.cache import cache

    from engine import compute_leaderboard
    from questions.models import KeyEdition, KeyEntry
    from scoring.board.impact import draft_impact, pending_impacts
    from scoring.selectors import board_for_edition, load_edition_grades

    draft = KeyEdition.objects.get(benchmark__name=BENCHMARK, name="corrected-2")
    taken = set(
        KeyEntry.objects.filter(edition__benchmark=draft.benchmark)
        .exclude(edition__name="original")
        .values_list("question__question_id", flat=True)
    )
    qids = [
        q
        for q in KeyEntry.objects.filter(
            edition__benchmark=draft.benchmark, edition__name="original"
        )
        .order_by("pk")
        .values_list("question__question_id", flat=True)
        if q not in taken
    ][:30]
    proposals = [(i, q, "remove") for i, q in enumerate(qids)]
    draft_impact(draft)  # warm-up: imports, connection

    def cold(fn):
        def run():
            cache.clear()
            fn()

        return run

    def boards_warm(fn):
        def run():
            cache.clear()
            board_for_edition(draft)
            board_for_edition(draft.parent)
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start

        return run

    doc = draft_impact(draft)
    results = {
        "draft_impact cold": _best(cold(lambda: draft_impact(draft))),
        "draft_impact, boards cached": min(
            boards_warm(lambda: draft_impact(draft))() for _ in range(3)
        ),
        "draft_impact warm": _best(lambda: draft_impact(draft)),
        "pending_impacts(30 removals) cold": _best(cold(lambda: pending_impacts(draft, proposals))),
        "pending_impacts(30 removals) warm": _best(lambda: pending_impacts(draft, proposals)),
    }
    table = load_edition_grades(draft).table
    seed = settings.SNAGLIST_BOOTSTRAP_SEED
    one = _best(
        lambda: [
            compute_leaderboard(table.without_questions([q]), n_bootstrap=1000, seed=seed)
            for q in qids[:3]
        ],
        repeats=1,
    )
    results["naive: full leaderboard per removal, x30"] = one / 3 * 30
    print(
        f"draft corrected-2: {len(doc['changes'])} changes, {len(doc['models'])} models, "
        f"partial={doc['partial']}"
    )
    for name, seconds in results.items():
        print(f"{name:45s} {seconds * 1000:9.1f} ms")


if __name__ == "__main__":
    main()
