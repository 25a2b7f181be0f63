"""cli.md: `--format json` prints exactly one JSON document on stdout, option errors too.

An option argparse refuses (exit 2) is reported before handle() runs; with --format json
the command still prints {"ok": false, "error", "exit_code": 2} (questions.cli.JsonCommand).
Run as a real process: argparse only exits this way from the command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT


@pytest.mark.sqlite
@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["leaderboard", "--band-gap", "abc", "--format", "json"], "argument --band-gap"),
        (["leaderboard", "--bogus", "--format=json"], "unrecognized arguments: --bogus"),
        (["locate", "ADB-V1", "--format", "json"], "required: LOCATOR"),
    ],
)
def test_option_errors_print_one_json_document_and_exit_2(tmp_path, args, error):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'unused.sqlite3'}"
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    doc = json.loads(done.stdout)
    assert doc["ok"] is False and doc["exit_code"] == 2 and error in doc["error"]
    assert "usage:" in done.stderr


@pytest.mark.sqlite
def test_without_json_an_option_error_prints_nothing_on_stdout(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'unused.sqlite3'}"
    done = subprocess.run(
        [sys.executable, "manage.py", "leaderboard", "--bogus"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stdout == "" and "--bogus" in done.stderr
