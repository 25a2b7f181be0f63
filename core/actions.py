"""Every action the audit log records, with the phrase a person reads for it.

The one list of actions: services log with these values, the item history and the
audit-log page show their labels. A new state change adds its action here first.
"""

from __future__ import annotations

from django.db import models


class Action(models.TextChoices):
    """An audit-log action: `<entity>.<verb>` stored, a plain-English phrase shown."""

    REVIEW_ITEM_CREATE = "review_item.create", "put the item in the queue"
    REVIEW_ITEM_ADD_EVIDENCE = "review_item.add_evidence", "added evidence"
    REVIEW_ITEM_CLAIM = "review_item.claim", "claimed the item"
    REVIEW_ITEM_RENEW = "review_item.renew", "renewed the claim"
    REVIEW_ITEM_RELEASE = "review_item.release", "released the item"
    REVIEW_ITEM_REASSIGN = "review_item.reassign", "reassigned the item"
    REVIEW_ITEM_CHECK = "review_item.check", "recorded a citation check"
    REVIEW_ITEM_PROPOSE = "review_item.propose", "sent a proposal for approval"
    REVIEW_ITEM_RETURN = (
        "review_item.return",
        "sent the item back to its reviewer after a rejection",
    )
    REVIEW_ITEM_CLOSE = "review_item.close", "closed the item"
    CITATION_CHECK_RECORD = "citation_check.record", "stored a citation check's answers"
    PROPOSAL_CREATE = "proposal.create", "proposed a change"
    PROPOSAL_APPROVE = "proposal.approve", "approved the proposal"
    PROPOSAL_REJECT = "proposal.reject", "rejected the proposal"
    PROPOSAL_WITHDRAW = "proposal.withdraw", "withdrew the proposal"
    KEY_EDITION_CREATE = "key_edition.create", "opened a draft key edition"
    KEY_EDITION_PUBLISH = "key_edition.publish", "published the key edition"
    QUESTION_EXCLUDE = "question.exclude", "excluded the question from scoring"
    TRIAGE_RUN = "triage.run", "ran triage"
    USER_ROLES = "user.roles", "changed a user's roles"
    JUDGE_PANEL_SET = "judge_panel.set", "set the judge panel"
    CANDIDATE_PANEL_SET = "candidate_panel.set", "set the candidate panel"
    CANDIDATE_PANEL_CLEAR = "candidate_panel.clear", "discarded the candidate panel"
    CANDIDATE_PANEL_ADOPT = (
        "candidate_panel.adopt",
        "adopted the candidate panel as the judge panel",
    )
    READER_REPORT_SPAM = "reader_report.spam", "marked a reader's report as spam"
    BENCHMARK_PUBLICITY = (
        "benchmark.publicity",
        "changed who may read the benchmark's public results site",
    )
    JUDGE_PRICES_SET = "judge.prices_set", "set a judge's token prices"
    JUDGE_ACTIVATE = (
        "judge.activate",
        "activated a judge, having seen its address and key variable",
    )
    JUDGE_DEACTIVATE = "judge.deactivate", "deactivated a judge"
    RUN_BUDGET_SET = "run.budget_set", "set a run's budget"
    RUN_BUDGET_STOP = "run.budget_stop", "stopped the run at its budget"
    # written by the grade trigger (questions/trigger_functions.py), not by Python
    GRADE_REASK = "grade.reask", "replaced an unparsed grade with the judge's new reply"
    BENCHMARK_DELETE = "benchmark.delete", "deleted the benchmark and everything in it"
    HUMAN_SAMPLE_DRAW = "human_sample.draw", "drew a blind human grading sample"
    HUMAN_GRADE_RECORD = "human_grade.record", "recorded a blind grade of a sampled response"


def action_label(action: str) -> str:
    """Return the plain-English phrase for `action` (the stored value itself if unknown)."""
    try:
        return Action(action).label
    except ValueError:
        return action
