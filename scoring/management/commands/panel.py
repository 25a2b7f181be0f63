"""`panel`: show or set a benchmark's judge panel (methodology rule 12), and its candidate
panel (issue 31): define one, discard it, or adopt it as the judge panel."""

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
from scoring.runs.services.candidate import (
    candidate_adopt,
    candidate_clear,
    candidate_set,
    candidate_state,
)
from scoring.runs.services.panel import judge_panel_set, panel_state, parse_panel_spec


def _names(panel: list[dict[str, str]]) -> str:
    return ", ".join(f"{m['judge']}@{m['prompt_version']}" for m in panel)


class Command(JsonCommand):
    help = (
        "Show the judge panel (the judges, at pinned prompt versions, whose grades make the "
        "published figures), or replace it with --set; define, discard or adopt a candidate "
        "panel (shown to admins and editors only until adopted). Every change is audit-logged."
    )

    def add_arguments(self, parser):
        add_benchmark_argument(parser)
        group = parser.add_mutually_exclusive_group()
        group.add_argument(
            "--set",
            metavar="ID[@VERSION],...",
            default=None,
            help="replace the panel; a judge without @VERSION sits at its current prompt version",
        )
        group.add_argument(
            "--candidate",
            metavar="ID[@VERSION],...",
            default=None,
            help="define the candidate panel (changes no published figure)",
        )
        group.add_argument(
            "--clear-candidate", action="store_true", help="discard the candidate panel"
        )
        group.add_argument(
            "--adopt-candidate",
            action="store_true",
            help="make the candidate panel the judge panel (logged as setting the panel)",
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
        before = panel_state(benchmark)
        before_candidate = candidate_state(benchmark)
        try:
            if options["set"] is not None:
                members = parse_panel_spec(options["set"])
                judge_panel_set(benchmark=benchmark, members=members, actor=actor)
            elif options["candidate"] is not None:
                members = parse_panel_spec(options["candidate"])
                candidate_set(benchmark=benchmark, members=members, actor=actor)
            elif options["clear_candidate"]:
                if not candidate_clear(benchmark=benchmark, actor=actor):
                    raise bad_input(f"benchmark {benchmark.name!r} has no candidate panel")
            elif options["adopt_candidate"]:
                candidate_adopt(benchmark=benchmark, actor=actor)
        except DomainError as exc:
            raise domain_error(exc) from exc
        panel, candidate = panel_state(benchmark), candidate_state(benchmark)
        changed = panel != before
        if options["format"] == "json":
            write_json(
                self,
                {
                    "benchmark": benchmark.name,
                    "panel": panel,
                    "changed": changed,
                    "candidate": candidate,
                    "candidate_changed": candidate != before_candidate,
                },
            )
            return
        if not panel:
            self.stdout.write(
                f"Benchmark {benchmark.name}: no judge panel set; figures use every active "
                "judge. Set one with --set ID,ID.\n"
            )
        else:
            verb = "now" if changed else "is"
            self.stdout.write(
                f"Benchmark {benchmark.name}: the judge panel {verb} {_names(panel)}\n"
            )
        if candidate:
            self.stdout.write(
                f"Candidate panel (not published; admins and editors see it beside the judge "
                f"panel): {_names(candidate)}\n"
            )
        elif options["adopt_candidate"]:
            self.stdout.write("The candidate panel was adopted; there is no candidate now.\n")
