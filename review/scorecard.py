"""The detector scorecard: how often each detector and each auditor was right (issue 17 item 9).

Read-only. For every kind of evidence triage files (each rule and detector) and for every
auditor whose adverse verdict put a question in the queue: items raised, and of those
closed by a person how many ended corrected or removed (the key was wrong or unfair)
versus confirmed (the key was right). Precision = (corrected + removed) / closed, the
detector's precision against human decisions; null when nothing it raised is closed yet.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from questions.models import Benchmark
from review.detectors.panel import panel_fired
from review.models import Evidence, ReviewItem, Source
from scoring.models import ADVERSE_VERDICTS

_OUTCOMES = {
    ReviewItem.Status.CORRECTED: "corrected",
    ReviewItem.Status.REMOVED: "removed",
    ReviewItem.Status.CONFIRMED: "confirmed",
}


def _row(name: str, label: str, statuses: dict[int, str]) -> dict[str, Any]:
    counts = {"corrected": 0, "removed": 0, "confirmed": 0}
    for status in statuses.values():
        if status in _OUTCOMES:
            counts[_OUTCOMES[status]] += 1
    closed = sum(counts.values())
    wrong = counts["corrected"] + counts["removed"]
    return {
        "name": name,
        "label": label,
        "raised": len(statuses),
        "open": len(statuses) - closed,
        "closed": closed,
        **counts,
        "precision": round(wrong / closed, 4) if closed else None,
    }


def detector_scorecard(benchmark: Benchmark) -> dict[str, Any]:
    """Return {"detectors": [row], "auditors": [row]} for the benchmark's review items (2 queries).

    A row: {"name", "label", "raised", "open", "closed", "corrected", "removed",
    "confirmed", "precision"} — counts are items (an item raised by two detectors counts
    for each), precision a fraction 0-1 or None. Detectors are every evidence kind of
    review.models.Source except `manual`, in that order, plus any other kind found;
    auditors are the judge ids named adverse (rule 4's ADVERSE_VERDICTS; an unparsed verdict is
    not) in `single_auditor_flag` evidence, sorted.
    """
    by_kind: dict[str, dict[int, str]] = defaultdict(dict)
    by_auditor: dict[str, dict[int, str]] = defaultdict(dict)
    for item_id, kind, detail, status in (
        Evidence.objects.filter(item__benchmark=benchmark)
        .order_by()
        .values_list("item_id", "kind", "detail", "item__status")
    ):
        if panel_fired(kind, detail):  # the panel's figure where it did not fire raised nothing
            by_kind[kind][item_id] = status
    for item_id, detail, status in (
        Evidence.objects.filter(item__benchmark=benchmark, kind=Source.SINGLE_AUDITOR_FLAG)
        .order_by()
        .values_list("item_id", "detail", "item__status")
    ):
        for verdict in (detail or {}).get("verdicts", []):
            if verdict.get("verdict") in ADVERSE_VERDICTS and verdict.get("auditor"):
                by_auditor[str(verdict["auditor"])][item_id] = status
    labels = dict(Source.choices)
    kinds = [s.value for s in Source if s != Source.MANUAL]
    kinds += sorted(k for k in by_kind if k not in kinds and k != Source.MANUAL)
    return {
        "detectors": [
            _row(k, labels.get(k, k.replace("_", " ")), by_kind.get(k, {})) for k in kinds
        ],
        "auditors": [_row(a, a, by_auditor[a]) for a in sorted(by_auditor)],
    }


def _cell(value: Any) -> str:
    return "—" if value is None else (f"{value:.0%}" if isinstance(value, float) else str(value))


def scorecard_markdown(card: dict[str, Any]) -> str:
    """Return the scorecard as a Markdown section (a heading and one table per group)."""
    lines = [
        "",
        "## Detector scorecard",
        "",
        "Items each detector and auditor put in the review queue, and how people closed them.",
        "Precision = (corrected + removed) / closed.",
        "",
    ]
    for title, rows in (("Detector", card["detectors"]), ("Auditor", card["auditors"])):
        if not rows:
            continue
        lines += [
            f"| {title} | raised | open | closed | corrected | removed | confirmed | precision |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            cells = [
                r[k] for k in ("raised", "open", "closed", "corrected", "removed", "confirmed")
            ]
            lines.append(
                f"| {r['label']} | "
                + " | ".join(_cell(c) for c in cells)
                + f" | {_cell(r['precision'])} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"
