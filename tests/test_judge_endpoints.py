"""Issue 26 part 1: a bundle must not spend or leak the server's secrets.

An attacker's bundle adds a judge whose base_url is its own address and whose api_key_env
names DATABASE_URL. Such settings are refused at import (file, line, reason; nothing
written) and again at call time (a row that holds them anyway, a host name that resolves to
a private address); an API judge from a bundle arrives inactive and is called only after an
admin activates it (command or admin action, audit-logged); a publish re-scores with the
judge panel only.
"""

from __future__ import annotations

import ipaddress
import shutil
import socket

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from core.models import AuditLogEntry
from interchange.bundles.importer import import_bundle
from interchange.bundles.problems import BundleError
from judges import EndpointPolicy, EndpointRefused, GradingInput, JudgeConfigError
from questions.models import Benchmark, KeyEdition
from scoring.models import Judge
from scoring.runs.services import backends
from scoring.runs.services.panel import judge_panel_set
from scoring.runs.services.runs import rescore_after_publish
from tests.conftest import DEMO_BUNDLE

ATTACKER_JUDGE = "helpful-judge,Helpful judge,acme,judge,openai,gpt-4o,judge-v1\n"
ALLOWED_KEY = "SNAGLIST_JUDGE_KEY_ACME"


def _bundle(tmp_path, settings_line: str, name: str = "b"):
    """The demo bundle plus one openai judge and its judge_settings.jsonl line."""
    bundle = tmp_path / name
    shutil.copytree(DEMO_BUNDLE, bundle)
    with (bundle / "judges.csv").open("a") as f:
        f.write(ATTACKER_JUDGE)
    (bundle / "judge_settings.jsonl").write_text(settings_line + "\n")
    return bundle


def _benchmark_name() -> str:
    import json

    return json.loads((DEMO_BUNDLE / "manifest.json").read_text())["name"]


def _pair_input() -> GradingInput:
    return GradingInput(
        question="q?", key_answer="a", citation_text="", response="r", scale=[0, 1, 2]
    )


def test_an_attacker_bundle_with_database_url_and_an_http_address_is_refused(db, tmp_path):
    bundle = _bundle(
        tmp_path,
        '{"judge_id": "helpful-judge", "base_url": "http://attacker.example/v1", '
        '"api_key_env": "DATABASE_URL", "active": true}',
    )
    with pytest.raises(BundleError) as caught:
        import_bundle(bundle)
    problems = caught.value.problems
    assert len(problems) == 2, problems
    assert problems[0].startswith("judge_settings.jsonl:1: base_url: http to attacker.example")
    assert problems[1].startswith(
        "judge_settings.jsonl:1: api_key_env: DATABASE_URL holds one of the server's own settings"
    )
    assert not Benchmark.objects.exists() and not Judge.objects.exists()


def test_a_listed_server_secret_is_still_refused(db, tmp_path, settings):
    settings.SNAGLIST_JUDGE_KEY_ENV_ALLOWED = ("DATABASE_URL", "OPENAI_API_KEY")
    settings.SNAGLIST_JUDGE_KEY_ENV_PREFIX = ("",)  # every name, by prefix
    bundle = _bundle(tmp_path, '{"judge_id": "helpful-judge", "api_key_env": "SECRET_KEY"}')
    with pytest.raises(BundleError) as caught:
        import_bundle(bundle)
    assert caught.value.problems == [
        "judge_settings.jsonl:1: api_key_env: SECRET_KEY holds one of the server's own "
        "settings and never a judge's key"
    ]


