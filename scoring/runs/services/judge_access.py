"""Activating and deactivating judges: the one writer of `Judge.active` (issue 26).

A judge that calls an API (openai, anthropic) and came from a bundle arrives inactive: its
base_url and api_key_env are a bundle's choice, so an admin reads them (the admin's
"Activate" page, or `manage.py activate_judge`, shows both) and activates it. Activation
checks both against the settings' EndpointPolicy (scoring.runs.services.backends.endpoint_problems)
and is audit-logged (judge.activate) with the address and the key variable's name, never a
key.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.actions import Action
from core.services import audit_log
from questions.errors import DomainError
from scoring.models import Judge
from scoring.runs.services.backends import endpoint_problems


def judge_endpoint(judge: Judge) -> dict[str, Any]:
    """Return what an admin reads before activating `judge`: {"judge", "backend", "model",
    "base_url" ("" = the vendor's own address), "api_key_env" (the variable it would read),
    "active", "problems": ["field: reason", ...]} (problems empty when the settings allow it)."""
    from judges.base import DEFAULT_API_KEY_ENV

    problems = endpoint_problems(
        backend=judge.backend, base_url=judge.base_url, api_key_env=judge.api_key_env
    )
    return {
        "judge": judge.judge_id,
        "backend": judge.backend,
        "model": judge.model,
        "base_url": judge.base_url,
        "api_key_env": judge.api_key_env or DEFAULT_API_KEY_ENV.get(judge.backend, ""),
        "active": judge.active,
        "problems": [f"{field}: {reason}" for field, reason in problems],
    }


def judge_set_active(*, judge: Judge, active: bool, actor: Any = None) -> bool:
    """Activate (active=True) or deactivate `judge`; return True when it changed.

    Activation is refused with DomainError (nothing written) when the judge's base_url or
    key variable breaks the settings' EndpointPolicy. Atomic, under a row lock; a change
    logs Action.JUDGE_ACTIVATE / JUDGE_DEACTIVATE with before/after
    {"active", "base_url", "api_key_env"}; no entry when nothing changes.
    """
    with transaction.atomic():
        row = Judge.objects.select_for_update().select_related("benchmark").get(pk=judge.pk)
        if row.active == active:
            judge.active = active
            return False
        shown = judge_endpoint(row)
        if active and shown["problems"]:
            raise DomainError(
                f"judge {row.judge_id} cannot be activated: {'; '.join(shown['problems'])}"
            )
        before = {k: shown[k] for k in ("active", "base_url", "api_key_env")}
        row.active = active
        row.save(update_fields=["active"])
        audit_log(
            actor=actor,
            action=Action.JUDGE_ACTIVATE if active else Action.JUDGE_DEACTIVATE,
            target_type="judge",
            target_id=row.pk,
            target_label=str(row),
            benchmark_name=row.benchmark.name,
            before=before,
            after={**before, "active": active},
        )
    judge.active = active
    return True
