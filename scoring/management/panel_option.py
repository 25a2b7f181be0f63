"""`--panel published|candidate` of the commands that show figures (`leaderboard`,
`agreement`; cli.md): one definition of the option and of what it resolves to."""

from __future__ import annotations

from typing import Any

from questions.cli import bad_input, usage_error
from questions.models import Benchmark
from scoring.selectors import JudgeSet


def add_panel_argument(parser: Any) -> None:
    """Add `--panel {published,candidate}` (default published) to an argparse parser."""
    parser.add_argument(
        "--panel",
        choices=("published", "candidate"),
        default="published",
        help="candidate: the candidate panel's figures (not published; issue 31) instead "
        "of the judge panel's",
    )


def panel_judge_set(
    benchmark: Benchmark, panel: str, judge_ids: list[str] | None
) -> JudgeSet | None:
    """The judges `--panel` asks for: None for `published` (the caller resolves the judge
    panel or `--judges` as before), the candidate panel's JudgeSet for `candidate`.

    Raises CommandError: a usage error (exit 2) when `--judges` is given with
    `--panel candidate`, bad input (exit 1) when the benchmark has no candidate panel.
    """
    if panel != "candidate":
        return None
    from scoring.board.candidate import candidate_judge_set

    if judge_ids:
        raise usage_error("--panel candidate names its judges: give no --judges")
    judge_set = candidate_judge_set(benchmark)
    if judge_set is None:
        raise bad_input(
            f"benchmark {benchmark.name!r} has no candidate panel "
            "(define one: manage.py panel --candidate ID@VERSION,...)"
        )
    return judge_set
