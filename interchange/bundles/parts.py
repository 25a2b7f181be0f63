"""The bundle parts of the apps below interchange: files an app owns, which the bundle
exporter, reader and importer call in this order.

Two parts: review's history (`review_items.jsonl`: review.bundle_history) and the blind
human grades (`human_grades.jsonl`: scoring.human_bundle). Interchange sits above both (as
`dumpdata` sits above every app) and imports them directly; the parts' contract is
core.bundle_parts (types only: the two parts are in apps on different layers).
"""

from __future__ import annotations

from core.bundle_parts import BundlePart
from review.bundle_history import PART as REVIEW_HISTORY
from scoring.human_bundle import HumanGradesPart

BUNDLE_PARTS: tuple[BundlePart, ...] = (REVIEW_HISTORY, HumanGradesPart())
