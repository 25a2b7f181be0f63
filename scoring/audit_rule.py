"""Rule 4 of methodology.md (key audit) for one key entry's verdicts, and its exclusions.

Both auditors adverse (`wrong` or `ungradeable`; with SNAGLIST_AUDIT_EXCLUSION_RULE
`any_adverse` in any combination, with `same_verdict` only the same verdict) and
independent (different vendors, not the same backend and model) -> the key entry is
excluded from scoring automatically; adverse but not independent -> the question goes to
human review with both verdicts; exactly one adverse -> the question goes to human review
unchanged ("a single adverse opinion is not evidence"). Each auditor's verdict
at its current prompt version counts (`audit_decisions` says why).

Used by review's triage (which also queues the review items), by the methodology report
(scoring.board.report) and, through `exclude_by_audit`, by the bundle import,
so a benchmark imported with its audits is scored as rule 4 says from the start, and an
export re-imports to the same exclusions. `exclusions_write` is the one writer of
exclusions: it writes each with its audit-log entry (core.services.audit_log) in the
caller's transaction.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F

from core.actions import Action
from core.services import audit_log
from questions import services as question_services
from questions.models import AuditExclusion, KeyEntry
from scoring.models import ADVERSE_VERDICTS, AuditVerdict, Judge

ADVERSE = ADVERSE_VERDICTS
EXCLUSION_REASON = "auditors_agree"

EXCLUDE = "exclude"  # every auditor (two or more) adverse, as the rule requires
MIXED = "mixed"  # every auditor adverse but with different verdicts, rule same_verdict
SINGLE = "single"  # exactly one auditor adverse
NOT_INDEPENDENT = "not_independent"  # every auditor adverse, but no two are independent
# The outcomes that send a question to human review unchanged (triage queues them; the
# report counts them as `audit_sent_to_review`).
TO_REVIEW = frozenset({SINGLE, MIXED, NOT_INDEPENDENT})


@dataclass(frozen=True)
class AuditDecision:
    """Rule 4 for one key entry: the verdicts that count and what they decide.

    `verdicts`: [(auditor judge_id, verdict or None when unparsed, rationale)], one per
    auditor with a verdict that counts, in judge_id order. `outcome`: EXCLUDE, MIXED,
    NOT_INDEPENDENT, SINGLE or None (see `audit_decisions`). `why_not_independent`: for
    NOT_INDEPENDENT, why no two of the auditors are independent (`not_independent`).
    """

    verdicts: tuple[tuple[str, str | None, str], ...]
    outcome: str | None
    why_not_independent: str = ""


@dataclass(frozen=True)
class AuditorIdentity:
    """Who an auditor is, for independence: its judge_id, vendor, backend and model name."""

    judge_id: str
    vendor: str
    backend: str
    model: str


def not_independent(a: AuditorIdentity, b: AuditorIdentity) -> str:
    """Return why auditors `a` and `b` are not independent opinions, or "" when they are.

    Methodology.md rule 4: automatic exclusion needs two independent opinions, auditors
    of different vendors, not the same backend and model. Vendors compare trimmed and
    case-folded; a blank vendor is unknown, so it is never "different". Backend and
    model compare the same way; two auditors with the same non-blank model name and the
    same backend (both blank included: imported verdicts) are the same model.
    """

    def norm(value: str) -> str:
        return (value or "").strip().casefold()

    if not norm(a.vendor) or not norm(b.vendor):
        blank = a.judge_id if not norm(a.vendor) else b.judge_id
        return f"the vendor of {blank} is not recorded"
    if norm(a.vendor) == norm(b.vendor):
        return f"{a.judge_id} and {b.judge_id} are both from vendor {a.vendor.strip()}"
    if norm(a.model) and norm(a.model) == norm(b.model) and norm(a.backend) == norm(b.backend):
        return f"{a.judge_id} and {b.judge_id} are the same model ({a.model.strip()})"
    return ""


def _outcome(
    verdicts: Sequence[str | None], rule: str, auditors: Sequence[AuditorIdentity]
) -> tuple[str | None, str]:
    adverse = [v for v in verdicts if v in ADVERSE]
    if len(verdicts) >= 2 and len(adverse) == len(verdicts):
        if rule != "any_adverse" and len(set(adverse)) > 1:
            return MIXED, ""
        reasons = [not_independent(a, b) for i, a in enumerate(auditors) for b in auditors[i + 1 :]]
        if any(not r for r in reasons):
            return EXCLUDE, ""
        return NOT_INDEPENDENT, "; ".join(dict.fromkeys(reasons))
    return (SINGLE if len(adverse) == 1 else None), ""


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
    is adverse (`wrong`/`ungradeable`; with same_verdict the same verdict) and at least
    two of them are independent (`not_independent`: different vendors, not the same
    backend and model); NOT_INDEPENDENT when that holds except that no two are
    independent (the question goes to review with every verdict, rule 4); MIXED when all
    are adverse with different verdicts under same_verdict; SINGLE when exactly one is
    adverse; None otherwise (e.g. two adverse of three: no unanimity, more than one
    opinion). An unparsed verdict (None) counts as an opinion that is not adverse.
    """
    rule = rule or settings.SNAGLIST_AUDIT_EXCLUSION_RULE
    by_entry: dict[int, list[tuple[str, str | None, str]]] = defaultdict(list)
    who: dict[int, list[AuditorIdentity]] = defaultdict(list)
    for entry_id, auditor, verdict, rationale, vendor, backend, model in (
        AuditVerdict.objects.filter(
            key_entry_id__in=list(entry_ids),
            auditor__role=Judge.Role.AUDITOR,
            prompt_version=F("auditor__prompt_version"),
        )
        # one verdict per (entry, auditor, prompt version): a database constraint
        .order_by("key_entry_id", "auditor__judge_id")
        .values_list(
            "key_entry_id",
            "auditor__judge_id",
            "verdict",
            "rationale",
            "auditor__vendor",
            "auditor__backend",
            "auditor__model",
        )
    ):
        by_entry[entry_id].append((auditor, verdict, rationale))
        who[entry_id].append(AuditorIdentity(auditor, vendor, backend, model))
    decisions = {}
    for entry_id, vs in by_entry.items():
        outcome, why = _outcome([v for _, v, _ in vs], rule, who[entry_id])
        decisions[entry_id] = AuditDecision(tuple(vs), outcome, why)
    return decisions


def exclude_by_audit(
    entry_ids: Iterable[int],
    rule: str | None = None,
    *,
    user=None,
    source: str = "",
) -> list[int]:
    """Exclude every entry of `entry_ids` whose `audit_decisions` outcome is EXCLUDE and log each new
    exclusion; return the entries newly excluded, in pk order (an entry already excluded
    keeps its first exclusion).

    `user` is the acting user (None: the system); `source` (e.g. "bundle import ...") goes
    into each log entry's `after` with the entry's edition. Runs in the caller's
    transaction (exclusions_write).
    """
    decisions = audit_decisions(entry_ids, rule)
    wanted = [e for e, decision in decisions.items() if decision.outcome == EXCLUDE]
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