def test_a_key_variable_outside_the_allowance_is_refused(db, tmp_path):
    bundle = _bundle(tmp_path, '{"judge_id": "helpful-judge", "api_key_env": "HOME"}')
    with pytest.raises(BundleError) as caught:
        import_bundle(bundle)
    (problem,) = caught.value.problems
    assert problem.startswith(
        "judge_settings.jsonl:1: api_key_env: HOME is not a variable an administrator allowed"
    )
    assert "SNAGLIST_JUDGE_KEY_*, ANTHROPIC_API_KEY, OPENAI_API_KEY" in problem


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("https://169.254.169.254/latest/meta-data", "cloud metadata address 169.254.169.254"),
        ("https://[fd00:ec2::254]/v1", "cloud metadata address fd00:ec2::254"),
        ("https://169.254.10.1/v1", "link-local"),
        ("https://[fe80::1]/v1", "link-local"),
        ("https://10.0.0.5/v1", "private"),
        ("https://172.16.3.4/v1", "private"),
        ("https://192.168.1.1/v1", "private"),
        ("https://[fc00::5]/v1", "private"),
        ("https://127.0.0.2/v1", "loopback"),  # https, but 127/8 is allowed only by the setting
        ("https://[::ffff:10.0.0.5]/v1", "private"),  # an IPv4-mapped IPv6 literal
    ],
)
def test_internal_addresses_are_refused_at_import(db, tmp_path, settings, url, kind):
    settings.SNAGLIST_JUDGE_ALLOWED_NETWORKS = ()
    bundle = _bundle(tmp_path, f'{{"judge_id": "helpful-judge", "base_url": "{url}"}}')
    with pytest.raises(BundleError) as caught:
        import_bundle(bundle)
    (problem,) = caught.value.problems
    assert problem.startswith("judge_settings.jsonl:1: base_url: ") and kind in problem, problem


def test_the_metadata_address_is_refused_even_where_its_range_is_allowed(db, tmp_path, settings):
    settings.SNAGLIST_JUDGE_ALLOWED_NETWORKS = (ipaddress.ip_network("169.254.0.0/16"),)
    settings.SNAGLIST_JUDGE_HTTP_HOSTS = ("169.254.169.254",)
    bundle = _bundle(
        tmp_path, '{"judge_id": "helpful-judge", "base_url": "http://169.254.169.254/v1"}'
    )
    with pytest.raises(BundleError) as caught:
        import_bundle(bundle)
    assert caught.value.problems == [
        "judge_settings.jsonl:1: base_url: 169.254.169.254 is the cloud metadata address "
        "169.254.169.254; never a judge"
    ]


def test_an_allowed_bundle_judge_arrives_inactive_and_is_never_called(db, tmp_path, monkeypatch):
    monkeypatch.setenv(ALLOWED_KEY, "sk-not-a-secret")
    bundle = _bundle(
        tmp_path,
        f'{{"judge_id": "helpful-judge", "base_url": "https://judge.example/v1", '
        f'"api_key_env": "{ALLOWED_KEY}", "active": true}}',
    )
    result = import_bundle(bundle)
    judge = Judge.objects.get(judge_id="helpful-judge")
    assert (judge.active, judge.base_url, judge.api_key_env) == (
        False,
        "https://judge.example/v1",
        ALLOWED_KEY,
    )
    assert any("'helpful-judge' calls an API and was added inactive" in w for w in result.warnings)
    # The reference judges of the same bundle call nothing and stay as the bundle says.
    assert Judge.objects.get(judge_id="ref-lenient").active
    # rescore --judges helpful-judge: the run has nothing to grade with, and no backend is
    # built for it (no call can be made).
    with pytest.raises(CommandError, match="can grade: helpful-judge: skipped, inactive"):
        call_command("rescore", judges="helpful-judge", benchmark=_benchmark_name())
    with pytest.raises(JudgeConfigError, match="helpful-judge is inactive"):
        backends.judge_backend(judge)


def test_a_stored_row_with_a_server_secret_is_refused_at_call_time(db, tmp_path, monkeypatch):
    """A row written before these checks (or by hand) is refused when a backend is built."""
    call_command("import_bundle", str(DEMO_BUNDLE), verbosity=0)
    bench = Benchmark.objects.get()
    judge = Judge.objects.create(
        benchmark=bench,
        judge_id="old",
        name="Old",
        backend="openai",
        model="gpt-4o",
        base_url="https://judge.example/v1",
        api_key_env="DATABASE_URL",
        active=True,
    )
    with pytest.raises(EndpointRefused) as caught:
        backends.judge_backend(judge)
    assert caught.value.field == "api_key_env"


