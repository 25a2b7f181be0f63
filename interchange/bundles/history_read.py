"""Read and validate the history files of a bundle (issue 21 item 7); no database access.

- `publications.jsonl`: who published each key edition and when;
- `judge_settings.jsonl`: the judges' backend settings (never secrets);
- `audit_log.jsonl`: the benchmark's audit log (core.models.AuditLogEntry), oldest first.

Users travel by user name only (`published_by`, `actor`). Every problem is reported as
`FILE:LINE: FIELD: message` like the rest of the reader; a bundle without these files
(any bundle written before them) reads as before.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from core.bundle_parts import Known
from interchange.bundles.data import BundleData
from interchange.bundles.parts import BUNDLE_PARTS
from interchange.bundles.problems import Problems
from interchange.bundles.rows import MAX, ORIGINAL, Row, iter_jsonl, nul_path, type_name
from interchange.bundles.source import BundleSource

PUBLICATIONS = "publications.jsonl"
JUDGE_SETTINGS = "judge_settings.jsonl"
AUDIT_LOG = "audit_log.jsonl"
HISTORY_FILES = (PUBLICATIONS, JUDGE_SETTINGS, AUDIT_LOG)

USERNAME_MAX = 150  # django.contrib.auth's User.username
# The backend_settings keys a bundle carries: the judges package's tuning keys
# (judges.CONFIG_KEYS without backend/model/base_url/api_key_env, which are
# columns). Anything else (an API key, a token, a password) is refused on import and
# never written on export.
SETTING_KEYS = frozenset(
    {
        "temperature",
        "max_tokens",
        "max_tokens_param",
        "timeout",
        "strictness",
        "max_retries",
        "base_delay",
        "max_delay",
        "concurrency",
        "rpm",
        "json_mode",
        "cache_min_tokens",
    }
)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# AuditLogEntry's column lengths (core/models.py).
LOG_MAX = {"actor_label": 150, "action": 50, "target_type": 50, "target_id": 50}
LOG_LABEL_MAX = 300


def read_history(source: BundleSource, p: Problems, b: BundleData) -> None:
    """Read whichever of the history files the bundle has into `b` (after the editions
    and judges are read, which the rows refer to)."""
    if source.exists(PUBLICATIONS):
        _publications(source, p, b)
    if source.exists(JUDGE_SETTINGS):
        _judge_settings(source, p, b)
    if source.exists(AUDIT_LOG):
        _audit_log(source, p, b)
    _parts(source, p, b)


def _parts(source: BundleSource, p: Problems, b: BundleData) -> None:
    """Read the files of the registered bundle parts (interchange.bundles.parts: review's history)."""
    known = Known(frozenset(b.questions), (ORIGINAL, *b.editions))
    for part in BUNDLE_PARTS:
        present = [name for name in part.files if source.exists(name)]
        if not present:
            continue
        rows = {
            name: [(row.line, row.data) for row in iter_jsonl(source, name, p)] for name in present
        }
        b.parts.append((part, part.read(rows, known, p.add)))
        for name in present:
            b.part_counts[name.removesuffix(".jsonl")] = len(rows[name])


def _username(row: Row, name: str) -> str | None:
    """Return a user name (or "" for none: null or missing); None after a problem."""
    return row.text(name, required=False, null=True, max_length=USERNAME_MAX)


def _datetime(row: Row, name: str) -> datetime | None:
    """Return an ISO 8601 date-time WITH a UTC offset; None after reporting a problem."""
    value = row.text(name, empty=False)
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        row.error(name, f"{value[:40]!r} is not an ISO 8601 date-time")
        return None
    if parsed.tzinfo is None:
        row.error(name, f"{value!r} has no UTC offset (write e.g. 2026-01-31T09:30:00+00:00)")
        return None
    return parsed


def _publications(source: BundleSource, p: Problems, b: BundleData) -> None:
    known = [ORIGINAL, *b.editions]
    for row in iter_jsonl(source, PUBLICATIONS, p):
        edition = row.text("edition", empty=False, max_length=MAX["edition"])
        at = _datetime(row, "published_at")
        by = _username(row, "published_by")
        if edition is not None and edition not in known:
            row.error(
                "edition", f"unknown key edition {edition!r} (this bundle has: {', '.join(known)})"
            )
        if not row.ok:
            continue
        if edition in b.publications:
            first = b.publications[edition]["line"]
            row.error("edition", f"duplicate {edition!r} (first on line {first})")
            continue
        b.publications[edition] = {"published_at": at, "published_by": by, "line": row.line}


def _base_url(row: Row, policy: Any) -> str | None:
    """Return the row's base_url, or None with an error on the row when the settings'
    EndpointPolicy refuses it (judges.endpoint: https, or http to an allowed host;
    no user name, password, query or fragment; an IP literal must be public or allowed)."""
    from judges import EndpointRefused

    url = row.text("base_url", required=False, null=True, max_length=500)
    if not url:
        return url
    try:
        policy.check_url(url)
    except EndpointRefused as exc:
        row.error("base_url", exc.reason)
        return None
    return url


def _key_env(row: Row, policy: Any) -> str | None:
    """Return the row's api_key_env, or None with an error on the row when it is not a
    variable name or not one the settings allow for judges' keys (never a server secret)."""
    from judges import EndpointRefused

    env = row.text("api_key_env", required=False, null=True, max_length=100)
    if not env:
        return env
    if not ENV_NAME.match(env):
        row.error("api_key_env", f"{env[:40]!r} is not an environment variable name")
        return None
    try:
        policy.check_key_env(env)
    except EndpointRefused as exc:
        row.error("api_key_env", exc.reason)
        return None
    return env


def _settings(row: Row) -> dict[str, Any] | None:
    value = row.data.get("backend_settings", {})
    if value is None:
        return {}
    if not isinstance(value, dict):
        row.error("backend_settings", f"must be an object, not {type_name(value)}")
        return None
    unknown = sorted(k for k in value if k not in SETTING_KEYS)
    if unknown:
        row.error(
            "backend_settings",
            f"{unknown[0]!r} is not a setting a bundle carries (secrets never travel; "
            f"allowed: {', '.join(sorted(SETTING_KEYS))})",
        )
        return None
    where = nul_path(value, "backend_settings")
    if where is not None:
        row.error(where, "contains a NUL character (U+0000)")
        return None
    return value


def _judge_settings(source: BundleSource, p: Problems, b: BundleData) -> None:
    from scoring.runs.services.backends import endpoint_policy

    policy = endpoint_policy()
    for row in iter_jsonl(source, JUDGE_SETTINGS, p):
        jid = row.ident("judge_id", MAX["judge_id"])
        base_url = _base_url(row, policy)
        env = _key_env(row, policy)
        settings = _settings(row)
        active = row.boolean("active", default=True)
        if jid is not None and jid not in b.judges:
            row.error("judge_id", f"unknown judge {jid!r} (not in judges.csv)")
        if not row.ok:
            continue
        if jid in b.judge_settings:
            row.error(
                "judge_id", f"duplicate {jid!r} (first on line {b.judge_settings[jid]['line']})"
            )
            continue
        b.judge_settings[jid] = {
            "base_url": base_url or "",
            "api_key_env": env or "",
            "backend_settings": settings,
            "active": active,
            "line": row.line,
        }


def _json_value(row: Row, name: str) -> Any:
    value = row.data.get(name)
    where = nul_path(value, name)
    if where is not None:
        row.error(where, "contains a NUL character (U+0000)")
    return value


def _audit_log(source: BundleSource, p: Problems, b: BundleData) -> None:
    for row in iter_jsonl(source, AUDIT_LOG, p):
        values: dict[str, Any] = {
            "created_at": _datetime(row, "created_at"),
            "actor": _username(row, "actor"),
            "actor_label": row.text("actor_label", empty=False, max_length=LOG_MAX["actor_label"]),
            "action": row.text("action", empty=False, max_length=LOG_MAX["action"]),
            "target_type": row.text("target_type", max_length=LOG_MAX["target_type"]),
            "target_id": row.text("target_id", max_length=LOG_MAX["target_id"]),
            "target_label": row.text("target_label", required=False, max_length=LOG_LABEL_MAX),
            "before": _json_value(row, "before"),
            "after": _json_value(row, "after"),
            "line": row.line,
        }
        if row.ok:
            b.audit_log.append(values)
