"""Delete a benchmark and everything in it, published key included (issue 26, part 5)."""

from __future__ import annotations

import sys
import time
from typing import Any

from django.core.management.base import BaseCommand

from questions.benchmark_delete import NotTheOwner, delete_benchmark
from questions.cli import add_benchmark_argument, bad_input, resolve_benchmark, usage_error


class Command(BaseCommand):
    help = (
        "Delete the benchmark named by --benchmark and every row that depends on it (its "
        "key editions, published ones too, questions, responses, grades, runs, review items) "
        "in one transaction, with an audit-log entry. Asks for the benchmark's name to be "
        "typed, or --yes. Run it as the tables' owner (the role that runs migrate)."
    )

    def add_arguments(self, parser: Any) -> None:
        add_benchmark_argument(parser)
        parser.add_argument(
            "--yes", action="store_true", help="do not ask: delete without typing the name"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["benchmark"]:
            raise usage_error("delete_benchmark: name the benchmark with --benchmark NAME")
        benchmark = resolve_benchmark(options["benchmark"])
        if not options["yes"]:
            if not sys.stdin.isatty():
                raise usage_error(
                    f"delete_benchmark: refusing to delete '{benchmark.name}' without "
                    "confirmation: pass --yes, or run it at a terminal and type the name"
                )
            typed = input(f"Type the benchmark's name ({benchmark.name}) to delete it: ")
            if typed.strip() != benchmark.name:
                raise bad_input("delete_benchmark: the name typed does not match; nothing deleted")
        started = time.monotonic()
        try:
            counts = delete_benchmark(benchmark)
        except NotTheOwner as exc:
            raise bad_input(f"delete_benchmark: {exc}; nothing deleted") from exc
        seconds = time.monotonic() - started
        self.stdout.write(
            f"deleted benchmark '{benchmark.name}': {sum(counts.values())} rows in "
            f"{len(counts)} tables, {seconds:.1f} s"
        )
        for table, n in sorted(counts.items()):
            self.stdout.write(f"  {table}: {n}")
