"""Rule 4 of methodology.md (key audit) for one key entry's verdicts, and its exclusions.

Both auditors adverse (`wrong` or `ungradeable`; with SNAGLIST_AUDIT_EXCLUSION_RULE
`any_adverse` in any combination, with `same_verdict` only the same verdict) -> the key
entry is excluded from scoring automatically; exactly one adverse -> the question goes to
human review unchanged ("a single adverse opinion is not evidence"). Each auditor's newest
verdict on the entry counts (an older prompt version's is superseded).

Used by review's triage (which also queues the review items) and by the bundle import,
so a benchmark imported with its audits is scored as rule 4 says from the start, and an
export re-imports to the same exclusions. `exclusions_write` is the one writer of
exclusions: it writes each with its audit-log entry (core.services.audit_log) in the
caller's transaction.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from django.conf import settings
from django.db import transaction

from core.actions import Action
from core.services import audit_log
from questions import services as question_services
from questions.models import AuditExclusion, KeyEntry
from scoring.models import AuditVerdict, Judge

ADVERSE = frozenset({AuditVerdict.Verdict.WRONG, AuditVerdict.Verdict.UNGRADEABLE})
EXCLUSION_REASON = "auditors_agree"

EXCLUDE = "exclude"  # every auditor (two or more) adverse, as the rule requires
MIXED = "mixed"  # every auditor adverse but with different verdicts, rule same_verdict
SINGLE = "single"  # exactly one auditor adverse


def audit_outcome(verdicts: Sequence[str], rule: str | None = None) -> str | None:
    """Return EXCLUDE, MIXED, SINGLE or None for one entry's verdicts (one per auditor).

    `rule` is "any_adverse" or "same_verdict" (default: SNAGLIST_AUDIT_EXCLUSION_RULE).
    Two adverse of three auditors is none of these (no unanimity, more than one opinion).
    """
    rule = rule or settings.SNAGLIST_AUDIT_EXCLUSION_RULE
    adverse = [v for v in verdicts if v in ADVERSE]
    if len(verdicts) >= 2 and len(adverse) == len(verdicts):
        return EXCLUDE if rule == "any_adverse" or len(set(adverse)) == 1 else MIXED
    return SINGLE if len(adverse) == 1 else None


def newest_verdicts(entry_ids: Iterable[int]) -> dict[int, list[tuple[str, str, str]]]:
    """Return {key entry pk: [(auditor judge_id, verdict, rationale), ...]} (one query).

    Each auditor's newest verdict on the entry, auditors in judge_id order; entries with
    no verdict are absent. Only judges with the auditor role count.
    """
    out: dict[int, list[tuple[str, str, str]]] = defaultdict(list)
    seen: set[tuple[int, str]] = set()
    for entry_id, auditor, verdict, rationale in (
        AuditVerdict.objects.filter(
            key_entry_id__in=list(entry_ids), auditor__role=Judge.Role.AUDITOR
        )
        .order_by("auditor__judge_id", "-created_at", "-id")
        .values_list("key_entry_id", "auditor__judge_id", "verdict", "rationale")
    ):
        if (entry_id, auditor) not in seen:
            seen.add((entry_id, auditor))
            out[entry_id].append((auditor, verdict, rationale))
    return dict(out)


def exclude_by_audit(
    entry_ids: Iterable[int],
    rule: str | None = None,
    *,
    user=None,
    source: str = "",
) -> list[int]:
    """Exclude every entry of `entry_ids` whose verdicts give EXCLUDE and log each new
    exclusion; return the entries newly excluded, in pk order (an entry already excluded
    keeps its first exclusion).

    `user` is the acting user (None: the system); `source` (e.g. "bundle import ...") goes
    into each log entry's `after` with the entry's edition. Runs in the caller's
    transaction (exclusions_write).
    """
    verdicts = newest_verdicts(entry_ids)
    wanted = [
        e for e, vs in verdicts.items() if audit_outcome([v for _, v, _ in vs], rule) == EXCLUDE
    ]
    have = set(
        AuditExclusion.objects.filter(key_entry_id__in=wanted).values_list(
            "key_entry_id", flat=True
        )
    )
    todo = (
        KeyEntry.objects.filter(pk__in=sorted(set(wanted) - have))
        .select_related("question__benchmark", "edition")
        .order_by("pk")
    )
    entries = []
    for entry in todo:
        detail = {"edition": entry.edition.name}
        if source:
            detail["source"] = source
        entries.append((entry, detail))
    return exclusions_write(entries=entries, reason=EXCLUSION_REASON, user=user)


def exclusions_write(
    *,
    entries: Iterable[tuple[KeyEntry, dict[str, Any]]],
    reason: str,
    user=None,
) -> list[int]:
    """Exclude each key entry of `entries` from scoring (rule 4) and log each new exclusion.

    `entries` are (key entry, detail) pairs; `detail` (JSON-serialisable) joins the log
    entry's `after`. Each exclusion is logged as `question.exclude` against the entry's
    question, with the entry's edition, in the same transaction. An entry already excluded
    keeps its first reason and is not logged again. Returns the pks newly excluded, in
    the order given. Raises questions.errors.DomainError for an empty or over-long reason.
    """
    new: list[int] = []
    with transaction.atomic():
        for entry, detail in entries:
            _, created = question_services.key_entry_exclude(entry=entry, reason=reason)
            if created:
                _log_exclusion(entry, reason, user, detail)
                new.append(entry.pk)
    return new


def _log_exclusion(entry: KeyEntry, reason: str, user, detail: dict[str, Any]) -> None:
    question = entry.question
    audit_log(
        actor=user,
        action=Action.QUESTION_EXCLUDE,
        target_type="question",
        target_id=question.pk,
        target_label=f"{question.benchmark.name}/{question.question_id}",
        benchmark_name=question.benchmark.name,
        before={"excluded": False, "key_entry_edition": entry.edition.name},
        after={
            "excluded": True,
            "excluded_reason": reason,
            "key_entry_edition": entry.edition.name,
            **detail,
        },
    )
