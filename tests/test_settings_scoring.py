"""The re-scoring knobs (SNAGLIST_RESCORE_CHUNK, ...) are settings read once at start-up:
a bad value stops the process with a message naming the variable; unset, the defaults hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KNOBS = (
    "SNAGLIST_RESCORE_CHUNK",
    "SNAGLIST_PAIR_LEASE_SECONDS",
    "SNAGLIST_JUDGE_THREADS",
    "SNAGLIST_RESCORE_MAX_RETRIES",
    "SNAGLIST_RESCORE_RETRY_BASE_SECONDS",
)
PRINT_KNOBS = (
    "import django, json; django.setup(); from django.conf import settings; "
    f"print(json.dumps({{k: getattr(settings, k) for k in {KNOBS!r}}}))"
)


def _start(**env: str) -> subprocess.CompletedProcess:
    """Set Django up in a fresh interpreter with the knobs unset except `env`."""
    environ = {k: v for k, v in os.environ.items() if k not in KNOBS}
    environ.update(env, DJANGO_SETTINGS_MODULE="config.settings")
    return subprocess.run(
        [sys.executable, "-c", PRINT_KNOBS],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_unset_knobs_take_their_defaults():
    started = _start()
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout.strip().splitlines()[-1]) == {
        "SNAGLIST_RESCORE_CHUNK": 500,
        "SNAGLIST_PAIR_LEASE_SECONDS": 60.0,  # was 900 before issue 19 (heartbeat renewal)
        "SNAGLIST_JUDGE_THREADS": 64,
        "SNAGLIST_RESCORE_MAX_RETRIES": 8,
        "SNAGLIST_RESCORE_RETRY_BASE_SECONDS": 30.0,
    }


def test_good_values_are_read_with_their_types_and_zero_where_it_means_something():
    started = _start(
        SNAGLIST_RESCORE_CHUNK="3",
        SNAGLIST_PAIR_LEASE_SECONDS="2",
        SNAGLIST_JUDGE_THREADS="0",
        SNAGLIST_RESCORE_MAX_RETRIES="0",
        SNAGLIST_RESCORE_RETRY_BASE_SECONDS="0.3",
    )
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout.strip().splitlines()[-1]) == {
        "SNAGLIST_RESCORE_CHUNK": 3,
        "SNAGLIST_PAIR_LEASE_SECONDS": 2.0,
        "SNAGLIST_JUDGE_THREADS": 0,
        "SNAGLIST_RESCORE_MAX_RETRIES": 0,
        "SNAGLIST_RESCORE_RETRY_BASE_SECONDS": 0.3,
    }


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("SNAGLIST_RESCORE_CHUNK", "many", "SNAGLIST_RESCORE_CHUNK must be an integer, not 'many'"),
        ("SNAGLIST_RESCORE_CHUNK", "2.5", "SNAGLIST_RESCORE_CHUNK must be an integer, not '2.5'"),
        ("SNAGLIST_RESCORE_CHUNK", "0", "SNAGLIST_RESCORE_CHUNK must be positive, not 0"),
        ("SNAGLIST_PAIR_LEASE_SECONDS", "1e", "SNAGLIST_PAIR_LEASE_SECONDS must be a number"),
        ("SNAGLIST_PAIR_LEASE_SECONDS", "nan", "SNAGLIST_PAIR_LEASE_SECONDS must be a number"),
        ("SNAGLIST_PAIR_LEASE_SECONDS", "-5", "SNAGLIST_PAIR_LEASE_SECONDS must be positive"),
        ("SNAGLIST_JUDGE_THREADS", "-1", "SNAGLIST_JUDGE_THREADS must be zero or more, not -1"),
        ("SNAGLIST_RESCORE_MAX_RETRIES", "x", "SNAGLIST_RESCORE_MAX_RETRIES must be an integer"),
        (
            "SNAGLIST_RESCORE_RETRY_BASE_SECONDS",
            "0",
            "SNAGLIST_RESCORE_RETRY_BASE_SECONDS must be positive, not 0.0",
        ),
    ],
)
def test_a_bad_value_stops_start_up_naming_the_variable(name, value, message):
    started = _start(**{name: value})
    assert started.returncode != 0
    assert "ImproperlyConfigured" in started.stderr
    assert message in started.stderr


def test_code_reads_the_knobs_from_settings_at_call_time(settings):
    """A `settings` override (as in tests, or a settings module) reaches the code."""
    from scoring.services import tunables

    settings.SNAGLIST_RESCORE_CHUNK = 7
    settings.SNAGLIST_PAIR_LEASE_SECONDS = 1.5
    settings.SNAGLIST_JUDGE_THREADS = 2
    settings.SNAGLIST_RESCORE_MAX_RETRIES = 3
    settings.SNAGLIST_RESCORE_RETRY_BASE_SECONDS = 0.25
    assert (
        tunables.chunk_size(),
        tunables.pair_lease_seconds(),
        tunables.chunk_threads_cap(),
        tunables.max_chunk_retries(),
        tunables.retry_base_seconds(),
    ) == (7, 1.5, 2, 3, 0.25)
