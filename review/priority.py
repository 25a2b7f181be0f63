"""An item's priority and its reasons in words, from its evidence (issue 17 item 5, issue 27 item 3).

The one place that ranks the review queue: review.services.items.review_item_create calls
:func:`evidence_priority` with every piece of evidence the item holds and stores the
result on the item (``priority`` and ``reasons``).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from dataclasses import dataclass

from review.models import Source
from scoring.models import ADVERSE_VERDICTS

#: The scale: weight of evidence in bans, log10 of a Bayes factor for "the key is wrong"
#: (Good 1950, *Probability and the Weighing of Evidence*; Jeffreys 1961 app. B: 1 ban =
#: ten to one). Independent pieces add; the item's priority is the sum in milli-bans
#: (an integer, higher first). The panel (panel_against_key) contributes its own fitted
#: log10 Bayes factor, which may be negative (the models side with the key). Every other
#: kind has a fixed weight, the likelihood ratio it is assumed to carry, with the reason:
WEIGHTS = {
    # two judges flag the key while grading, independently: ~10:1
    "judge_flag_both": 1.0,
    # one judge's flag: one opinion given in passing while grading, not asked to audit
    # the key (an auditor is), so a little below one auditor: ~2.5:1
    Source.JUDGE_FLAG: 0.4,
    # one adverse auditor (rule 4: not decisive alone): ~3:1; several adverse but not
    # independent or not the same verdict: ~5:1
    Source.SINGLE_AUDITOR_FLAG: 0.5,
    "auditors_adverse": 0.7,
    # the cited document is superseded or withdrawn: a fact from the register, ~30:1
    "superseded_document": 1.5,
    # another citation check failed (locator, quote, figure): text extraction can miss,
    # ~5:1
    Source.SUPERSEDED_CITATION: 0.7,
    # judge replies stay unparsed: the question may be ungradeable as keyed, ~2:1
    Source.UNPARSED_REPLIES: 0.3,
    # an editor added it by hand: a person read the key and doubts it, ~10:1
    Source.MANUAL: 1.0,
    # a reader's report: an outside, unvetted opinion, ~3:1 (spam: nothing)
    Source.REPORTED: 0.5,
    # the models' evidence when there is no panel figure (items from before issue 27, or
    # a benchmark the panel could not fit): majority of answers or consensus ~10:1,
    # the strongest half's answers or strong models marked down ~5:1
    Source.CONSENSUS_AGAINST_KEY: 1.0,
    "responses_majority": 1.0,
    Source.RESPONSES_AGREE_AGAINST_KEY: 0.7,
    Source.MODELS_AGAINST_KEY: 0.7,
}
#: The panel siding with the key lowers an item by less than this many bans: the models
#: learnt from the sources the key was written from (an out-of-date key is what they
#: repeat), so their agreement is weak evidence against a documentary or a person's
#: finding; it still orders items whose other evidence is equal (a continuous tie-break).
PANEL_FOR_KEY_CAP = 0.1
#: Weight of a kind this module does not know (another detector's): counted, never dropped.
DEFAULT_WEIGHT = 0.3
#: Kinds read off the same responses (their answers or their grades): counted once, as
#: one group. The panel, where present, is that group's figure (it already weighs the
#: answers and the grades); otherwise the strongest of the others.
RESPONSE_KINDS = frozenset(
    {
        Source.PANEL_AGAINST_KEY,
        Source.CONSENSUS_AGAINST_KEY,
        Source.RESPONSES_AGREE_AGAINST_KEY,
        Source.MODELS_AGAINST_KEY,
    }
)
#: Milli-bans per ban: the stored priority is an integer.
SCALE = 1000


@dataclass(frozen=True)
class Priority:
    """``points``: the queue order (higher first); ``primary``: the kind worth most;
    ``points`` is the weight of evidence in milli-bans (module WEIGHTS); ``reasons``: one sentence, e.g. "2 signals: both judges flagged the key; 4 of 5
    models at the lowest grade while scoring well"."""

    points: int
    primary: str
    reasons: str


def _adverse(detail: dict) -> list[dict]:
    """The verdicts of an auditor-flag detail that count against the key: rule 4's
    ADVERSE_VERDICTS (`wrong`, `ungradeable`); an unparsed verdict (None) is not adverse."""
    return [v for v in detail.get("verdicts", []) if v.get("verdict") in ADVERSE_VERDICTS]


def _weight_key(kind: str, detail: dict) -> str:
    if kind == Source.JUDGE_FLAG and detail.get("both_judges"):
        return "judge_flag_both"
    if kind == Source.SUPERSEDED_CITATION and detail.get("problem") in ("superseded", "withdrawn"):
        return "superseded_document"
    if kind == Source.SINGLE_AUDITOR_FLAG and len(_adverse(detail)) > 1:
        return "auditors_adverse"
    if kind == Source.RESPONSES_AGREE_AGAINST_KEY and detail.get("basis") == "majority":
        return "responses_majority"
    return kind


