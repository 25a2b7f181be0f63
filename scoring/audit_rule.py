"""Rule 4 of methodology.md (key audit) for one key entry's verdicts, and its exclusions.

Both auditors adverse (`wrong` or `ungradeable`; with SNAGLIST_AUDIT_EXCLUSION_RULE
`any_adverse` in any combination, with `same_verdict` only the same verdict) -> the key
entry is excluded from scoring automatically; exactly one adverse -> the question goes to
human review unchanged ("a single adverse opinion is not evidence"). Each auditor's verdict
at its current prompt version counts (`audit_decisions` says why).

Used by review's triage (which also queues the review items), by the methodology report
(scoring.report) and, through `exclude_by_audit`, by the bundle import,
so a benchmark imported with its audits is scored as rule 4 says from the start, and an
export re-imports to the same exclusions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db.models import F

from questions.models import AuditExclusion
from scoring.models import AuditVerdict, Judge

ADVERSE = frozenset({AuditVerdict.Verdict.WRONG, AuditVerdict.Verdict.UNGRADEABLE})
EXCLUSION_REASON = "auditors_agree"

EXCLUDE = "exclude"  # every auditor (two or more) adverse, as the rule requires
MIXED = "mixed"  # every auditor adverse but with different verdicts, rule same_verdict
SINGLE = "single"  # exactly one auditor adverse


@dataclass(frozen=True)
class AuditDecision:
    """Rule 4 for one key entry: the verdicts that count and what they decide.

    `verdicts`: [(auditor judge_id, verdict or None when unparsed, rationale)], one per
    auditor with a verdict that counts, in judge_id order. `outcome`: EXCLUDE, MIXED,
    SINGLE or None (see `audit_decisions`).
    """

    verdicts: tuple[tuple[str, str | None, str], ...]
    outcome: str | None


def _outcome(verdicts: Sequence[str | None], rule: str) -> str | None:
    adverse = [v for v in verdicts if v in ADVERSE]
    if len(verdicts) >= 2 and len(adverse) == len(verdicts):
        return EXCLUDE if rule == "any_adverse" or len(set(adverse)) == 1 else MIXED
    return SINGLE if len(adverse) == 1 else None


def audit_decisions(entry_ids: Iterable[int], rule: str | None = None) -> dict[int, AuditDecision]:
    """Decide rule 4 for each key entry of `entry_ids`: {entry pk: AuditDecision} (one query).

    The one place that decides "adverse" and "single flag" (methodology.md rule 4), used by
    the exclusion writer (`exclude_by_audit`), review's triage and the methodology report.
    Entries with no verdict that counts are absent.

    Verdicts that count: each auditor's (role auditor) verdict given with its *current*
    prompt version; a verdict of an older prompt version does not count. Why: a verdict,
    like a grade, is the output of one auditor configuration (verdicts and grades are
    unique per key entry, judge and prompt version), and the figures of rule 12 are those
    of the current judges and auditors (scoring.selectors uses only current-version
    grades). After a prompt bump an old verdict is evidence from an auditor that no longer
    exists, so it may neither exclude an entry nor send it to review; until the auditor
    has audited again the entry has one opinion fewer. Taking the newest of any version
    instead would let the queue follow an old prompt while the report did not.

    Outcome, with `rule` "any_adverse" or "same_verdict" (default:
    SNAGLIST_AUDIT_EXCLUSION_RULE): EXCLUDE when every auditor that counts (two or more)
    is adverse (`wrong`/`ungradeable`; with same_verdict the same verdict); MIXED when all
    are adverse with different verdicts under same_verdict; SINGLE when exactly one is
    adverse; None otherwise (e.g. two adverse of three: no unanimity, more than one
    opinion). An unparsed verdict (None) counts as an opinion that is not adverse.
    """
    rule = rule or settings.SNAGLIST_AUDIT_EXCLUSION_RULE
    by_entry: dict[int, list[tuple[str, str | None, str]]] = defaultdict(list)
    for entry_id, auditor, verdict, rationale in (
        AuditVerdict.objects.filter(
            key_entry_id__in=list(entry_ids),
            auditor__role=Judge.Role.AUDITOR,
            prompt_version=F("auditor__prompt_version"),
        )
        # one verdict per (entry, auditor, prompt version): a database constraint
        .order_by("key_entry_id", "auditor__judge_id")
        .values_list("key_entry_id", "auditor__judge_id", "verdict", "rationale")
    ):
        by_entry[entry_id].append((auditor, verdict, rationale))
    return {
        entry_id: AuditDecision(tuple(vs), _outcome([v for _, v, _ in vs], rule))
        for entry_id, vs in by_entry.items()
    }


def exclude_by_audit(entry_ids: Iterable[int], rule: str | None = None) -> list[int]:
    """Exclude every entry of `entry_ids` whose `audit_decisions` outcome is EXCLUDE; return
    the entries newly excluded (an entry already excluded keeps its first exclusion).
    Three queries."""
    decisions = audit_decisions(entry_ids, rule)
    wanted = [e for e, decision in decisions.items() if decision.outcome == EXCLUDE]
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
