"""`agreement`: inter-rater statistics per judge pair for a key edition (cli.md)."""

from __future__ import annotations

from questions.cli import (
    JsonCommand,
    add_benchmark_argument,
    add_format_argument,
    domain_error,
    resolve_benchmark,
    write_json,
)
from questions.errors import DomainError
from questions.selectors import get_edition
from scoring.report import agreement_table
from scoring.selectors import board_for_edition


class Command(JsonCommand):
    help = (
        "Print raw agreement, Cohen's kappa (unweighted and quadratic), Krippendorff's "
        "alpha (ordinal) and the confusion matrix for every pair of judges."
    )

    def add_arguments(self, parser):
        add_benchmark_argument(parser)
        parser.add_argument(
            "--edition", metavar="NAME", help="key edition (default: latest published)"
        )
        parser.add_argument(
            "--judges",
            metavar="ID,ID",
            default=None,
            help="judge ids (default: every active judge)",
        )
        add_format_argument(parser, ("table", "json"))

    def handle(self, *args, **options):
        benchmark = resolve_benchmark(options["benchmark"])
        judge_ids = [j for j in (options["judges"] or "").split(",") if j] or None
        try:
            edition = get_edition(benchmark, options["edition"])
            result = board_for_edition(edition, judge_ids=judge_ids)
        except DomainError as exc:
            raise domain_error(exc) from exc
        doc = result.agreement_dict()
        if options["format"] == "json":
            write_json(self, doc)
        else:
            self.stdout.write(agreement_table(doc), ending="")
