"""`panel`: show or set a benchmark's judge panel (methodology rule 12)."""

from __future__ import annotations

from django.contrib.auth import get_user_model

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
from scoring.services.panel import judge_panel_set, panel_state, parse_panel_spec


class Command(JsonCommand):
    help = (
        "Show the judge panel (the judges, at pinned prompt versions, whose grades make the "
        "published figures), or replace it with --set. Changing the panel is audit-logged."
    )

    def add_arguments(self, parser):
        add_benchmark_argument(parser)
        parser.add_argument(
            "--set",
            metavar="ID[@VERSION],...",
            default=None,
            help="replace the panel; a judge without @VERSION sits at its current prompt version",
        )
        parser.add_argument(
            "--user",
            metavar="NAME",
            default=None,
            help="the admin making the change, named in the audit log (default: system)",
        )
        add_format_argument(parser, ("table", "json"))

    def handle(self, *args, **options):
        benchmark = resolve_benchmark(options["benchmark"])
        actor = None
        if options["user"]:
            actor = get_user_model().objects.filter(username=options["user"]).first()
            if actor is None:
                raise bad_input(f"--user: no user {options['user']!r}")
        changed = False
        try:
            if options["set"] is not None:
                before = panel_state(benchmark)
                members = parse_panel_spec(options["set"])
                panel = judge_panel_set(benchmark=benchmark, members=members, actor=actor)
                changed = panel != before
            else:
                panel = panel_state(benchmark)
        except DomainError as exc:
            raise domain_error(exc) from exc
        if options["format"] == "json":
            write_json(self, {"benchmark": benchmark.name, "panel": panel, "changed": changed})
            return
        if not panel:
            self.stdout.write(
                f"Benchmark {benchmark.name}: no judge panel set; figures use every active "
                "judge. Set one with --set ID,ID.\n"
            )
            return
        verb = "now" if changed else "is"
        names = ", ".join(f"{m['judge']}@{m['prompt_version']}" for m in panel)
        self.stdout.write(f"Benchmark {benchmark.name}: the judge panel {verb} {names}\n")
