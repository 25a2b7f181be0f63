"""Rewrite one "## ..." section of bench/README.md, leaving every other section as it is.

Every bench script writes its figures through write_section (the scripts run as
`python bench/<script>.py`, so this folder is on sys.path).
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent / "README.md"


def write_section(heading: str, text: str, path: Path = README) -> None:
    """Replace the section starting with the line `heading` by `text`, or append it.

    A section runs from its heading line (e.g. "## Bundle import") to the next line that
    starts with "## ", or to the end of the file. `text` should start with `heading`.
    Sections are kept one blank line apart and the file ends with one newline.
    """
    current = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    body = text.rstrip("\n") + "\n\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(current):
        updated = pattern.sub(lambda _: body, current, count=1)
    else:
        updated = current.rstrip("\n") + "\n\n" + body
    path.write_text(updated.rstrip("\n") + "\n", encoding="utf-8")
