"""Grade what lacks a grade against an edition's key entries (cli.md `rescore`, rule 8).

    rescore [--edition NAME] [--judges ID,ID] [--batch] [--wait] [--resume [--run ID]]
            [--format json] [--dry-run] [--budget-cost X] [--budget-tokens N]
            [--benchmark NAME]

Creates a re-scoring run for the pairs (response, judge) lacking a grade against the
edition's current key entry and the judge's current prompt version, and enqueues it.
--wait polls the database until the run finishes (with eager tasks it already has).
--resume sends an unfinished run's pending pairs again instead of creating a run (a run
stopped at its budget too: give a raised --budget-cost / --budget-tokens).
--dry-run creates no run and calls no judge: it prints what the run would need and its
estimated tokens and cost (scoring.runs.estimate; cli.md keys needed, calls, tokens_in,
tokens_out, cost_live, cost_batch, plus tokens_cached, judges, notes).
--budget-cost X (in the judges' price currency) / --budget-tokens N (input + output) cap
the run: it stops before a chunk whose calls would pass the cap (scoring.runs.budget).
--batch sends the model judges' calls through the vendors' batch APIs (the run's mode
"batch"; scoring.runs.services.batch_mode); the run finishes once the poller has settled them.
Exit 0 on success, 1 on bad input or a run that finished failed, 2 on wrong usage.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from django.core.management.base import CommandError

from questions.cli import (
    JsonCommand,
    add_benchmark_argument,
    add_format_argument,
    bad_input,
    domain_error,
    resolve_benchmark,
    usage_error,
    write_json,
)
from questions.errors import DomainError
from scoring.models import Judge, ScoringRun
from scoring.runs import selectors as runs_selectors
from scoring.runs import services


class RunCommand(JsonCommand):
    """Shared body of `rescore` and `audit_key`: resolve, create or resume, wait, report."""

    kind = ScoringRun.Kind.GRADE
    role = Judge.Role.JUDGE
    judges_option = "judges"
    noun = "judge"

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--edition",
            metavar="NAME",
            default=None,
            help="key edition (default: the latest published)",
        )
        parser.add_argument(
            f"--{self.judges_option}",
            metavar="ID,ID",
            default=None,
            help=f"{self.noun} ids, comma-separated (default: every active "
            f"{self.noun} with a backend)",
        )
        parser.add_argument(
            "--wait", action="store_true", help="block until the run finishes (polls the database)"
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=None,
            metavar="SECONDS",
            help="with --wait: give up (exit 1) after this long",
        )
        parser.add_argument(
            "--resume", action="store_true", help="send an unfinished run's remaining pairs again"
        )
        if self.kind == ScoringRun.Kind.GRADE:
            parser.add_argument(
                "--batch",
                action="store_true",
                help="send the model judges' calls through their vendors' batch APIs (half "
                "price, results within 24 h; polled by the scoring.poll_batches beat task)",
            )
            parser.add_argument(
                "--panel",
                choices=("candidate",),
                default=None,
                help="candidate: grade for the candidate panel's judges (issue 31), what "
                "lacks a grade at their versions; estimate and budget as any run",
            )
        parser.add_argument(
            "--run",
            type=int,
            default=None,
            metavar="ID",
            help="with --resume: the run (default: the edition's newest unfinished)",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="create no run, call no judge: print the pairs needed and the estimated "
            "tokens and cost",
        )
        parser.add_argument(
            "--budget-cost",
            metavar="X",
            default=None,
            help="stop the run before its cost passes X (in the judges' price currency)",
        )
        parser.add_argument(
            "--budget-tokens",
            metavar="N",
            default=None,
            help="stop the run before its input + output tokens pass N",
        )
        add_benchmark_argument(parser)
        add_format_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        from questions.selectors import get_edition

        if options["run"] is not None and not options["resume"]:
            raise usage_error("--run is only used with --resume")
        if options["dry_run"] and (options["resume"] or options["wait"]):
            raise usage_error("--dry-run starts nothing: it takes no --resume or --wait")
        budget = {"budget_cost": options["budget_cost"], "budget_tokens": options["budget_tokens"]}
        batch = options.get("batch", False)
        if batch and options["resume"]:
            raise usage_error("--batch is for a new run; --resume keeps the run's own mode")
        benchmark = resolve_benchmark(options["benchmark"])
        try:
            edition = get_edition(benchmark, options["edition"])
        except DomainError as exc:
            raise domain_error(exc) from exc
        if options["resume"]:
            run = self._resume(edition, options["run"], budget)
        else:
            if options.get("panel") == "candidate":
                judges = self._candidate_judges(benchmark, options[self.judges_option])
            else:
                judges = self._judges(benchmark, edition, options[self.judges_option])
            if options["dry_run"]:
                self._dry_run(edition, judges, options["format"])
                return
            try:
                run = services.scoring_run_create(
                    edition=edition,
                    judges=judges,
                    kind=self.kind,
                    mode=ScoringRun.Mode.BATCH if batch else ScoringRun.Mode.LIVE,
                    **budget,
                )
            except DomainError as exc:
                raise domain_error(exc) from exc
            for note in filter(None, run.error.splitlines()):
                self.stderr.write(note)
        if options["wait"]:
            run = self._wait(run, options["timeout"], quiet=options["format"] == "json")
        run.refresh_from_db()
        self._report(run, options["format"])
        if run.status == ScoringRun.Status.STOPPED:
            self.stderr.write(
                f"run {run.pk} stopped at its budget; `--resume --run {run.pk}` with a raised "
                "--budget-cost / --budget-tokens finishes it"
            )
        if run.status == ScoringRun.Status.FAILED:
            raise bad_input(f"run {run.pk} finished with {run.failed} failed pair(s): {run.error}")

    def _candidate_judges(self, benchmark, wanted: str | None) -> list[Judge]:
        """The candidate panel's judges a run can grade for (notes on the others to stderr)."""
        from scoring.runs.services.candidate import candidate_graders, candidate_state

        if wanted:
            raise usage_error("--panel candidate names its judges: give no --judges")
        if not candidate_state(benchmark):
            raise bad_input(f"benchmark {benchmark.name!r} has no candidate panel")
        judges, notes = candidate_graders(benchmark)
        for note in notes:
            self.stderr.write(note)
        if not judges:
            raise bad_input("no judge of the candidate panel can grade: " + "; ".join(notes))
        return judges

    def _judges(self, benchmark, edition, wanted: str | None) -> list[Judge]:
        if not wanted:
            judges, _ = services.active_graders(edition, role=self.role)
            if not judges:
                raise bad_input(
                    f"no active {self.noun} of {benchmark.name} has a backend to grade with"
                )
            return judges
        ids = [w.strip() for w in wanted.split(",") if w.strip()]
        found = {j.judge_id: j for j in Judge.objects.filter(benchmark=benchmark, judge_id__in=ids)}
        missing = [i for i in ids if i not in found]
        if missing:
            known = ", ".join(
                Judge.objects.filter(benchmark=benchmark, role=self.role).values_list(
                    "judge_id", flat=True
                )
            )
            raise bad_input(
                f"--{self.judges_option}: unknown {self.noun}(s) {', '.join(missing)} "
                f"(known: {known or 'none'})"
            )
        return [found[i] for i in ids]

    def _dry_run(self, edition, judges: list[Judge], fmt: str) -> None:
        """Print the run's estimate (scoring.runs.estimate.estimate_run); nothing is written."""
        from scoring.runs.estimate import estimate_run, estimate_summary

        estimate = estimate_run(edition=edition, judges=judges, kind=self.kind)
        if fmt == "json":
            write_json(self, {"edition": edition.name, "kind": self.kind, **estimate.as_json()})
            return
        self.stdout.write(
            f"{self.kind} run of {edition.name} (dry run, nothing sent): "
            f"needed {estimate.needed}; {estimate_summary(estimate)}"
        )
        for judge in estimate.judges:
            self.stdout.write(
                f"  {judge.judge}: {judge.calls} calls, {judge.tokens_in} tokens in "
                f"({judge.tokens_cached} cached), {judge.tokens_out} out; {judge.basis}"
            )
        for note in estimate.notes:
            self.stdout.write(f"  note: {note}")

    def _resume(self, edition, run_id: int | None, budget: dict) -> ScoringRun:
        runs = ScoringRun.objects.filter(kind=self.kind)
        if run_id is not None:
            run = runs.filter(pk=run_id, benchmark=edition.benchmark).first()
            if run is None:
                raise bad_input(
                    f"no {self.kind} run {run_id} in benchmark {edition.benchmark.name}"
                )
        else:
            resumable = (*services.ACTIVE_STATUSES, ScoringRun.Status.STOPPED)
            run = (
                runs.filter(edition=edition, status__in=resumable)
                .order_by("-created_at", "-id")
                .first()
            )
            if run is None:
                raise bad_input(
                    f"no unfinished {self.kind} run of edition {edition.name} to resume"
                )
        try:
            run = services.scoring_run_resume(run=run, **budget)
        except DomainError as exc:
            raise domain_error(exc) from exc
        self.stderr.write(f"run {run.pk}: resumed ({run.needed - run.done} pair(s) remaining)")
        return run

    def _wait(self, run: ScoringRun, timeout: float | None, *, quiet: bool) -> ScoringRun:
        deadline = None if timeout is None else time.monotonic() + timeout
        last = None
        while True:
            run.refresh_from_db()
            if run.status not in services.ACTIVE_STATUSES:
                return run
            if not quiet and sys.stderr.isatty() and (run.done, run.needed) != last:
                last = (run.done, run.needed)
                self.stderr.write(f"\rrun {run.pk}: {run.done}/{run.needed}", ending="")
            if deadline is not None and time.monotonic() > deadline:
                raise CommandError(
                    f"run {run.pk} still {run.status} after {timeout:g} s "
                    f"({run.done}/{run.needed})",
                    returncode=1,
                )
            time.sleep(0.5)

    def _report(self, run: ScoringRun, fmt: str) -> None:
        summary = runs_selectors.run_summary(run)
        if fmt == "json":
            write_json(self, summary)
            return
        self.stdout.write(
            f"run {run.pk} ({run.get_kind_display().lower()}, {run.edition.name}): {run.status}; "
            f"needed {run.needed}, graded {run.graded}, reused {run.reused}, "
            f"failed {run.failed}, unparsed {run.unparsed}"
        )


class Command(RunCommand):
    help = "Grade the responses that lack a grade against the edition's current key entries."
