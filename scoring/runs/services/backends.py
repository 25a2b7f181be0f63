"""Judge backends for Judge rows: their configuration, a per-process cache, their inputs.

Above the work vocabulary; imports nothing else of scoring.runs.services.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings

from questions.models import KeyEntry
from scoring.models import Judge
from scoring.runs.services.work import WorkItem

_REDIS_CLIENT: Any = None
# A Judge.prompt_version beginning so names a template of judges/prompt_templates/ to send.
PROMPT_TEMPLATE_PREFIXES = ("judge-", "auditor-")


def redis_client() -> Any | None:
    """Return the process's Redis client for REDIS_URL (made once), or None without Redis:
    the judges' limiters keep their slots there."""
    global _REDIS_CLIENT
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return None
    if _REDIS_CLIENT is None:
        import redis

        _REDIS_CLIENT = redis.Redis.from_url(url)
    return _REDIS_CLIENT


def template_of(prompt_version: str) -> str | None:
    """Return the template a Judge row's (or a ledger row's) prompt_version sends: the
    version itself when it names one ("judge-v2", "auditor-v1": PROMPT_TEMPLATE_PREFIXES),
    else None (any other label, "v1" as bundles give it: the role's default template)."""
    return prompt_version if prompt_version.startswith(PROMPT_TEMPLATE_PREFIXES) else None


def endpoint_policy() -> Any:
    """Return the judges.EndpointPolicy of the settings (issue 26; docs/admin.md,
    "Judges' addresses and keys"): SNAGLIST_JUDGE_KEY_ENV_PREFIX / _ALLOWED / _REFUSED,
    SNAGLIST_JUDGE_HTTP_HOSTS and SNAGLIST_JUDGE_ALLOWED_NETWORKS. Read at each call, so a
    changed setting (or a test's override) applies at once."""
    from judges import EndpointPolicy

    return EndpointPolicy(
        key_env_prefixes=tuple(settings.SNAGLIST_JUDGE_KEY_ENV_PREFIX),
        key_env_allowed=frozenset(settings.SNAGLIST_JUDGE_KEY_ENV_ALLOWED),
        refused_env=frozenset(settings.SNAGLIST_JUDGE_KEY_ENV_REFUSED),
        http_hosts=frozenset(h.lower() for h in settings.SNAGLIST_JUDGE_HTTP_HOSTS),
        allowed_networks=tuple(settings.SNAGLIST_JUDGE_ALLOWED_NETWORKS),
    )


def endpoint_problems(*, backend: str, base_url: str, api_key_env: str) -> list[tuple[str, str]]:
    """Return [(field, reason)] for what the settings' EndpointPolicy refuses in a judge's
    base_url / api_key_env, without a DNS look-up ([] when allowed). A backend that calls
    no API (none, "reference") is not checked. The key variable checked is the one the
    backend would read: api_key_env, or the vendor's default (judges
    DEFAULT_API_KEY_ENV). Used by the bundle import, the admin form and activation."""
    from judges.base import DEFAULT_API_KEY_ENV
    from judges.endpoint import EndpointRefused

    if backend not in Judge.CALLING_BACKENDS:
        return []
    policy = endpoint_policy()
    problems = []
    for check, value in (
        (policy.check_key_env, api_key_env or DEFAULT_API_KEY_ENV.get(backend, "")),
        (policy.check_url, base_url),
    ):
        try:
            check(value)
        except EndpointRefused as exc:
            problems.append((exc.field, exc.reason))
    return problems


def judge_backend_config(judge: Judge) -> dict[str, Any]:
    """Return the judges config for a Judge row (secrets stay in the environment).

    The row's backend, model, base_url and api_key_env (the NAME of the variable) plus the
    backend_settings keys the judges package knows (temperature, max_tokens, strictness,
    concurrency, rpm, ...); unknown keys are dropped here rather than failing every pair.

    The template sent follows the row's prompt_version, the version its grades are stored
    under (one source: a prompt_version in backend_settings is dropped): a row whose
    prompt_version names a template ("judge-v2", "auditor-v1"; see PROMPT_TEMPLATE_PREFIXES)
    gets that template, and an unreleased one is refused (JudgeConfigError from
    JudgeConfig.from_dict); any other label ("v1", as bundles give it) gets the role's
    default template, as before issue 20.
    """
    from judges import CONFIG_KEYS

    config = {k: v for k, v in (judge.backend_settings or {}).items() if k in CONFIG_KEYS}
    config.pop("prompt_version", None)
    if template := template_of(judge.prompt_version):
        config["prompt_version"] = template
    config["backend"] = judge.backend
    if judge.backend == "reference" and "strictness" not in config:
        # A bundle names the reference variant in `model` ("reference-strict"); bundles
        # carry no backend_settings, so the name is the only place the strictness travels.
        config["strictness"] = "strict" if judge.model.endswith("strict") else "lenient"
    if judge.model:
        config["model"] = judge.model
    if judge.base_url:
        config["base_url"] = judge.base_url
    if judge.api_key_env:
        config["api_key_env"] = judge.api_key_env
    return config


