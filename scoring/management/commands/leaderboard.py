"""`leaderboard`: scores, 95% intervals and bands of a key edition (cli.md)."""

from __future__ import annotations

from questions.cli import (
    JsonCommand,
    add_benchmark_argument,
    add_edition_argument,
    add_format_argument,
    add_judges_argument,
    bad_input,
    domain_error,
    judge_ids_option,
    resolve_benchmark,
    write_json,
)
from questions.errors import DomainError
from questions.selectors import get_edition
from scoring.board.report import leaderboard_csv, leaderboard_table
from scoring.management.panel_option import add_panel_argument, panel_judge_set
from scoring.selectors import BANDINGS, board_for_edition


def _positive_float(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, not {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {text!r}")
    return value


class Command(JsonCommand):
    help = (
        "Print the leaderboard of a key edition: score (percent) per model with a 95% "
        "interval, counted / excluded on disagreement / unparsed responses, rank and band."
    )

    def add_arguments(self, parser):
        add_benchmark_argument(parser)
        add_edition_argument(parser)
        parser.add_argument(
            "--band-gap",
            type=_positive_float,
            default=None,
            help="percentage points between bands (default: settings.SNAGLIST_BAND_GAP)",
        )
        parser.add_argument(
            "--bootstrap",
            type=_non_negative_int,
            default=None,
            metavar="N",
            help="bootstrap resamples over questions (default: settings.SNAGLIST_BOOTSTRAP)",
        )
        parser.add_argument(
            "--seed",
            type=_non_negative_int,
            default=None,
            metavar="S",
            help="bootstrap seed (0 or more)",
        )
        parser.add_argument(
            "--banding",
            choices=BANDINGS,
            default="gap",
            help="gap: rule 9 gap bands; ci_overlap: intervals overlapping the band leader's",
        )
        add_judges_argument(parser)
        add_panel_argument(parser)
        parser.add_argument(
            "--no-cache", action="store_true", help="compute afresh instead of reading the cache"
        )
        add_format_argument(parser, ("table", "json", "csv"))

    def handle(self, *args, **options):
        benchmark = resolve_benchmark(options["benchmark"])
        judge_ids = judge_ids_option(options)
        judge_set = panel_judge_set(benchmark, options["panel"], judge_ids)
        try:
            edition = get_edition(benchmark, options["edition"])
            result = board_for_edition(
                edition,
                judge_ids=judge_ids,
                judge_set=judge_set,
                band_gap=options["band_gap"],
                n_bootstrap=options["bootstrap"],
                seed=options["seed"],
                banding=options["banding"],
                use_cache=not options["no_cache"],
            )
        except DomainError as exc:
            raise domain_error(exc) from exc
        from scoring.board.views import leaderboard_doc

        doc = leaderboard_doc(result, edition)
        if result.leaderboard is None:
            raise bad_input(
                f"benchmark {benchmark.name!r}, edition {edition.name!r}: "
                + "; ".join(result.notes or ["no grades"])
            )
        fmt = options["format"]
        if doc["figures_state"] != "complete" and fmt != "json":
            self.stderr.write(f"warning: {doc['figures_state_words']}")
        if fmt == "json":
            write_json(self, doc)
        elif fmt == "csv":
            self.stdout.write(leaderboard_csv(doc), ending="")
        else:
            self.stdout.write(leaderboard_table(doc), ending="")
