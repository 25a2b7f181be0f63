"""Helpers shared by every management command (the contract is ../shared/spec/cli.md).

- `--benchmark NAME`: optional when the database holds one benchmark; leaving it out with
  several is a usage error (exit 2) that lists them; an unknown name is bad input (exit 1).
- `--format json`: exactly one JSON document on stdout and nothing else there; progress
  bars and messages go to stderr, and bars are off when stderr is not a terminal.
- Exit codes: 0 ok, 1 bad input or failed check, 2 usage (`CommandError(returncode=...)`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from django.core.management.base import BaseCommand, CommandError

from questions.errors import AmbiguousError, DomainError, NotFoundError
from questions.models import Benchmark

T = TypeVar("T")

EXIT_BAD_INPUT = 1
EXIT_USAGE = 2


def add_benchmark_argument(parser: Any) -> None:
    parser.add_argument(
        "--benchmark",
        metavar="NAME",
        default=None,
        help="the benchmark (manifest name); optional when the database holds only one",
    )


def add_edition_argument(parser: Any) -> None:
    """Add `--edition NAME`: the key edition (None: the latest published)."""
    parser.add_argument("--edition", metavar="NAME", help="key edition (default: latest published)")


def add_judges_argument(parser: Any) -> None:
    """Add `--judges ID,ID`: judges other than the benchmark's judge panel (read it back
    with `judge_ids_option`)."""
    parser.add_argument(
        "--judges",
        metavar="ID,ID",
        default=None,
        help="judge ids (default: the benchmark's judge panel)",
    )


def judge_ids_option(options: dict[str, Any]) -> list[str] | None:
    """Return the judge ids of `--judges` ("a,b" -> ["a", "b"]), None when not given."""
    return [j for j in (options.get("judges") or "").split(",") if j] or None


def add_format_argument(parser: Any, choices: tuple[str, ...] = ("text", "json")) -> None:
    parser.add_argument(
        "--format",
        choices=choices,
        default=choices[0],
        help="output format; json prints exactly one JSON document on stdout",
    )


def resolve_benchmark(name: str | None) -> Benchmark:
    """Return the benchmark for `--benchmark`, translating domain errors into exit codes."""
    from questions.selectors import get_benchmark

    try:
        return get_benchmark(name)
    except AmbiguousError as exc:
        raise CommandError(str(exc), returncode=EXIT_USAGE) from exc
    except NotFoundError as exc:
        raise CommandError(str(exc), returncode=EXIT_BAD_INPUT) from exc


def bad_input(message: str) -> CommandError:
    """Return the CommandError for bad input (exit 1); `raise bad_input(...)`."""
    return CommandError(message, returncode=EXIT_BAD_INPUT)


def usage_error(message: str) -> CommandError:
    return CommandError(message, returncode=EXIT_USAGE)


def domain_error(exc: DomainError) -> CommandError:
    """Map a domain error to its exit code: ambiguity is usage (2), the rest bad input (1)."""
    code = EXIT_USAGE if isinstance(exc, AmbiguousError) else EXIT_BAD_INPUT
    return CommandError(str(exc), returncode=code)


def write_json(command: BaseCommand, document: Any) -> None:
    """Write one JSON document (UTF-8, no NaN) to the command's stdout."""
    command.stdout.write(json.dumps(document, ensure_ascii=False, allow_nan=False, indent=2))
    command._json_written = True


class JsonCommand(BaseCommand):
    """A command whose `--format json` prints one JSON document on failure too.

    When handle() raises CommandError (bad input, exit 1; usage, exit 2) before writing
    its document, stdout gets {"ok": false, "error": message, "exit_code": n} and the
    message still goes to stderr, so a tool reading stdout always gets one document
    (cli.md). So do the option errors argparse reports (exit 2), when the arguments ask
    for `--format json`.
    """

    _json_written = False

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> Any:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parse_args, error = parser.parse_args, parser.error
        seen: list[str] = []

        def remember(args: Any = None, namespace: Any = None) -> Any:
            seen[:] = list(args if args is not None else sys.argv[2:])
            return parse_args(args, namespace)

        def usage_error_as_json(message: str) -> Any:
            wants_json = "--format=json" in seen or any(
                a == "--format" and b == "json" for a, b in zip(seen, seen[1:], strict=False)
            )
            if wants_json and not self._json_written:
                write_json(self, {"ok": False, "error": message, "exit_code": EXIT_USAGE})
            return error(message)

        parser.parse_args, parser.error = remember, usage_error_as_json
        return parser

    def execute(self, *args: Any, **options: Any) -> Any:
        self._json_written = False
        try:
            return super().execute(*args, **options)
        except CommandError as exc:
            if options.get("format") == "json" and not self._json_written:
                write_json(self, {"ok": False, "error": str(exc), "exit_code": exc.returncode})
            raise


def wants_progress(options: dict[str, Any]) -> bool:
    """Return True when a progress bar may be drawn: text output and stderr is a terminal."""
    if options.get("format") == "json":
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def progress(
    iterable: Iterable[T], *, enabled: bool, total: int | None = None, desc: str = ""
) -> Iterator[T]:
    """Wrap `iterable` in a tqdm bar on stderr when `enabled`, else return it unchanged."""
    if not enabled:
        yield from iterable
        return
    from tqdm import tqdm

    yield from tqdm(iterable, total=total, desc=desc, file=sys.stderr, leave=False, unit="row")
