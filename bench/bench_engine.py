"""Benchmark the scoring engine on seeded synthetic grades and record the figures.

Usage (from the project root)::

    .venv/bin/python bench/bench_engine.py            # both sizes, rewrite bench/README.md section
    .venv/bin/python bench/bench_engine.py --no-write # print only
    .venv/bin/python bench/bench_engine.py --sizes 18x1001

Each size runs in a fresh child process so its peak RSS (resource.getrusage)
belongs to that size alone; a second child repeats the engine calls under
tracemalloc to report the peak memory numpy and Python allocate for them.
Timed: GradeTable.from_frame (pivot of the DataFrame a selector would hand
over), compute_leaderboard (bootstrap 1,000) for the original and the
corrected key, compute_agreement, compare_leaderboards.  Data generation is
not timed.  Targets: 18 x 1,001 under 1 s; 100 x 10,000 under 30 s and 2 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from readme_section import write_section  # noqa: E402 (bench/ is sys.path[0])

from engine import (  # noqa: E402
    GradeTable,
    compare_leaderboards,
    compute_agreement,
    compute_leaderboard,
)

SIZES = {"18x1001": (18, 1001), "100x10000": (100, 10_000)}
TARGETS = {"18x1001": (1.0, None), "100x10000": (30.0, 2048.0)}  # seconds, MiB
SECTION = "## Scoring engine"


def synthetic_grades(
    n_models: int, n_questions: int, seed: int = 2024
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Return (grades, corrected grades, questions) DataFrames, seeded.

    Two judges on [0, 1, 2]; model skill spread 0.3-0.9; the second judge
    departs from the first on ~20 % of responses; 0.5 % null grades; 20
    categories; 4 % of questions excluded; the corrected key re-grades 3 % of
    questions.  Ids are strings as a selector would produce.
    """
    rng = np.random.default_rng(seed)
    q = np.repeat(np.arange(n_questions), n_models)
    m = np.tile(np.arange(n_models), n_questions)
    skill = np.linspace(0.3, 0.9, n_models)[m]
    first = (rng.random(q.size) < skill).astype(np.int64) + (rng.random(q.size) < skill)
    second = np.where(rng.random(q.size) < 0.2, rng.integers(0, 3, q.size), first).astype(float)
    second[rng.random(q.size) < 0.005] = np.nan
    q_ids = np.array([f"q{i:05d}" for i in range(n_questions)], dtype=object)
    m_ids = np.array([f"model-{i:03d}" for i in range(n_models)], dtype=object)

    def frame(a: np.ndarray, b: np.ndarray) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "question_id": np.concatenate([q_ids[q], q_ids[q]]),
                "model_id": np.concatenate([m_ids[m], m_ids[m]]),
                "judge_id": np.repeat(np.array(["judge-a", "judge-b"], dtype=object), q.size),
                "grade": np.concatenate([a.astype(float), b]),
            }
        )

    changed = rng.random(n_questions) < 0.03
    hit = changed[q]
    new_first = first.copy()
    new_first[hit] = rng.integers(0, 3, hit.sum())
    new_second = second.copy()
    new_second[hit] = np.where(
        rng.random(hit.sum()) < 0.8, new_first[hit], rng.integers(0, 3, hit.sum())
    )
    questions = pd.DataFrame(
        {
            "question_id": q_ids,
            "category_id": [f"cat-{i % 20:02d}" for i in range(n_questions)],
            "status": np.where(rng.random(n_questions) < 0.04, "excluded", "scored"),
        }
    )
    return frame(first, second), frame(new_first, new_second), questions


def run_engine(grades: pd.DataFrame, corrected: pd.DataFrame, questions: pd.DataFrame) -> dict:
    """Run and time every engine call once; return the timings in seconds."""
    t: dict[str, float] = {}
    start = time.perf_counter()
    table = GradeTable.from_frame(grades, scale=[0, 1, 2], questions=questions)
    table_c = GradeTable.from_frame(corrected, scale=[0, 1, 2], questions=questions)
    t["build_tables"] = time.perf_counter() - start
    mark = time.perf_counter()
    original = compute_leaderboard(table, n_bootstrap=1000, seed=0)
    t["leaderboard_original"] = time.perf_counter() - mark
    mark = time.perf_counter()
    fixed = compute_leaderboard(table_c, n_bootstrap=1000, seed=0)
    t["leaderboard_corrected"] = time.perf_counter() - mark
    mark = time.perf_counter()
    agreement = compute_agreement(table)
    t["agreement"] = time.perf_counter() - mark
    mark = time.perf_counter()
    robustness = compare_leaderboards(original, fixed)
    t["compare"] = time.perf_counter() - mark
    t["total"] = time.perf_counter() - start
    t["_summary"] = {  # type: ignore[assignment]
        "n_bands": original.n_bands,
        "agreement_rate": round(original.agreement_rate or 0, 4),
        "kappa": agreement.pairs[0].cohen_kappa,
        "kendall_tau": robustness.kendall_tau,
    }
    return t