def test_a_host_name_resolving_to_a_private_address_is_refused_at_call_time(db, monkeypatch):
    """DNS rebinding: the name passed the import's checks; its address is checked per call."""
    call_command("import_bundle", str(DEMO_BUNDLE), verbosity=0)
    judge = Judge.objects.create(
        benchmark=Benchmark.objects.get(),
        judge_id="rebound",
        name="Rebound",
        backend="openai",
        model="gpt-4o",
        base_url="https://judge.example/v1",
        api_key_env=ALLOWED_KEY,
        backend_settings={"max_retries": 0, "timeout": 2},
        active=True,
    )
    monkeypatch.setenv(ALLOWED_KEY, "sk-not-a-secret")
    asked = []

    def getaddrinfo(host, port, *args, **kwargs):
        asked.append((host, port))
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    backend = backends.judge_backend(judge)  # the static checks pass: a public-looking name
    with pytest.raises(EndpointRefused) as caught:
        backend.grade(_pair_input())
    assert str(caught.value) == (
        "base_url: judge.example (10.1.2.3) is a private address; an administrator allows "
        "such a range with SNAGLIST_JUDGE_ALLOWED_NETWORKS"
    )
    assert asked == [("judge.example", 443)]  # resolved once, by the check; nothing sent


def test_the_policy_passes_a_public_resolution_and_refuses_a_mixed_one():
    public = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", 443))]
    private = [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("fd12::1", 443, 0, 0))]
    policy = EndpointPolicy(resolve=lambda *a, **k: public)
    assert policy.check_resolved("https://judge.example/v1") == [
        ipaddress.ip_address("93.184.215.14")
    ]
    mixed = EndpointPolicy(resolve=lambda *a, **k: public + private)
    with pytest.raises(EndpointRefused, match=r"judge.example \(fd12::1\) is a private"):
        mixed.check_resolved("https://judge.example/v1")


def _imported_inactive(tmp_path, url="https://judge.example/v1"):
    bundle = _bundle(
        tmp_path,
        f'{{"judge_id": "helpful-judge", "base_url": "{url}", "api_key_env": "{ALLOWED_KEY}"}}',
    )
    import_bundle(bundle)
    return Judge.objects.get(judge_id="helpful-judge")


def test_activate_judge_shows_the_address_needs_yes_and_writes_an_audit_entry(db, tmp_path, capsys):
    judge = _imported_inactive(tmp_path)
    admin = get_user_model().objects.create_superuser("root", password="x-long-password-1")
    with pytest.raises(CommandError, match="not activated: check its address") as caught:
        call_command("activate_judge", "helpful-judge")
    assert caught.value.returncode == 1
    shown = capsys.readouterr().out
    assert "address:      https://judge.example/v1" in shown
    assert f"key variable: {ALLOWED_KEY}" in shown
    judge.refresh_from_db()
    assert not judge.active and not AuditLogEntry.objects.filter(action="judge.activate")
    call_command("activate_judge", "helpful-judge", yes=True, user="root")
    judge.refresh_from_db()
    assert judge.active
    entry = AuditLogEntry.objects.get(action="judge.activate")
    assert (entry.actor, entry.target_id, entry.benchmark_name) == (
        admin,
        str(judge.pk),
        judge.benchmark.name,
    )
    assert entry.before == {
        "active": False,
        "base_url": "https://judge.example/v1",
        "api_key_env": ALLOWED_KEY,
    }
    assert entry.after == {**entry.before, "active": True}
    call_command("activate_judge", "helpful-judge", deactivate=True)
    judge.refresh_from_db()
    assert not judge.active and AuditLogEntry.objects.filter(action="judge.deactivate").exists()