def evidence_weight(kind: str, detail: dict) -> float:
    """Return one piece of evidence's weight in bans (log10 Bayes factor for "key wrong").

    The panel's is its fitted ``log10_bf`` where positive; a negative one (the models
    side with the key) is squashed into (-PANEL_FOR_KEY_CAP, 0]; a reader's report marked as spam
    weighs 0; every other kind its fixed WEIGHTS entry (DEFAULT_WEIGHT when unknown).
    """
    detail = detail or {}
    if kind == Source.PANEL_AGAINST_KEY:
        bf = float(detail.get("log10_bf") or 0.0)
        return bf if bf >= 0 else PANEL_FOR_KEY_CAP * bf / (1 - bf)
    if kind == Source.REPORTED and detail.get("spam"):
        return 0.0
    return WEIGHTS.get(_weight_key(kind, detail), DEFAULT_WEIGHT)


def evidence_words(kind: str, detail: dict) -> str:
    """Return one piece of evidence as a short British-English phrase for the queue."""
    if kind == Source.JUDGE_FLAG:
        return (
            "both judges flagged the key"
            if detail.get("both_judges")
            else "a judge flagged the key"
        )
    if kind == Source.SINGLE_AUDITOR_FLAG:
        adverse = _adverse(detail)
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
    if kind == Source.PANEL_AGAINST_KEY:
        return _panel_words(detail)
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


def _panel_words(detail: dict) -> str:
    p = float(detail.get("p_wrong") or 0)
    head = f"panel of models: key wrong with probability {p:.2f}"
    if "threshold" in detail and p <= float(detail["threshold"]):
        head += f", not above its line of {float(detail['threshold']):.2f}"
        lr = detail.get("log10_lr_best")
        if lr is not None and lr > 0 and detail.get("models"):
            head += (
                f"; the models' answers alone favour {detail.get('suggested_answer')} "
                f"{10**lr:.1f} to 1 over the key's"
            )
    if detail.get("suggested_answer") is not None and detail.get("models"):
        n_key = detail.get("n_key", 0)
        return (
            f"{head} ({len(detail.get('models', []))} of {detail.get('n_read', '?')} answers "
            f"read say {detail.get('suggested_answer')}, {n_key} the key's "
            f"{detail.get('key_answer')})"
        )
    if detail.get("basis") == "grades" and "mean_grade" in detail:
        return (
            f"{head} (grades of {detail.get('n_graded', '?')} models, mean "
            f"{detail['mean_grade']:.2f} of the scale)"
        )
    if "key_answer" in detail:
        grades = (
            f"; grades of {detail.get('n_graded')} models, mean {detail['mean_grade']:.2f} of "
            "the scale"
            if "mean_grade" in detail
            else ""
        )
        return (
            f"{head} ({detail.get('n_key', 0)} of {detail.get('n_read', '?')} answers read "
            f"give the key's {detail.get('key_answer')}{grades})"
        )
    return head


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
    """Return the priority of an item holding ``evidence`` [(kind, detail)], oldest first.

    points = round(SCALE x total weight in bans) (module WEIGHTS, :func:`evidence_weight`):
    the weights of the distinct kinds add, as independent evidence does in log-odds; the
    strongest piece of each kind counts once (a re-run that adds the same kind does not
    raise the item), except the panel, whose latest figure counts (a re-fit replaces the
    old one). Kinds read off the same responses (RESPONSE_KINDS) are one group: the
    panel's figure where there is one, else the strongest of them. Reasons list every
    kind, the heaviest first. A reader's report marked as spam (detail `spam`) counts for
    nothing. Empty evidence gives Priority(0, "manual", "no evidence").
    """
    best: dict[str, tuple[float, str, str]] = {}
    for kind, detail in evidence:
        detail = detail or {}
        if kind == Source.REPORTED and detail.get("spam"):
            continue  # a reader's report a reviewer marked as spam is no evidence (issue 22)
        weight = evidence_weight(kind, detail)
        if kind == Source.PANEL_AGAINST_KEY or kind not in best or weight > best[kind][0]:
            best[kind] = (weight, kind, evidence_words(kind, detail))
    if not best:
        return Priority(0, Source.MANUAL, "no evidence")
    shown = sorted(best.values(), key=lambda v: (-v[0], v[1]))
    response_group = [v for g, v in best.items() if g in RESPONSE_KINDS]
    if Source.PANEL_AGAINST_KEY in best:
        response_weight = best[Source.PANEL_AGAINST_KEY][0]
    else:
        response_weight = max((v[0] for v in response_group), default=0.0)
    total = response_weight + sum(v[0] for g, v in best.items() if g not in RESPONSE_KINDS)
    words = "; ".join(w for _, _, w in shown)
    n = len(shown)
    reasons = words if n == 1 else f"{n} signals: {words}"
    return Priority(round(SCALE * total), shown[0][1], reasons)
