"""Write the history files of a bundle (issue 21 item 7; read by history_read).

`publications.jsonl` (who published each edition of the chain, when),
`judge_settings.jsonl` (judges whose base URL, key variable NAME, tuning settings or
active flag are set; never a secret) and `audit_log.jsonl` (the benchmark's audit log,
oldest first). Users by user name only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.contrib.auth import get_user_model

from core.models import AuditLogEntry
from interchange.bundles.history_read import (
    AUDIT_LOG,
    ENV_NAME,
    JUDGE_SETTINGS,
    PUBLICATIONS,
    SETTING_KEYS,
)
from questions.models import Benchmark, KeyEdition
from scoring.models import Judge


def _usernames(pks: Iterable[int | None]) -> dict[int, str]:
    user_model = get_user_model()
    wanted = {pk for pk in pks if pk is not None}
    return {u.pk: u.get_username() for u in user_model.objects.filter(pk__in=wanted)}


def _public_url(url: str) -> str:
    """`url` without any user name, password, query or fragment (secrets never travel)."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def add_history(
    files: dict[str, bytes],
    benchmark: Benchmark,
    chain: list[KeyEdition],
    jsonl: Callable[[Iterable[dict[str, Any]]], bytes],
) -> None:
    """Add the three history files to `files` (each only when it has rows)."""
    names = _usernames(e.published_by_id for e in chain)
    files[PUBLICATIONS] = jsonl(
        {
            "edition": e.name,
            "published_at": e.published_at.isoformat(),
            "published_by": names.get(e.published_by_id),
        }
        for e in chain
    )
    settings = []
    for j in Judge.objects.filter(benchmark=benchmark).order_by("role", "judge_id"):
        kept = {k: v for k, v in (j.backend_settings or {}).items() if k in SETTING_KEYS}
        if j.base_url or j.api_key_env or kept or not j.active:
            settings.append(
                {
                    "judge_id": j.judge_id,
                    "base_url": _public_url(j.base_url),
                    # A NAME of a variable; anything else (a pasted key) is not written.
                    "api_key_env": j.api_key_env if ENV_NAME.match(j.api_key_env) else "",
                    "backend_settings": kept,
                    "active": j.active,
                }
            )
    if settings:
        files[JUDGE_SETTINGS] = jsonl(settings)
    log = list(
        AuditLogEntry.objects.filter(benchmark_name=benchmark.name).order_by("created_at", "pk")
    )
    if log:
        actors = _usernames(e.actor_id for e in log)
        files[AUDIT_LOG] = jsonl(
            {
                "created_at": e.created_at.isoformat(),
                "actor": actors.get(e.actor_id),
                "actor_label": e.actor_label,
                "action": e.action,
                "target_type": e.target_type,
                "target_id": e.target_id,
                "target_label": e.target_label,
                "before": e.before,
                "after": e.after,
            }
            for e in log
        )
