"""Rule 4 of methodology.md (key audit) for one key entry's verdicts, and its exclusions.

Both auditors adverse (`wrong` or `ungradeable`; with SNAGLIST_AUDIT_EXCLUSION_RULE
`any_adverse` in any combination, with `same_verdict` only the same verdict) -> the key
entry is excluded from scoring automatically; exactly one adverse -> the question goes to
human review unchanged ("a single adverse opinion is not evidence"). Each auditor's newest
verdict on the entry counts (an older prompt version's is superseded).

Used by review's triage (which also queues the review items) and by the bundle import,
so a benchmark imported with its audits is scored as rule 4 says from the start, and an
export re-imports to the same exclusions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from django.conf import settings

from questions.models import AuditExclusion
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


def exclude_by_audit(entry_ids: Iterable[int], rule: str | None = None) -> list[int]:
    """Exclude every entry of `entry_ids` whose verdicts give EXCLUDE; return the entries
    newly excluded (an entry already excluded keeps its first exclusion). Three queries."""
    verdicts = newest_verdicts(entry_ids)
    wanted = [
        e for e, vs in verdicts.items() if audit_outcome([v for _, v, _ in vs], rule) == EXCLUDE
    ]
    have = set(
        AuditExclusion.objects.filter(key_entry_id__in=wanted).values_list(
            "key_entry_id", flat=True
        )
    )
    new = sorted(set(wanted) - have)
    AuditExclusion.objects.bulk_create(
        [AuditExclusion(key_entry_id=e, reason=EXCLUSION_REASON) for e in new]
    )
    return new
