"""Benchmark the leaderboard from PostgreSQL: loading grade rows vs computing the figures.

Usage (from the project root)::

    .venv/bin/python bench/bench_leaderboard.py             # measure, rewrite the README section
    .venv/bin/python bench/bench_leaderboard.py --no-write  # print only
    BENCH_DATABASE_URL=postgres://... .venv/bin/python bench/bench_leaderboard.py

Set-up (not timed): the seeded full-scale bundle of `tests/bundle_factory.py` (1,001
questions, 18 models, 2 judges, 37 corrections) is imported into its own database
(default postgres://postgres@127.0.0.1:5432/snaglist_bench7, created if missing, reused
when it already holds the bundle), then every response to a corrected question is
re-graded against the corrected entry (what a re-scoring run writes), so the corrected
edition has real grades of its own.

Timed in the same process, best of several repeats after a warm-up:

- load: `scoring.selectors.load_edition_grades` for `original` and `corrected-1` — the
  key-entry map, question facts and the grade rows (`values_list` into numpy), pivoted
  into the engine's GradeTable. Also shown: the bare grade-row fetch alone.
- compute: `compute_leaderboard` (1,000 bootstrap resamples) for both editions,
  `compute_agreement` for the corrected edition, `compare_leaderboards` and
  `grade_changes` (robustness) — everything the leaderboard page and report need.

Goal (issue 3): compute < 1 s and < 3x load.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from readme_section import write_section  # noqa: E402 (bench/ is sys.path[0])

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/snaglist_bench7"
SECTION = "## Leaderboard from PostgreSQL"
BENCHMARK = "uk-construction-bench7"


def _ensure_database(url: str) -> None:
    from urllib.parse import urlsplit

    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def _setup(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    _ensure_database(url)
    import django

    django.setup()
    import io

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
    _regrade_corrections()
    # Fresh bulk loads have no planner statistics yet; autovacuum would gather them soon
    # after in production, so measure the steady state.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def _regrade_corrections() -> None:
    """Grade every response to a corrected question against the corrected entry (seeded)."""
    from questions.models import KeyEdition, KeyEntry, Response
    from scoring.models import Grade, Judge

    edition = KeyEdition.objects.get(benchmark__name=BENCHMARK, name="corrected-1")
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
    print(f"re-graded {len(rows)} rows against corrected entries", file=sys.stderr)


def _timed(fn, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result, statistics.median(times)


def measure(repeats: int) -> dict:
    from django.conf import settings
    from django.db import connection

    from engine import (
        agreed_grades,
        compare_leaderboards,
        compute_agreement,
        compute_leaderboard,
        grade_changes,
    )
    from questions.models import KeyEdition
    from scoring.selectors import effective_entries, grade_rows, load_edition_grades, scoring_judges

    original = KeyEdition.objects.get(benchmark__name=BENCHMARK, name="original")
    corrected = KeyEdition.objects.get(benchmark__name=BENCHMARK, name="corrected-1")
    seed = settings.SNAGLIST_BOOTSTRAP_SEED

    def load():
        return load_edition_grades(original), load_edition_grades(corrected)

    def fetch_rows_only():
        judges = scoring_judges(original.benchmark)
        return [grade_rows(effective_entries(e), judges) for e in (original, corrected)]

    def compute(data):
        a, b = data
        lb_a = compute_leaderboard(a.table, n_bootstrap=1000, seed=seed)
        lb_b = compute_leaderboard(b.table, n_bootstrap=1000, seed=seed)
        agreement = compute_agreement(b.table)
        robust = compare_leaderboards(lb_a, lb_b)
        changed = [q for q, e in b.entries.as_dict().items() if a.entries.as_dict().get(q) != e]
        changes = grade_changes(agreed_grades(a.table), agreed_grades(b.table))
        return lb_a, lb_b, agreement, robust, changes, changed

    # warm-up: imports (scipy, sklearn, krippendorff), connection, caches of the planner
    data = load()
    compute(data)

    load_best, data, load_median = _timed(load, repeats)
    rows_best, rows, _ = _timed(fetch_rows_only, repeats)
    compute_best, result, compute_median = _timed(lambda: compute(data), repeats)
    lb_a, lb_b, agreement, robust, _, _ = result
    with connection.cursor() as cur:
        cur.execute("SELECT version()")
        pg_version = cur.fetchone()[0].split(" on ")[0]
    return {
        "rows": int(sum(len(r) for r in rows)),
        "rows_original": int(data[0].n_grade_rows),
        "rows_corrected": int(data[1].n_grade_rows),
        "load": load_best,
        "load_median": load_median,
        "fetch_rows": rows_best,
        "compute": compute_best,
        "compute_median": compute_median,
        "ratio": compute_best / load_best,
        "n_bands": (lb_a.n_bands, lb_b.n_bands),
        "agreement_rate": lb_b.agreement_rate,
        "kappa": agreement.pairs[0].cohen_kappa if agreement.pairs else None,
        "top3": robust.top3_unchanged,
        "bottom5": robust.bottom5_unchanged,
        "tau": robust.kendall_tau,
        "pg": pg_version,
        "repeats": repeats,
    }


def render(r: dict) -> str:
    import numpy
    import pandas

    met = r["compute"] < 1.0 and r["ratio"] < 3.0
    return f"""{SECTION}

`bench/bench_leaderboard.py`: the seeded full-scale bundle of `tests/bundle_factory.py`
(1,001 questions, 18 models, 2 judges, 37 corrections; responses to the corrected
questions re-graded against the corrected entries) in its own PostgreSQL database. Both
halves are measured in the same process, best of {r["repeats"]} after a warm-up:

- **load** = `scoring.selectors.load_edition_grades` for `original` and `corrected-1`:
  effective key entries, question facts and the grade rows (`values_list` straight into
  numpy, no model instances), pivoted into the engine's table — about seven queries per
  edition. The bare grade-row fetch alone is shown too.
- **compute** = `compute_leaderboard` with 1,000 bootstrap resamples for both editions,
  `compute_agreement`, `compare_leaderboards` and `grade_changes` (robustness).

Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()},
numpy {numpy.__version__}, pandas {pandas.__version__}, {r["pg"]} on 127.0.0.1.

| grade rows (original + corrected) | grade-row fetch alone | load (both editions) | compute | compute / load | target | met |
|---|---|---|---|---|---|---|
| {r["rows_original"]:,} + {r["rows_corrected"]:,} | {r["fetch_rows"]:.3f} s | **{r["load"]:.3f} s** (median {r["load_median"]:.3f}) | **{r["compute"]:.3f} s** (median {r["compute_median"]:.3f}) | **{r["ratio"]:.2f}x** | compute < 1 s and < 3x load | {"yes" if met else "NO"} |

Figures of that run: bands {r["n_bands"][0]} (original) and {r["n_bands"][1]} (corrected-1),
agreement rate {r["agreement_rate"]:.3f}, Cohen's kappa {r["kappa"]:.3f}, top 3 unchanged
{r["top3"]}, bottom 5 unchanged {r["bottom5"]}, Kendall's tau {r["tau"]:.3f}.

In the product the computed leaderboard is cached (django cache, Redis in production)
under a key that includes a data version (grade count and max id, exclusions, the edition
chain and its entries, the judges' prompt versions), so a page view normally costs the
version check (four small aggregate queries), not the load or the compute.

Re-run: `.venv/bin/python bench/bench_leaderboard.py` (rewrites this section only).
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    _setup(os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL))
    result = measure(args.repeats)
    text = render(result)
    print(text)
    if not args.no_write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
