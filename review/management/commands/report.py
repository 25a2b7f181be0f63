"""`report`: the methodology report of a key edition, optionally against another (cli.md).

Lives in review (the top layer) because it composes the scoring report
(scoring.board.report.build_report) with the review queue's detector scorecard
(review.scorecard, issue 17 item 9): a lower layer may not import review.
"""

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
from review.scorecard import detector_scorecard, scorecard_markdown
from scoring.board.report import build_report, report_markdown


class Command(JsonCommand):
    help = (
        "Compute every figure of the methodology write-up from stored data for a key "
        "edition; --compare adds ranking stability and per-correction grade changes."
    )

    def add_arguments(self, parser):
        add_benchmark_argument(parser)
        add_edition_argument(parser)
        parser.add_argument(
            "--compare", metavar="NAME", help="comparison key edition (e.g. original)"
        )
        add_judges_argument(parser)
        add_format_argument(parser, ("md", "json"))

    def handle(self, *args, **options):
        benchmark = resolve_benchmark(options["benchmark"])
        judge_ids = judge_ids_option(options)
        try:
            edition = get_edition(benchmark, options["edition"])
            compare = get_edition(benchmark, options["compare"]) if options["compare"] else None
            doc = build_report(edition, compare=compare, judge_ids=judge_ids)
        except DomainError as exc:
            raise domain_error(exc) from exc
        doc["detector_scorecard"] = detector_scorecard(benchmark)
        if options["format"] == "json":
            write_json(self, doc)
        else:
            markdown = report_markdown(doc)
            self.stdout.write(markdown + scorecard_markdown(doc["detector_scorecard"]), ending="")
