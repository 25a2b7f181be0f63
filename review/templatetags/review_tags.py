"""Small template helpers for the review pages."""

from __future__ import annotations

import json

from django import template

register = template.Library()


@register.filter
def get(mapping, key):
    """Return mapping[key] (None when missing)."""
    try:
        return mapping.get(key)
    except AttributeError:
        return None


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
