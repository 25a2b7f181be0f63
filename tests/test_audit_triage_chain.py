"""Issue 16 item 4: every key-audit run ends with triage of its edition, automatically.

The chain is built by the composition root (settings.SNAGLIST_AUDIT_FOLLOW_UP_TASK names
`review.triage_after_audit`); scoring never imports review. Each entry point that starts an
audit - the service the Runs page and the API call, and the `audit_key` command - is tried.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from config.celery import app
from core.models import AuditLogEntry
from judges import AuditResult
from questions.models import AuditExclusion
from review.tasks import triage_after_audit
from scoring.models import ScoringRun
from scoring.runs import services
from scoring.runs.services import backends
from tests.worker_fixtures import build_benchmark

pytestmark = pytest.mark.django_db


class WrongOnFirstQuestion:
    """A fake auditor backend: `wrong` for the key entry of Q0001 (answer "100 mm"), else
    `correct`; both auditors share it, so Q0001 has two adverse verdicts (rule 4: excluded)."""

    def __init__(self, wrong_answer: str):
        self.wrong_answer = wrong_answer
        self.calls = 0

    def audit(self, inp):
        self.calls += 1
        verdict = "wrong" if inp.key_answer == self.wrong_answer else "correct"
        return AuditResult(
            verdict=verdict,
            rationale="fake",
            raw_output=verdict,
            stop_reason="stop",
            prompt_version="auditor-v1",
        )


@pytest.fixture
def data(monkeypatch):
    data = build_benchmark(n_questions=4, n_models=2)
    first = data.original.entries.select_related("question").order_by("question__question_id")[0]
    backend = WrongOnFirstQuestion(first.answer)
    monkeypatch.setattr(backends, "judge_backend", lambda judge: backend)
    data.first_entry = first
    data.backend = backend
    return data


def test_the_follow_up_task_named_in_settings_is_registered(settings):
    assert settings.SNAGLIST_AUDIT_FOLLOW_UP_TASK == "review.triage_after_audit"
    app.loader.import_default_modules()
    assert settings.SNAGLIST_AUDIT_FOLLOW_UP_TASK in app.tasks


def test_an_audit_run_started_like_the_runs_page_ends_with_triage(
    data, django_capture_on_commit_callbacks
):
    assert not AuditExclusion.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        run = services.scoring_run_create(
            edition=data.original, judges=data.auditors, kind=ScoringRun.Kind.AUDIT
        )
    run.refresh_from_db()
    assert run.on_complete == "review.triage_after_audit"
    assert (run.status, run.graded) == ("complete", 4 * len(data.auditors))
    # Triage ran after the run: both auditors adverse on Q0001 -> excluded (rule 4).
    assert list(AuditExclusion.objects.values_list("key_entry_id", flat=True)) == [
        data.first_entry.pk
    ]
    triage_log = AuditLogEntry.objects.get(action="triage.run")
    assert triage_log.actor is None and triage_log.after["edition"] == "original"


@pytest.mark.django_db(transaction=True)
def test_audit_key_command_ends_with_triage(data):
    # A real commit (transaction=True): the command's run is enqueued on commit, as in use.
    out = StringIO()
    call_command("audit_key", "--benchmark", "demo-like", "--wait", "--timeout", "60", stdout=out)
    assert AuditExclusion.objects.filter(key_entry=data.first_entry).exists()
    assert AuditLogEntry.objects.filter(action="triage.run").count() == 1


def test_an_explicit_follow_up_replaces_the_default(data, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        run = services.scoring_run_create(
            edition=data.original,
            judges=data.auditors,
            kind=ScoringRun.Kind.AUDIT,
            on_complete="tests.nothing",
        )
    assert run.on_complete == "tests.nothing"


def test_triage_after_audit_ignores_what_it_should_not_triage(data):
    assert triage_after_audit(999_999) is None  # no such run
    grade_run = services.scoring_run_create(
        edition=data.original, judges=data.judges, enqueue=False
    )
    assert triage_after_audit(grade_run.pk) is None  # not an audit run
    pending = services.scoring_run_create(
        edition=data.original, judges=data.auditors, kind=ScoringRun.Kind.AUDIT, enqueue=False
    )
    assert triage_after_audit(pending.pk) is None  # not finished
    assert not AuditLogEntry.objects.filter(action="triage.run").exists()


def test_in_a_fresh_process_audit_key_on_the_demo_is_followed_by_triage(tmp_path):
    """The zero set-up default (SQLite, eager tasks) in a process that never imported
    review.tasks: the follow-up is found by name and triage runs (it was lost before)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_TASK_ALWAYS_EAGER")
    }
    environ.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'fresh.sqlite3'}",
        DJANGO_SETTINGS_MODULE="config.settings",
    )

    def manage(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=root,
            env=environ,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    manage("migrate", "--verbosity", "0")
    manage("import_bundle", "questions/fixtures/demo-bundle")
    manage("audit_key", "--benchmark", "uk-construction-demo", "--wait")
    script = (
        "import django, json; django.setup(); "
        "from core.models import AuditLogEntry; "
        "print(json.dumps(list(AuditLogEntry.objects.filter(action='triage.run')"
        ".values_list('actor_id', flat=True))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=root,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # One triage, by the system (no actor): the audit run's follow-up.
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [None]