def child(size: str, traced: bool) -> None:
    n_models, n_questions = SIZES[size]
    grades, corrected, questions = synthetic_grades(n_models, n_questions)
    # Warm imports (sklearn, scipy, krippendorff) outside the timing, as in a
    # long-running process.
    tiny = GradeTable.from_frame(grades.head(8), scale=[0, 1, 2])
    compute_agreement(tiny)
    compute_leaderboard(tiny, n_bootstrap=10)
    baseline_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if traced:
        tracemalloc.start()
        run_engine(grades, corrected, questions)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(json.dumps({"traced_peak_mib": peak / 2**20}))
        return
    timings = run_engine(grades, corrected, questions)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    timings["rss_before_mib"] = baseline_rss
    timings["peak_rss_mib"] = peak_rss
    timings["rows"] = len(grades)
    print(json.dumps(timings))


def measure(size: str) -> dict:
    def run(traced: bool) -> dict:
        out = subprocess.run(
            [sys.executable, __file__, "--child", size] + (["--traced"] if traced else []),
            check=True,
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    result = run(False)
    result.update(run(True))
    return result


def render(results: dict[str, dict]) -> str:
    lines = [
        SECTION,
        "",
        "`bench/bench_engine.py` (pure `engine`, no database): seeded synthetic grades,",
        "two judges, scale 0/1/2, 20 categories, 4 % of questions excluded, 0.5 % null grades,",
        "a corrected key re-grading 3 % of questions. Timed once each, in a fresh process with",
        "imports warmed: building both `GradeTable`s from DataFrames, `compute_leaderboard`",
        "(1,000 bootstrap resamples) for the original and the corrected key, `compute_agreement`,",
        "`compare_leaderboards`. Peak RSS is the whole child process (Python, pandas, sklearn and",
        "the generated DataFrames included); traced peak is what tracemalloc sees allocated during",
        "the engine calls alone.",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, numpy {np.__version__}, pandas {pd.__version__}.",
        "",
        "| size (models x questions x judges) | grade rows | build tables | leaderboard x2 | agreement | compare | total | peak RSS | traced peak | target | met |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, r in results.items():
        sec, mib = TARGETS[size]
        met = r["total"] < sec and (mib is None or r["peak_rss_mib"] < mib)
        target = f"< {sec:g} s" + (f", < {mib / 1024:g} GB" if mib else "")
        lines.append(
            f"| {size.replace('x', ' x ')} x 2 | {r['rows']:,} | {r['build_tables']:.2f} s | "
            f"{r['leaderboard_original']:.2f} + {r['leaderboard_corrected']:.2f} s | "
            f"{r['agreement']:.2f} s | {r['compare']:.3f} s | **{r['total']:.2f} s** | "
            f"{r['peak_rss_mib']:.0f} MiB | {r['traced_peak_mib']:.0f} MiB | {target} | "
            f"{'yes' if met else 'NO'} |"
        )
    lines += [
        "",
        "How it stays fast: grade rows are pivoted once into an int8 array",
        "[question, model, judge]; counts and scores are numpy reductions; the bootstrap draws",
        "question multiplicities (chunks of at most 8 M cells) and gets every model's resampled",
        "numerator and denominator from one matrix product `weights @ [points | counted]`.",
        "",
        "Re-run: `.venv/bin/python bench/bench_engine.py` (rewrites this section only).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default=",".join(SIZES), help="comma-separated: " + ", ".join(SIZES)
    )
    parser.add_argument(
        "--no-write", action="store_true", help="print, do not touch bench/README.md"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.traced)
        return
    results = {}
    for size in args.sizes.split(","):
        print(f"running {size} ...", file=sys.stderr)
        results[size] = measure(size)
        print(json.dumps({size: results[size]}, default=str), file=sys.stderr)
    text = render(results)
    print(text)
    if not args.no_write:
        write_section(SECTION, text)
    failed = [
        s
        for s, r in results.items()
        if r["total"] >= TARGETS[s][0] or (TARGETS[s][1] and r["peak_rss_mib"] >= TARGETS[s][1])
    ]
    if failed:
        print(f"target missed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
