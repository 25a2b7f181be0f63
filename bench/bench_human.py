"""Benchmark judges against people (issue 31 item 2): what the report's new section costs.

Usage (from the project root, on a database of your own; the demo bundle is imported
there if it is missing, and a sample of 30 responses graded once, 8 of them twice)::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/snaglist_NAME .venv/bin/python bench/bench_human.py

Timed, CPU time of this process (time.process_time), best of 3, in the same run:

- reference: `scoring.board.report.build_report` of the demo's latest published edition with
  `scoring.board.human.human_figures` switched off (the report as before this issue; its board
  cached, as on the page);
- `build_report` with the section, its figures cached (every view but the first after a
  grade), and the section's figures computed uncached (1,000 stratified bootstrap
  resamples, the default): once as the process's first (any import it triggers
  included), then best of 3;
- `engine.human.human_agreement` alone on synthetic samples of 30, 100 and 300
  human grades (2 judges, 6 models), against one evaluation of its statistics
  (`_Stats.point`, sklearn's kappas);
- the 1,000 resamples' statistics of those samples evaluated as before the vectorised
  bootstrap (`cohen_kappa_score` once per resample and kappa, `_Stats.evaluate` with
  sklearn's kappas) against all at once (`_Stats.resampled`), the same counts, once each.

Prints the ratios against the reference and the load average.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BENCHMARK = "uk-construction-demo"


def _cpu(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def _setup():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from questions.models import Benchmark
    from questions.selectors import latest_published_edition

    call_command("migrate", verbosity=0)
    if not Benchmark.objects.filter(name=BENCHMARK).exists():
        call_command("import_bundle", str(ROOT / "questions/fixtures/demo-bundle"), verbosity=0)
    benchmark = Benchmark.objects.get(name=BENCHMARK)
    _grades(benchmark)
    return latest_published_edition(benchmark)


def _grades(benchmark) -> None:
    import numpy as np
    from django.contrib.auth.models import User

    from scoring.board.human import human_grade_record, human_sample_draw, latest_sample

    if latest_sample(benchmark) is not None:
        return
    ann, _ = User.objects.get_or_create(username="bench-ann")
    bob, _ = User.objects.get_or_create(username="bench-bob")
    sample = human_sample_draw(benchmark, actor=None, size=30, seed=2)
    rng = np.random.default_rng(0)
    for item in sample.items.order_by("position"):
        grade = int(rng.integers(0, 3))
        human_grade_record(item, reviewer=ann, grade=grade)
        if item.position <= 8:
            human_grade_record(item, reviewer=bob, grade=grade)


def _synthetic(n: int):
    import numpy as np

    from engine.human import HumanUnits, inverse_probability_weights

    rng = np.random.default_rng(n)
    judges = rng.integers(0, 3, (n, 2)).astype(float)
    strata = ["disagree" if i % 2 else "rest" for i in range(n)]
    population = {"disagree": 10 * n, "rest": 40 * n}
    drawn = {s: strata.count(s) for s in ("disagree", "rest")}
    return HumanUnits(
        item=np.arange(n),
        human=np.where(rng.random(n) < 0.7, judges[:, 0], rng.integers(0, 3, n)).astype(float),
        rater=["a"] * n,
        weight=inverse_probability_weights(strata, population, drawn),
        stratum=strata,
        model=[f"m{i % 6}" for i in range(n)],
        judges=judges,
        judge_ids=["j1", "j2"],
        scale=[0, 1, 2],
    )


def main() -> None:
    edition = _setup()
    import numpy as np

    import scoring.board.human as human
    from engine.human import _Stats, human_agreement
    from scoring.board.report import build_report
    from scoring.selectors import load_edition_grades

    real = human.human_figures
    human.human_figures = lambda *a, **k: None
    try:
        reference = _cpu(lambda: build_report(edition))
    finally:
        human.human_figures = real
    with_section = _cpu(lambda: build_report(edition))
    data = load_edition_grades(edition)
    sample = human.latest_sample(edition.benchmark)
    cold = _cpu(lambda: human._compute_figures(edition, data, sample, 1000, 0), repeats=1)
    warm = _cpu(lambda: human._compute_figures(edition, data, sample, 1000, 0))
    print(f"build_report without the section (reference): {reference:.3f} s CPU")
    print(
        f"build_report with the section, cached:        {with_section:.3f} s CPU "
        f"({with_section / reference:.2f}x the reference)"
    )
    print(
        f"the section computed (first view after a grade): {cold:.3f} s CPU "
        f"({cold / reference:.0f}x the reference; the process's first, imports included)"
    )
    print(
        f"the section computed again, uncached:          {warm:.3f} s CPU "
        f"({warm / reference:.2f}x the reference)"
    )
    for n in (30, 100, 300):
        u = _synthetic(n)
        stats = _Stats(u)
        one = _cpu(stats.point, repeats=5)
        full = _cpu(lambda u=u: human_agreement(u, n_bootstrap=1000, seed=0))
        print(
            f"human_agreement, {n} grades, 1000 resamples: {full:.3f} s CPU "
            f"({full / one:.0f}x one evaluation of {one * 1000:.2f} ms)"
        )
        counts = np.random.default_rng(n).multinomial(n, np.ones(n) / n, size=1000)
        per_resample = _cpu(lambda s=stats, c=counts: s.evaluate(c, kappas=s._sklearn), repeats=1)
        at_once = _cpu(lambda s=stats, c=counts: s.resampled(c), repeats=3)
        print(
            f"  its 1000 resamples' statistics, sklearn per resample: {per_resample:.3f} s CPU, "
            f"all at once: {at_once:.4f} s CPU ({per_resample / at_once:.0f}x faster)"
        )
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
