"""`activate_judge`: show a judge's address and key variable, then activate it (issue 26)."""

from __future__ import annotations

import sys

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
from scoring.models import Judge
from scoring.runs.services.judge_access import judge_endpoint, judge_set_active


class Command(JsonCommand):
    help = (
        "Show a judge's address (base_url) and the environment variable its key is read from, "
        "then activate it (a judge that calls an API and came from a bundle is inactive until "
        "then), or deactivate it with --deactivate. Audit-logged. Activation needs --yes, or "
        "a 'y' at the prompt on a terminal."
    )

    def add_arguments(self, parser):
        parser.add_argument("judge_id", metavar="JUDGE_ID", help="the judge (or auditor) id")
        add_benchmark_argument(parser)
        parser.add_argument(
            "--deactivate", action="store_true", help="deactivate the judge instead"
        )
        parser.add_argument(
            "--yes",
            action="store_true",
            help="activate without asking (you have checked the address and key variable)",
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
        judge = Judge.objects.filter(benchmark=benchmark, judge_id=options["judge_id"]).first()
        if judge is None:
            known = ", ".join(
                Judge.objects.filter(benchmark=benchmark).values_list("judge_id", flat=True)
            )
            raise bad_input(
                f"no judge {options['judge_id']!r} in {benchmark.name} (known: {known or 'none'})"
            )
        actor = None
        if options["user"]:
            actor = get_user_model().objects.filter(username=options["user"]).first()
            if actor is None:
                raise bad_input(f"--user: no user {options['user']!r}")
        shown = judge_endpoint(judge)
        activate = not options["deactivate"]
        if options["format"] != "json":
            self._show(shown)
        if activate and not judge.active and not shown["problems"] and not options["yes"]:
            if not sys.stdin.isatty():
                raise bad_input(
                    f"judge {judge.judge_id} not activated: check its address and key variable "
                    "above, then run again with --yes"
                )
            answer = input(
                f"Activate {judge.judge_id}, calling {shown['base_url'] or 'the vendor'}"
                f" with the key in {shown['api_key_env']}? [y/N] "
            )
            if answer.strip().lower() not in ("y", "yes"):
                raise bad_input(f"judge {judge.judge_id} not activated")
        try:
            changed = judge_set_active(judge=judge, active=activate, actor=actor)
        except DomainError as exc:
            raise domain_error(exc) from exc
        if options["format"] == "json":
            write_json(
                self,
                {"benchmark": benchmark.name, **judge_endpoint(judge), "changed": changed},
            )
            return
        state = "active" if judge.active else "inactive"
        verb = "is now" if changed else "was already"
        self.stdout.write(f"Judge {judge.judge_id} {verb} {state}.\n")

    def _show(self, shown: dict) -> None:
        self.stdout.write(
            f"Judge {shown['judge']}: backend {shown['backend'] or 'none'}, "
            f"model {shown['model'] or '-'}\n"
            f"  address:      {shown['base_url'] or '(the vendor SDK default)'}\n"
            f"  key variable: {shown['api_key_env'] or '-'}\n"
            f"  active:       {'yes' if shown['active'] else 'no'}\n"
        )
        for problem in shown["problems"]:
            self.stdout.write(f"  refused: {problem}\n")