def test_activation_is_refused_when_the_settings_no_longer_allow_the_judge(db, tmp_path, settings):
    judge = _imported_inactive(tmp_path, url="http://127.0.0.1:9/v1")
    settings.SNAGLIST_JUDGE_HTTP_HOSTS = ()
    with pytest.raises(CommandError, match="cannot be activated: base_url: http to 127.0.0.1"):
        call_command("activate_judge", "helpful-judge", yes=True)
    judge.refresh_from_db()
    assert not judge.active and not AuditLogEntry.objects.filter(action="judge.activate")


def test_the_admin_action_shows_address_and_key_variable_before_activating(db, tmp_path, client):
    judge = _imported_inactive(tmp_path)
    admin = get_user_model().objects.create_superuser("root", password="x-long-password-1")
    client.force_login(admin)
    url = "/admin/scoring/judge/"
    page = client.post(url, {"action": "activate_judges", "_selected_action": [judge.pk]})
    assert page.status_code == 200
    html = page.content.decode()
    assert "<code>https://judge.example/v1</code>" in html
    assert f"<code>{ALLOWED_KEY}</code>" in html
    judge.refresh_from_db()
    assert not judge.active  # the page only shows; nothing changed yet
    done = client.post(
        url, {"action": "activate_judges", "_selected_action": [judge.pk], "confirm": "yes"}
    )
    assert done.status_code == 302
    judge.refresh_from_db()
    assert judge.active
    assert AuditLogEntry.objects.get(action="judge.activate").actor == admin
    # The form cannot tick `active` past the action, nor set a server secret as the key.
    change = client.get(f"{url}{judge.pk}/change/").content.decode()
    assert 'name="active"' not in change


def test_the_admin_form_refuses_a_server_secret_as_key_variable(db, tmp_path, client):
    judge = _imported_inactive(tmp_path)
    admin = get_user_model().objects.create_superuser("root", password="x-long-password-1")
    client.force_login(admin)
    from scoring.admin import JudgeForm

    form = JudgeForm(
        data={"backend": "openai", "base_url": judge.base_url, "api_key_env": "DATABASE_URL"},
        instance=judge,
    )
    form.fields = {k: form.fields[k] for k in ("backend", "base_url", "api_key_env")}
    assert not form.is_valid()
    assert "holds one of the server's own settings" in form.errors["api_key_env"][0]


def test_a_re_import_never_moves_or_reactivates_an_activated_judge(db, tmp_path):
    judge = _imported_inactive(tmp_path)
    call_command("activate_judge", "helpful-judge", yes=True)
    again = _bundle(
        tmp_path,
        '{"judge_id": "helpful-judge", "base_url": "https://elsewhere.example/v1", '
        '"api_key_env": "SNAGLIST_JUDGE_KEY_OTHER"}',
        name="again",
    )
    result = import_bundle(again)
    judge.refresh_from_db()
    assert (judge.base_url, judge.api_key_env, judge.active) == (
        "https://judge.example/v1",
        ALLOWED_KEY,
        True,
    )
    assert any(
        "has other backend settings in the database; kept as stored" in w for w in result.warnings
    )
    # And one deactivated stays inactive whatever a re-import says.
    call_command("activate_judge", "helpful-judge", deactivate=True)
    import_bundle(_bundle(tmp_path, '{"judge_id": "helpful-judge", "active": true}', "third"))
    judge.refresh_from_db()
    assert not judge.active


def test_a_publish_re_scores_with_the_judge_panel_only(db):
    call_command("import_bundle", str(DEMO_BUNDLE), verbosity=0)
    bench = Benchmark.objects.get()
    judge_panel_set(benchmark=bench, members=[("ref-lenient", None)])
    assert Judge.objects.get(judge_id="ref-strict").active  # active, but not on the panel
    edition = KeyEdition.objects.get(benchmark=bench, name="original")
    run = rescore_after_publish(edition.pk)
    assert sorted(run.judges.values_list("judge_id", flat=True)) == ["ref-lenient"]
