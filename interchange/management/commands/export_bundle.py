"""Export a benchmark as a bundle folder or .zip (interchange.bundles.exporter)."""

from __future__ import annotations

from typing import Any

from interchange.bundles import export_bundle
from questions.cli import (
    JsonCommand,
    add_benchmark_argument,
    add_format_argument,
    bad_input,
    domain_error,
    resolve_benchmark,
    write_json,
)
from questions.errors import DomainError
from questions.selectors import latest_published_edition


class Command(JsonCommand):
    help = (
        "Write a bundle (a folder, or a .zip when PATH ends in .zip) with the original key "
        "and the published editions up to --edition (default: the latest published)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("path", metavar="PATH", help="new or empty folder, or a .zip")
        parser.add_argument(
            "--edition",
            metavar="NAME",
            default=None,
            help="key edition to export up to (default: latest published)",
        )
        add_benchmark_argument(parser)
        add_format_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        benchmark = resolve_benchmark(options["benchmark"])
        try:
            counts = export_bundle(benchmark, options["path"], options["edition"])
        except DomainError as exc:
            raise domain_error(exc) from exc
        except FileExistsError as exc:
            raise bad_input(f"{exc}: choose a new folder or a .zip path") from exc
        if options["format"] == "json":
            write_json(
                self,
                {
                    "benchmark": benchmark.name,
                    "path": str(options["path"]),
                    # the edition exported up to: the one asked for, else the latest published
                    "edition": options["edition"]
                    or getattr(latest_published_edition(benchmark), "name", None),
                    "files": counts,
                },
            )
            return
        self.stdout.write(f"{benchmark.name}: wrote {options['path']}")
        for name, count in counts.items():
            self.stdout.write(f"  {name}: {count}")