_BACKENDS: dict[tuple, Any] = {}
_BACKENDS_LOCK = threading.Lock()
_BACKENDS_MAX = 64


def judge_backend(judge: Judge) -> Any:
    """Return a judge backend for a Judge row, rate-limited across workers (Redis) if configured.

    One backend (with its pooled HTTP client and its limiter) is kept per judge configuration
    per process and shared by threads, so a worker does not open a new connection pool per
    chunk; a changed row (other model, URL, settings, key variable name) gets a new one.
    The API key itself is never part of the cache: backends read it at each call.
    Raises judges.JudgeConfigError for a bad configuration, and for a judge that
    calls an API while inactive (a judge from a bundle stays so until an admin activates it:
    scoring.runs.services.judge_access); EndpointRefused (one) when its base_url or key variable
    breaks the settings' EndpointPolicy, which the backend also checks before every call,
    against base_url's resolved addresses (judges.endpoint).

    The chunk path looks this function up on this module at call time
    (`backends.judge_backend(judge)`), so a test replaces it here
    (`monkeypatch.setattr(scoring.runs.services.backends, "judge_backend", ...)`) to put a
    double in front of every judge: the one seam for fake backends.
    """
    from judges import JudgeConfig, JudgeConfigError, get_backend, limiter_for

    raw = judge_backend_config(judge)
    if judge.backend in Judge.CALLING_BACKENDS and not judge.active:
        raise JudgeConfigError(
            f"judge {judge.judge_id} is inactive: an admin checks its address and key variable "
            f"and activates it (manage.py activate_judge {judge.judge_id}, or the admin's "
            "judge list)"
        )
    policy = endpoint_policy()
    judge_key = f"{judge.benchmark_id}:{judge.judge_id}"
    cache_key = (
        judge_key,
        repr(sorted(raw.items())),
        getattr(settings, "REDIS_URL", ""),
        repr(policy),
    )
    with _BACKENDS_LOCK:
        backend = _BACKENDS.get(cache_key)
    if backend is not None:
        return backend
    config = JudgeConfig.from_dict(raw)
    policy.check(config.base_url, config.api_key_env)
    limiter = limiter_for(config, redis_client(), judge_key)
    backend = get_backend(config, limiter=limiter, endpoint_policy=policy)
    with _BACKENDS_LOCK:
        if len(_BACKENDS) >= _BACKENDS_MAX:
            _BACKENDS.pop(next(iter(_BACKENDS)))  # oldest; its pool closes when collected
        backend = _BACKENDS.setdefault(cache_key, backend)
    return backend


def citation_text(entry: KeyEntry) -> str:
    """Return "<document> (<edition>) <locator>: <quote>" for a key entry ("" if uncited)."""
    if not entry.has_citation:
        return ""
    doc = entry.citation_document
    head = (doc.short_title or doc.title) if doc else entry.citation_doc_id
    if doc and doc.edition:
        head = f"{head} ({doc.edition})"
    head = f"{head} {entry.citation_locator}".strip()
    quote = (entry.citation_quote or "").strip()
    return f"{head}: {quote}" if quote else head


def grading_input(work: WorkItem, scale: list) -> Any:
    """Return the judges.GradingInput for a grade pair's work item: question, key
    answer, citation text and response text, with the benchmark's grade `scale`."""
    return grading_input_for(work.key_entry, work.response, scale)


def grading_input_for(key_entry: KeyEntry, response: Any, scale: list) -> Any:
    """Return the judges.GradingInput a judge is sent for (key entry, response): the
    one place what a judge sees is assembled (the run's calls and scoring.runs.estimate's
    rendered prompts). key_entry needs its question and citation document loaded."""
    from judges import GradingInput

    return GradingInput(
        question=key_entry.question.text,
        key_answer=key_entry.answer,
        citation_text=citation_text(key_entry),
        response=response.text,
        scale=scale,
    )


def audit_input(key_entry: KeyEntry) -> Any:
    """Return the judges.AuditInput an auditor is sent for a key entry: question,
    key answer and citation, never a response (methodology rule 4)."""
    from judges import AuditInput

    return AuditInput(
        question=key_entry.question.text,
        key_answer=key_entry.answer,
        citation_text=citation_text(key_entry),
    )


class BrokenBackend:
    """Stands in for a backend whose configuration was refused: every call fails the pair.

    Its grade() and audit() raise judges.JudgeConfigError with the refusal's text.
    """

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def grade(self, inp: Any) -> Any:
        """Raise JudgeConfigError with the refusal's text."""
        from judges import JudgeConfigError

        raise JudgeConfigError(str(self.exc))

    audit = grade
