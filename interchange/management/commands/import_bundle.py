"""Import a benchmark bundle (folder or .zip): all or nothing; see interchange.bundles."""

from __future__ import annotations

from typing import Any

from interchange.bundles import BundleError, import_bundle
from questions.cli import JsonCommand, add_format_argument, bad_input, wants_progress, write_json


class Command(JsonCommand):
    help = (
        "Import a bundle folder or .zip (../shared/spec/bundle-format.md). Prints counts; "
        "on any problem prints every one as FILE:LINE: FIELD: message on stderr, writes "
        "nothing and exits 1."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("path", metavar="PATH", help="bundle folder or .zip")
        parser.add_argument(
            "--dry-run", action="store_true", help="validate and count, write nothing"
        )
        add_format_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        as_json = options["format"] == "json"
        try:
            result = import_bundle(
                options["path"], dry_run=options["dry_run"], show_progress=wants_progress(options)
            )
        except BundleError as exc:
            for line in exc.problems:
                self.stderr.write(line)
            error = bad_input(
                f"bundle refused ({len(exc.problems)} problem line"
                f"{'' if len(exc.problems) == 1 else 's'}); nothing was imported"
            )
            if as_json:
                write_json(
                    self,
                    {
                        "ok": False,
                        "error": str(error),
                        "exit_code": error.returncode,
                        "errors": exc.problems,
                    },
                )
            raise error from exc
        for warning in result.warnings:
            self.stderr.write(warning)
        if as_json:
            write_json(self, {"ok": True, **result.as_dict()})
            return
        verb = "would import" if result.dry_run else "imported"
        if result.already_imported:
            self.stdout.write(
                f"{result.benchmark}: already imported; nothing new "
                f"({'dry run' if result.dry_run else '0 rows written'})"
            )
            return
        self.stdout.write(f"{result.benchmark}: {verb}:")
        for name, count in result.created.items():
            if name == "benchmarks" and not count:
                continue
            total = result.in_bundle.get(name)
            suffix = f" (of {total} in the bundle)" if total is not None and total != count else ""
            self.stdout.write(f"  {name}: {count}{suffix}")
