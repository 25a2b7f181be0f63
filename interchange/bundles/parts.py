"""The bundle parts of the apps below interchange: files an app owns, which the bundle
exporter, reader and importer call in this order.

One part today, review's history (`review_items.jsonl`: review.bundle_history). Interchange
sits above review (as `dumpdata` sits above every app) and imports it directly; a part's
contract is written on review.bundle_history.ReviewHistoryPart.
"""

from __future__ import annotations

from review.bundle_history import PART as REVIEW_HISTORY

BUNDLE_PARTS = (REVIEW_HISTORY,)
