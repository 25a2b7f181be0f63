"""Load and render the versioned judge and auditor prompt templates.

Templates live in `scoring/prompts/<version>.txt` and use `string.Template`
placeholders (`$question`), so the JSON braces in them need no escaping.
A template is never edited in place: a changed prompt is a new file and a new
version, because grades are stored per prompt version (docs/architecture.md).
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from string import Template

from .types import AuditInput, GradingInput, validate_scale

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"

JUDGE_PROMPT_VERSION = "judge-v1"
AUDITOR_PROMPT_VERSION = "auditor-v1"

# sha256 of each released template; tests fail if a released file is edited
# without a new version, which would silently mix grades from two prompts.
RELEASED_SHA256: dict[str, str] = {
    JUDGE_PROMPT_VERSION: "b7d0de0163a43e961eda19970785686276fb80fa683fd871d45c57cde2ada2e8",
    AUDITOR_PROMPT_VERSION: "f0d353b5bf74956a52f6fb84fb127e770a641e57c3a44a643d3a121e8572b878",
}


@cache
def load_template(version: str) -> Template:
    """Return the template `scoring/prompts/<version>.txt`; raise FileNotFoundError if absent."""
    return Template((PROMPTS_DIR / f"{version}.txt").read_text(encoding="utf-8"))


def template_sha256(version: str) -> str:
    """Return the hex sha256 of a template file's bytes."""
    return hashlib.sha256((PROMPTS_DIR / f"{version}.txt").read_bytes()).hexdigest()


def describe_scale(scale: list[int]) -> str:
    """Return the scale's meaning as prompt lines: lowest wrong, highest right (methodology)."""
    ordered = validate_scale(scale)
    if ordered == [0, 1, 2]:
        return "  0 = wrong, 1 = partly right, 2 = right."
    low, high = ordered[0], ordered[-1]
    if len(ordered) == 1:
        return f"  {low} is the only grade."
    lines = f"  {low} = wrong, {high} = right"
    if len(ordered) > 2:
        lines += "; grades in between for partly right answers, higher meaning more right"
    return lines + "."


def render_judge_prompt(inp: GradingInput, version: str = JUDGE_PROMPT_VERSION) -> str:
    """Return the judge prompt for one response.

    Holds the question, the key answer, its citation and the response only: a
    GradingInput has no model name, so the prompt cannot reveal it (rule 1).
    """
    ordered = validate_scale(inp.scale)
    return load_template(version).substitute(
        question=inp.question.strip(),
        key_answer=inp.key_answer.strip(),
        citation=(inp.citation_text or "").strip() or "(none given)",
        response=(inp.response or "").strip() or "(empty response)",
        scale_list=", ".join(str(g) for g in ordered),
        scale_meaning=describe_scale(ordered),
    )


def render_auditor_prompt(inp: AuditInput, version: str = AUDITOR_PROMPT_VERSION) -> str:
    """Return the auditor prompt for one key entry (question, key answer, citation; no response)."""
    return load_template(version).substitute(
        question=inp.question.strip(),
        key_answer=inp.key_answer.strip(),
        citation=(inp.citation_text or "").strip() or "(none given)",
    )
