"""`create_demo_users` (run by `make demo`): DEMO_PASSWORD gives every demo user a fixed
password; without it each run sets and prints fresh random ones."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

pytestmark = pytest.mark.sqlite


def _printed(capsys) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in capsys.readouterr().out.strip().splitlines())


def test_demo_password_gives_every_demo_user_that_password(capsys, db, monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "fixed-demo-pass")
    call_command("create_demo_users")
    first = _printed(capsys)
    call_command("create_demo_users")
    second = _printed(capsys)
    assert list(first) == ["reviewer", "editor", "editor2", "admin"]
    assert first == second == {u: "fixed-demo-pass" for u in first}
    for username in first:
        assert User.objects.get(username=username).check_password("fixed-demo-pass")


@pytest.mark.parametrize("unset_as", ["absent", "empty"])
def test_without_demo_password_the_passwords_are_random_and_printed(
    capsys, db, monkeypatch, unset_as
):
    if unset_as == "absent":
        monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    else:
        monkeypatch.setenv("DEMO_PASSWORD", "")
    call_command("create_demo_users")
    first = _printed(capsys)
    call_command("create_demo_users")
    second = _printed(capsys)
    assert list(first) == ["reviewer", "editor", "editor2", "admin"]
    assert len(set(first.values())) == 4  # one per user, not a shared one
    assert all(first[u] != second[u] and len(second[u]) >= 12 for u in first)
    for username, password in second.items():
        user = User.objects.get(username=username)
        assert user.check_password(password) and not user.check_password(first[username])
