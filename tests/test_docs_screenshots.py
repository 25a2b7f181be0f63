"""The docs show only pictures the browser suite makes from the running app (issue 30 item 1).

docs/reviewer.md's picture of the panel read "Amended or repealed since? 1 Yes 2 No" long
after the page changed to "1 No 2 Yes 3 Unknown": it had been copied by hand. Every
picture docs/*.md and README.md show must be one tests/test_e2e_main_job.py writes
(DOC_SHOTS), and every one it writes must be shown.
"""

from __future__ import annotations

import re

from tests.conftest import PROJECT_ROOT
from tests.test_e2e_main_job import DOC_SHOTS, DOCS_SHOTS_DIR

PICTURE = re.compile(r"!\[[^\]]*\]\((?:docs/)?screenshots/([^)\s]+)\)")


def _shown() -> set[str]:
    texts = [p.read_text(encoding="utf-8") for p in (PROJECT_ROOT / "docs").glob("*.md")]
    texts.append((PROJECT_ROOT / "README.md").read_text(encoding="utf-8"))
    return {name for text in texts for name in PICTURE.findall(text)}


def test_every_picture_the_docs_show_is_made_by_the_browser_suite():
    shown = _shown()
    assert "review-page.png" in shown and "approvals.png" in shown  # the pattern reads them
    assert shown == set(DOC_SHOTS.values())
    # nothing else sits in the folder (a hand-made picture would be shown by nobody)
    assert {p.name for p in DOCS_SHOTS_DIR.glob("*.png")} <= set(DOC_SHOTS.values())
