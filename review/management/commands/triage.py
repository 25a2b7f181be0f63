"""`triage [--edition NAME] [--benchmark NAME] [--format json]` (../shared/spec/cli.md)."""

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


class Command(JsonCommand):
    help = "Apply the audit rules and the detectors to a key edition; fill the review queue."

    def add_arguments(self, parser):
        add_benchmark_argument(parser)
        parser.add_argument(
            "--edition", metavar="NAME", default=None, help="default: the latest published"
        )
        add_format_argument(parser)

    def handle(self, *args, **options):
        from questions.selectors import get_edition
        from review.triage import triage_run

        benchmark = resolve_benchmark(options["benchmark"])
        try:
            edition = get_edition(benchmark, options["edition"])
            counts = triage_run(benchmark=benchmark, edition=edition)
        except DomainError as exc:
            raise domain_error(exc) from exc
        if options["format"] == "json":
            write_json(self, counts)
            return
        self.stdout.write(f"Triage of {counts['benchmark']} / key edition {counts['edition']}")
        self.stdout.write(
            f"  excluded (auditors agree): {counts['excluded']} new, "
            f"{counts['already_excluded']} already excluded"
        )
        self.stdout.write(
            f"  review items: {counts['items_created']} created, {counts['items_updated']} "
            f"given new evidence, {counts['skipped_closed']} already reviewed"
        )
        for source, n in counts["by_source"].items():
            self.stdout.write(f"    {source}: {n}")
        checks = counts["citation_checks"]
        failed = ", ".join(f"{k} {v}" for k, v in sorted(checks["failed"].items())) or "none"
        self.stdout.write(
            f"  citations: {checks['checked']} checked against indexed text, "
            f"{checks['not_checked']} not checked (no indexed text), "
            f"{checks['no_citation']} without a citation; failed checks: {failed}"
        )
        self.stdout.write(f"  open items now: {counts['open_items']}")
