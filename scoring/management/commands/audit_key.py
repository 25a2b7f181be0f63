"""Auditor verdicts on an edition's key entries (cli.md `audit_key`, methodology rule 4).

    audit_key [--edition NAME] [--auditors ID,ID] [--wait] [--resume] [--format json]
              [--benchmark NAME]

Same contract as `rescore`; the counters count verdicts instead of grades. When the run
finishes, triage of the edition follows by itself (the run's follow-up task,
settings.SNAGLIST_AUDIT_FOLLOW_UP_TASK), as for an audit started on the Runs page or the API.
"""

from __future__ import annotations

from scoring.management.commands.rescore import RunCommand
from scoring.models import Judge, ScoringRun


class Command(RunCommand):
    help = "Ask the auditors for a verdict on each key entry that lacks a current one."
    kind = ScoringRun.Kind.AUDIT
    role = Judge.Role.AUDITOR
    judges_option = "auditors"
    noun = "auditor"
