"""Every state change of the review workflow: one keyword-only function per action.

Each runs in one transaction, asks review.permissions (raising NotAllowedError), raises a
domain error for an illegal transition, and writes its audit log entry in the same
transaction. Side effects outside the database (re-scoring) run only after commit.

Concurrency: claims are conditional UPDATEs that must change exactly one row; "next item"
uses SELECT ... FOR UPDATE SKIP LOCKED on PostgreSQL. Edits based on a stale item
`version` raise ConflictError (HTTP 409) and write nothing.

The package, by concern (each module imports only those below it):
    items       review items and claims
    proposals   citation checks and proposals (approval lands in the draft edition)
    editions    the draft key edition, publishing
    common      locks, version checks, permission checks, the item's log entry
Import the actions from `review.services`.
"""

from __future__ import annotations

from review.services.editions import (
    draft_edition_get_or_create,
    draft_preview_rescore,
    key_edition_publish,
)
from review.services.items import (
    reader_report_create,
    reader_report_mark_spam,
    review_item_claim,
    review_item_claim_next,
    review_item_create,
    review_item_reassign,
    review_item_release,
    review_item_renew,
    review_item_report,
    review_items_file,
)
from review.services.proposals import (
    CONTRADICTIONS,
    check_contradictions,
    citation_check_record,
    item_decide,
    proposal_approve,
    proposal_create,
    proposal_reject,
    proposal_withdraw,
    proposals_approve,
    standing_evidence,
)

__all__ = [
    "reader_report_create",
    "reader_report_mark_spam",
    "citation_check_record",
    "draft_edition_get_or_create",
    "draft_preview_rescore",
    "item_decide",
    "key_edition_publish",
    "proposal_approve",
    "proposal_create",
    "proposal_reject",
    "CONTRADICTIONS",
    "check_contradictions",
    "proposal_withdraw",
    "standing_evidence",
    "proposals_approve",
    "review_item_claim",
    "review_item_claim_next",
    "review_item_create",
    "review_items_file",
    "review_item_reassign",
    "review_item_release",
    "review_item_renew",
    "review_item_report",
]
