"""`agreement`: inter-rater statistics per judge pair for a key edition (cli.md)."""

from __future__ import annotations

from questions.cli import (
    JsonCommand,
    add_benchmark_argument,
    add_edition_argument,
    add_format_argument,
    add_judges_argument,
    domain_error,
    judge_ids_option,
    resolve_benchmark,
    write_json,
)
from questions.errors import DomainError
from questions.selectors import get_edition
from scoring.board.human import human_figures, human_markdown
from scoring.board.report import agreement_table
from scoring.management.panel_option import add_panel_argument, panel_judge_set
from scoring.selectors import board_for_edition, load_edition_grades


class Command(JsonCommand):
    help = (
        "Print raw agreement, Cohen's kappa (unweighted and quadratic), Krippendorff's "
        "alpha (ordinal) and the confusion matrix for every pair of judges."
    )

    def add_arguments(self, parser):
        add_benchmark_argument(parser)
        add_edition_argument(parser)
        add_judges_argument(parser)
        add_panel_argument(parser)
        add_format_argument(parser, ("table", "json"))

    def handle(self, *args, **options):
        benchmark = resolve_benchmark(options["benchmark"])
        judge_ids = judge_ids_option(options)
        judge_set = panel_judge_set(benchmark, options["panel"], judge_ids)
        try:
            edition = get_edition(benchmark, options["edition"])
            result = board_for_edition(edition, judge_ids=judge_ids, judge_set=judge_set)
            doc = result.agreement_dict()
            # Judges against people (issue 31 item 2), with the same judges as the pairs.
            data = load_edition_grades(edition, judge_ids=judge_ids, judge_set=judge_set)
            doc["human_agreement"] = human_figures(edition, data)
        except DomainError as exc:
            raise domain_error(exc) from exc
        if options["format"] == "json":
            write_json(self, doc)
        else:
            self.stdout.write(agreement_table(doc), ending="")
            lines = human_markdown(doc["human_agreement"])
            if lines:
                self.stdout.write("\n".join(lines) + "\n", ending="")
