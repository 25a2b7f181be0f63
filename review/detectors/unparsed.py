"""Detector `unparsed_replies`: replies that stay unparsed after the re-asks (issue 17 item 7).

A judge reply that could not be parsed (a refusal, say) is stored as a null grade and asked
again by later re-scoring runs, up to SNAGLIST_UNPARSED_RETRIES times. Where it is still
unparsed after that (or its judge cannot be asked: imported grades only), the response stays
out of the score; a question in that state may be one judges cannot grade against its key
(ambiguous, or worded so that judges refuse), which a person should look at.
"""

from __future__ import annotations

from django.conf import settings

from questions.models import KeyEdition
from scoring.runs.retries import unparsed_past_retries


def unparsed_findings(edition: KeyEdition) -> list[tuple[int, dict]]:
    """Return [(question pk, detail)] for questions with replies that stay unparsed.

    Detail: {"replies": [{"model", "judge", "asked"}], "n_replies", "retries"} where
    "asked" is how many answered calls the pair had and "retries" the setting in force.
    """
    retries = int(settings.SNAGLIST_UNPARSED_RETRIES)
    return [
        (qpk, {"replies": replies, "n_replies": len(replies), "retries": retries})
        for qpk, replies in sorted(unparsed_past_retries(edition, retries).items())
    ]
