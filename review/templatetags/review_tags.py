"""Small template helpers for the review pages."""

from __future__ import annotations

import difflib
import json
import re

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

from core import actions

register = template.Library()


@register.filter
def get(mapping, key):
    """Return mapping[key] (None when missing)."""
    try:
        return mapping.get(key)
    except AttributeError:
        return None


# The decision panel's outcome shortcuts (issue 18): a = agree (confirm), e = edit
# (correction), r = removal; the same letters as the old separate outcome form.
OUTCOME_KEYS = {"confirm": "a", "correct": "e", "remove": "r"}


@register.filter
def outcome_key(action: str) -> str:
    """The keyboard shortcut letter of an outcome ("confirm" -> "a"); "" if it has none."""
    return OUTCOME_KEYS.get(action, "")


@register.filter
def citation_problem(detail) -> str:
    """Return a failed citation check's evidence in words (review.citation_checks.describe)."""
    from review.citation_checks import describe

    return describe(detail if isinstance(detail, dict) else {})


@register.filter
def pretty_json(value) -> str:
    if value in (None, "", {}):
        return ""
    return json.dumps(value, indent=1, ensure_ascii=False, sort_keys=True)


@register.simple_tag
def grade_class(value) -> str:
    return "grade-null" if value is None else f"grade-{value}"


@register.filter
def status_badge(status: str) -> str:
    return {
        "open": "",
        "claimed": "warn",
        "proposed": "warn",
        "confirmed": "ok",
        "corrected": "ok",
        "removed": "bad",
        "pending": "warn",
        "approved": "ok",
        "recorded": "ok",
        "rejected": "bad",
        "draft": "warn",
        "published": "ok",
        "current": "ok",
        "superseded": "bad",
        "withdrawn": "bad",
    }.get(status, "")


@register.filter
def source_label(value: str) -> str:
    from review.models import Source

    try:
        return Source(value).label
    except ValueError:
        return value


def _brief(value, limit: int = 60) -> str:
    if value is None:
        return "—"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@register.filter
def log_changes(entry) -> list[tuple[str, str, str]]:
    """Return [(field, before, after)] for the top-level fields an audit-log entry changed.

    A field present on one side only counts as changed (created: before "—"). Values are
    shortened to 60 characters; the page shows the whole record on request.
    """
    before = entry.before if isinstance(entry.before, dict) else {}
    after = entry.after if isinstance(entry.after, dict) else {}
    keys = list(after) + [k for k in before if k not in after]
    return [
        (k, _brief(before.get(k)), _brief(after.get(k)))
        for k in keys
        if before.get(k) != after.get(k)
    ]


STATUS_LABELS = {
    "open": "open",
    "claimed": "claimed",
    "proposed": "awaiting approval",
    "confirmed": "key confirmed",
    "corrected": "corrected",
    "removed": "removed from scoring",
    "pending": "pending",
    "approved": "approved",
    "recorded": "recorded without approval",
    "rejected": "rejected",
    "withdrawn": "withdrawn",
}


@register.filter
def action_label(action: str) -> str:
    """Return the plain-English phrase for an audit-log action (the raw name if unknown).

    The phrases are core.actions.Action's labels."""
    return actions.action_label(action)


@register.filter
def status_label(status: str) -> str:
    """Return the plain-English name of an item or proposal status."""
    return STATUS_LABELS.get(status, status)


# a number with its decimal point or thousands commas (1.10, 1,500) is one word
_WORDS = re.compile(r"\d+(?:[.,]\d+)*|\w+|\s+|[^\s\w]")


# below this share of words kept, a diff is shown as the old and new text whole
WHOLE_BELOW = 0.5


def _is_word(token: str) -> bool:
    return not token.isspace() and bool(re.match(r"\w", token))


@register.simple_tag
def word_diff(old, new) -> str:
    """Return HTML marking word-level changes from `old` to `new` (issue 18 item 4).

    Both are split into words, punctuation marks and runs of white space; difflib's
    SequenceMatcher aligns them, and each changed run is shown as <del class="diff-old">
    (removed), a space, then <ins class="diff-new"> (added), the unchanged words plain, so
    "900 mm" -> "1100 mm" marks only the number and reads "900 1100 mm", never "9001100"
    (a number keeps its decimal point and thousands commas: "3.60" -> "3.61" is one
    change). When fewer than WHOLE_BELOW of the words are kept (2 x kept / (old words +
    new words), punctuation not counted), a rewrite, the old text and the new are shown
    whole, one above the other (<del class="diff-old diff-whole"> then <ins class="diff-new
    diff-whole">; issue 30 item 7). Every piece of text is HTML-escaped. None counts as "".
    """
    a = _WORDS.findall(old or "")
    b = _WORDS.findall(new or "")
    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    kept = sum(1 for op, i1, i2, _, _ in opcodes if op == "equal" for t in a[i1:i2] if _is_word(t))
    words = sum(1 for t in a if _is_word(t)) + sum(1 for t in b if _is_word(t))
    if a and b and 2 * kept < WHOLE_BELOW * words:
        return format_html(
            '<del class="diff-old diff-whole">{}</del> <ins class="diff-new diff-whole">{}</ins>',
            old,
            new,
        )
    parts: list[str] = []
    for op, i1, i2, j1, j2 in opcodes:
        if op == "equal":
            parts.append(escape("".join(a[i1:i2])))
            continue
        if i2 > i1:
            parts.append(f'<del class="diff-old">{escape("".join(a[i1:i2]))}</del>')
        if i2 > i1 and j2 > j1:
            parts.append(" ")
        if j2 > j1:
            parts.append(f'<ins class="diff-new">{escape("".join(b[j1:j2]))}</ins>')
    return mark_safe("".join(parts))  # noqa: S308 - every piece above is escaped


@register.filter
def duration_words(value) -> str:
    """A timedelta in words a reviewer reads at a glance: "40 s", "12 min", "3 h 5 min",
    "2 days 4 h" (rounded down to the unit shown; "" for None)."""
    if value is None:
        return ""
    seconds = int(value.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 3600:
        return f"{minutes} min"
    if seconds < 86400:
        rest = minutes - hours * 60
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    rest = hours - days * 24
    unit = "day" if days == 1 else "days"
    return f"{days} {unit} {rest} h" if rest else f"{days} {unit}"
