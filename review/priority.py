"""An item's priority and its reasons in words, from its evidence (issue 17 item 5).

The one place that ranks the review queue: review.services.items.review_item_create calls
:func:`evidence_priority` with every piece of evidence the item holds and stores the
result on the item (``priority`` and ``reasons``).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from dataclasses import dataclass

from review.models import Source

# Points per kind of evidence (the base) and for its strength (0-1 times the extra).
# Order, from first principles: both judges flagging while grading (two independent
# opinions that saw responses) > models agreeing against the key > strong models marked
# down > the responses' final answers agreeing on another answer > a superseded document
# > one adverse auditor > one judge's flag or a missing locator > a person's report.
_BASE = {
    "judge_flag_both": 450,
    Source.CONSENSUS_AGAINST_KEY: 300,
    Source.MODELS_AGAINST_KEY: 250,
    Source.RESPONSES_AGREE_AGAINST_KEY: 200,
    "superseded_document": 200,
    Source.SINGLE_AUDITOR_FLAG: 150,
    Source.JUDGE_FLAG: 120,
    Source.SUPERSEDED_CITATION: 120,
    Source.UNPARSED_REPLIES: 100,
    Source.MANUAL: 100,
    Source.REPORTED: 100,
}
#: Base for a kind this module does not know (another detector's): counted, never dropped.
DEFAULT_BASE = 100
_EXTRA = {
    Source.CONSENSUS_AGAINST_KEY: 100,  # x share of models at the lowest grade
    Source.MODELS_AGAINST_KEY: 100,  # x shortfall (0-1 of the scale)
    Source.RESPONSES_AGREE_AGAINST_KEY: 100,  # a majority of all models; half for the strongest half
}


@dataclass(frozen=True)
class Priority:
    """``points``: the queue order (higher first); ``primary``: the kind worth most;
    ``reasons``: one sentence, e.g. "2 signals: both judges flagged the key; 4 of 5
    models at the lowest grade while scoring well"."""

    points: int
    primary: str
    reasons: str


def _kind_key(kind: str, detail: dict) -> str:
    if kind == Source.JUDGE_FLAG and detail.get("both_judges"):
        return "judge_flag_both"
    if kind == Source.SUPERSEDED_CITATION and detail.get("problem") in ("superseded", "withdrawn"):
        return "superseded_document"
    return kind


def _strength(kind: str, detail: dict) -> float:
    if kind == Source.CONSENSUS_AGAINST_KEY:
        return float(detail.get("share") or 0)
    if kind == Source.MODELS_AGAINST_KEY:
        return float(detail.get("shortfall") or 0)
    if kind == Source.RESPONSES_AGREE_AGAINST_KEY:
        return 1.0 if detail.get("basis") == "majority" else 0.5
    return 0.0


def evidence_words(kind: str, detail: dict) -> str:
    """Return one piece of evidence as a short British-English phrase for the queue."""
    if kind == Source.JUDGE_FLAG:
        return (
            "both judges flagged the key"
            if detail.get("both_judges")
            else "a judge flagged the key"
        )
    if kind == Source.SINGLE_AUDITOR_FLAG:
        adverse = [v for v in detail.get("verdicts", []) if v.get("verdict") != "correct"]
        if len(adverse) > 1:
            return f"{len(adverse)} auditors adverse, not independent or not the same verdict"
        return "one auditor adverse"
    if kind == Source.CONSENSUS_AGAINST_KEY:
        return (
            f"{len(detail.get('models', []))} of {detail.get('n_models', '?')} models at the "
            "lowest grade while scoring well"
        )
    if kind == Source.MODELS_AGAINST_KEY:
        return (
            f"{len(detail.get('marked_down', []))} of {detail.get('n_strongest', '?')} strongest "
            f"models marked down against their record (shortfall {detail.get('shortfall', 0):.2f})"
        )
    if kind == Source.RESPONSES_AGREE_AGAINST_KEY:
        who = (
            f"of the {detail.get('n_strongest')} strongest models"
            if detail.get("basis") == "strongest_half"
            else f"of {detail.get('n_models', '?')} models"
        )
        return (
            f"{len(detail.get('models', []))} {who} answer {detail.get('suggested_answer')}, "
            f"not the key's {detail.get('key_answer')}"
        )
    if kind == Source.SUPERSEDED_CITATION:
        # the citation checks' own words (review.citation_checks.describe), in a list's case
        from review.citation_checks import describe

        text = describe(detail)
        return text[:1].lower() + text[1:]
    if kind == Source.UNPARSED_REPLIES:
        n = detail.get("n_replies", 0)
        return f"{n} judge repl{'y' if n == 1 else 'ies'} still unparsed after re-asking"
    if kind == Source.MANUAL:
        note = str(detail.get("note") or "").strip()
        return f"reported by hand: {note_excerpt(note)}" if note else "reported by hand"
    if kind == Source.REPORTED:
        note = str(detail.get("note") or "").strip()
        return f"reported by a reader: {note_excerpt(note)}" if note else "reported by a reader"
    return kind.replace("_", " ")


#: The longest excerpt of a report's note in the queue's reasons, in characters.
NOTE_EXCERPT = 80


def note_excerpt(note: str, width: int = NOTE_EXCERPT) -> str:
    """Return `note` cut to at most `width` characters at a word boundary, ending " …".

    Whitespace runs become one space (``textwrap.shorten``). A note whose first word is
    itself longer than `width` is cut inside it (Django's ``Truncator.chars``), so the
    excerpt is never empty. Issue 30 item 9: the queue read "...5.8(a) says t".
    """
    cut = textwrap.shorten(note, width=width, placeholder=" …")
    if cut == "…" or cut == " …":
        from django.utils.text import Truncator

        return Truncator(" ".join(note.split())).chars(width)
    return cut


def evidence_priority(evidence: Iterable[tuple[str, dict]]) -> Priority:
    """Return the priority of an item holding ``evidence`` [(kind, detail)].

    points = sum over the distinct kinds of evidence of (base + extra x strength), the
    strongest piece of each kind counting once (a re-run that adds the same kind does not
    raise the item; a different kind, an independent signal, does). Bases and extras are
    in this module (_BASE, _EXTRA); strength is the share of models at the lowest grade,
    the models-against-the-key shortfall, or 1 (majority) / 0.5 (strongest half) for
    answers agreeing against the key. Reasons list the kinds strongest first. A reader's
    report marked as spam (detail `spam`) counts for nothing. Empty evidence gives
    Priority(0, "manual", "no evidence").
    """
    best: dict[str, tuple[int, str, str]] = {}
    for kind, detail in evidence:
        detail = detail or {}
        if kind == Source.REPORTED and detail.get("spam"):
            continue  # a reader's report a reviewer marked as spam is no evidence (issue 22)
        key = _kind_key(kind, detail)
        points = _BASE.get(key, DEFAULT_BASE) + round(_EXTRA.get(kind, 0) * _strength(kind, detail))
        group = Source.JUDGE_FLAG if key == "judge_flag_both" else key
        if group not in best or points > best[group][0]:
            best[group] = (points, kind, evidence_words(kind, detail))
    if not best:
        return Priority(0, Source.MANUAL, "no evidence")
    ranked = sorted(best.values(), key=lambda v: (-v[0], v[1]))
    words = "; ".join(w for _, _, w in ranked)
    n = len(ranked)
    reasons = words if n == 1 else f"{n} signals: {words}"
    return Priority(sum(p for p, _, _ in ranked), ranked[0][1], reasons)
