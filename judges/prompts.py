"""Load and render the versioned judge and auditor prompt templates.

Templates live in `judges/prompt_templates/<version>.txt` and use `string.Template`
placeholders (`$question`), so the JSON braces in them need no escaping.
A template is never edited in place: a changed prompt is a new file and a new
version, because grades are stored per prompt version (docs/architecture.md).

A judge prompt renders as a JudgePrompt: the full text (a str) that also carries its two
parts, `prefix` (everything up to the response: the same bytes for every response to one
question) and `suffix` (from the response on), so a backend can mark the prefix for the
vendor's prompt cache (issue 20). judge-v1 puts the grading instructions after the
response, so its shared prefix is the question, key and citation only; judge-v2 (same
instructions, reordered) puts everything shared first and the response last.
"""

from __future__ import annotations

import hashlib
from functools import cache, lru_cache
from pathlib import Path
from string import Template

from .types import AuditInput, GradingInput, validate_scale

PROMPTS_DIR = Path(__file__).resolve().parent / "prompt_templates"

# The default templates: what a backend renders when its config names no prompt_version.
# judge-v1 stays the default: a Judge row whose prompt_version is a plain label ("v1", as
# bundles give it) keeps being sent the text its grades were made with; a judge opts in
# to judge-v2 by its row's prompt_version (scoring.runs.services.backends.judge_backend_config).
JUDGE_PROMPT_VERSION = "judge-v1"
AUDITOR_PROMPT_VERSION = "auditor-v1"
# The placeholder that starts a judge prompt's per-response part.
RESPONSE_PLACEHOLDER = "$response"

# sha256 of each released template; tests fail if a released file is edited
# without a new version, which would silently mix grades from two prompts.
RELEASED_SHA256: dict[str, str] = {
    JUDGE_PROMPT_VERSION: "b7d0de0163a43e961eda19970785686276fb80fa683fd871d45c57cde2ada2e8",
    AUDITOR_PROMPT_VERSION: "f0d353b5bf74956a52f6fb84fb127e770a641e57c3a44a643d3a121e8572b878",
    # issue 20: judge-v1's paragraphs, the same words, reordered: instructions first, then
    # question, key and citation, the response last, so the part shared by a question's
    # responses is one cacheable prefix (and a call costs as many tokens as with v1).
    "judge-v2": "58524c69db6d8d70caef3bffda92f03bce107154ea6be5dbea97680390e6c0ed",
}


class JudgePrompt(str):
    """A rendered judge prompt: the full text (this str) and its two parts.

    prefix: the text before the response (instructions, scale, question, key answer,
    citation, as the template orders them): byte-identical for every response to one
    question graded with the same version and scale. suffix: the response and whatever the
    template puts after it. `prefix + suffix == str(self)`. A str method returns a plain
    str (the parts are lost), so code that only needs the text can treat it as one.
    """

    prefix: str
    suffix: str

    def __new__(cls, prefix: str, suffix: str) -> JudgePrompt:
        obj = super().__new__(cls, prefix + suffix)
        obj.prefix, obj.suffix = prefix, suffix
        return obj

    def __reduce__(self) -> tuple:
        return (JudgePrompt, (self.prefix, self.suffix))


def released_versions(role: str) -> list[str]:
    """Return the released template versions of a role ("judge" or "auditor"), sorted."""
    return sorted(v for v in RELEASED_SHA256 if v.startswith(f"{role}-"))


def check_version(version: str, role: str) -> str:
    """Return `version` when it names a released template of `role` ("judge" / "auditor");
    raise ValueError naming the released ones otherwise (an unreleased file is never sent:
    its grades could not be told apart from an edited one's)."""
    if version not in released_versions(role):
        raise ValueError(
            f"{version!r} is not a released {role} prompt (released: "
            f"{', '.join(released_versions(role))})"
        )
    return version


@cache
def load_template(version: str) -> Template:
    """Return the template `judges/prompt_templates/<version>.txt`; raise FileNotFoundError if absent."""
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


@cache
def _judge_halves(version: str) -> tuple[Template, Template]:
    """Return the judge template `version` cut where RESPONSE_PLACEHOLDER first appears:
    (before, from it on). Raises ValueError for a template without the placeholder."""
    text = load_template(version).template
    at = text.find(RESPONSE_PLACEHOLDER)
    if at < 0:
        raise ValueError(f"judge prompt {version} has no {RESPONSE_PLACEHOLDER} placeholder")
    return Template(text[:at]), Template(text[at:])


def render_judge_prompt(inp: GradingInput, version: str = JUDGE_PROMPT_VERSION) -> JudgePrompt:
    """Return the judge prompt for one response as a JudgePrompt (a str with .prefix and
    .suffix: the text before the response, and from the response on).

    Holds the question, the key answer, its citation and the response only: a
    GradingInput has no model name, so the prompt cannot reveal it (rule 1). The text is
    what `string.Template(<version>.txt).substitute` gives (a value is never expanded
    again). Raises FileNotFoundError for a version without a template file.
    """
    ordered = validate_scale(inp.scale)
    values = {
        "question": inp.question.strip(),
        "key_answer": inp.key_answer.strip(),
        "citation": (inp.citation_text or "").strip() or "(none given)",
        "response": (inp.response or "").strip() or "(empty response)",
        "scale_list": ", ".join(str(g) for g in ordered),
        "scale_meaning": describe_scale(ordered),
    }
    before, after = _judge_halves(version)
    prefix = _judge_prefix(
        version, values["question"], values["key_answer"], values["citation"], tuple(ordered)
    )
    return JudgePrompt(prefix, after.substitute(values))


@lru_cache(maxsize=512)
def _judge_prefix(
    version: str, question: str, key_answer: str, citation: str, scale: tuple[int, ...]
) -> str:
    """Return the judge prompt's text before the response (the same for every response to
    one question: a grade run renders it once per question and judge version, not per call).
    The values are render_judge_prompt's; the response is not one of them."""
    before, _ = _judge_halves(version)
    return before.substitute(
        question=question,
        key_answer=key_answer,
        citation=citation,
        response="",  # never in the first half (cut at RESPONSE_PLACEHOLDER)
        scale_list=", ".join(str(g) for g in scale),
        scale_meaning=describe_scale(list(scale)),
    )


def render_auditor_prompt(inp: AuditInput, version: str = AUDITOR_PROMPT_VERSION) -> str:
    """Return the auditor prompt for one key entry (question, key answer, citation; no response)."""
    return load_template(version).substitute(
        question=inp.question.strip(),
        key_answer=inp.key_answer.strip(),
        citation=(inp.citation_text or "").strip() or "(none given)",
    )
