"""A bundle carries the history (issue 21 item 7): who published each key edition and when,
the judges' backend settings (never secrets) and the audit log; users by name only.

The worked benchmark: the demo bundle imported and triaged, one key entry corrected through
the review services (claim, propose, approve by a second editor, publish), judge settings
set as an admin would. It is exported, imported into an EMPTY database (a fresh SQLite
file, in a subprocess, as an operator restores) and every carried field is compared with
the source database's. Bad history rows refuse the whole bundle with FILE:LINE: FIELD.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from core.models import AuditLogEntry
from interchange.bundles import BundleError, import_bundle
from questions.models import Benchmark, KeyEdition
from scoring.models import Judge
from tests.conftest import DEMO_BUNDLE
from tests.test_attack_immutability import make_correction, make_user
from tests.test_backup_restore import _manage

BENCHMARK = "uk-construction-demo"

# Run in the restored database (manage.py shell) and here, so both sides are read alike.
DUMP = """
import json
from django.contrib.auth.models import User
from core.models import AuditLogEntry
from questions.models import KeyEdition
from review.models import ReviewItem
from scoring.models import Judge

def t(v):
    return v.isoformat() if v else None

def u(v):
    return v.username if v else None

def e(v):
    return [v.edition.name, v.question.question_id] if v else None

def dump(b):
    return json.loads(json.dumps({
     "editions": [[e.name, t(e.published_at), u(e.published_by)]
       for e in KeyEdition.objects.filter(benchmark__name=b).order_by("id")],
     "judges": [[j.judge_id, j.base_url, j.api_key_env, j.backend_settings, j.active]
       for j in Judge.objects.filter(benchmark__name=b).order_by("judge_id")],
     "log": [[x.created_at.isoformat(), u(x.actor), x.actor_label, x.action, x.target_type,
       x.target_id, x.target_label, x.before, x.after]
       for x in AuditLogEntry.objects.filter(benchmark_name=b).order_by("created_at", "id")],
     "users": sorted([x.username, x.is_active, x.has_usable_password(), x.groups.count()]
       for x in User.objects.all()),
     "items": [[i.question.question_id, i.source, i.sources, i.priority, i.reasons, i.status,
       u(i.claimed_by), t(i.claimed_at), t(i.claim_expires_at), i.version, t(i.created_at),
       t(i.updated_at), t(i.closed_at),
       [[v.kind, v.detail, v.fingerprint, t(v.created_at)]
        for v in i.evidence.order_by("created_at", "id")],
       [[u(c.reviewer), e(c.key_entry), c.locator_exists, c.supports, c.edition_in_force,
         c.amended, c.note, c.source_url, t(c.created_at)] for c in i.checks.order_by("created_at")],
       [[u(p.author), p.action, e(p.base_entry), p.answer, p.citation_doc_id, p.citation_locator,
         p.citation_quote, p.reason, p.note, p.status, u(p.decided_by), t(p.decided_at),
         p.decision_comment, e(p.key_entry), t(p.created_at)]
        for p in i.proposals.order_by("created_at")]]
       for i in ReviewItem.objects.filter(benchmark__name=b).order_by("created_at", "id")],
    }, default=str))
"""


def _here() -> dict:
    scope: dict = {}
    exec(DUMP, scope)
    return scope["dump"](BENCHMARK)


@pytest.fixture
def worked(db):
    call_command("import_bundle", str(DEMO_BUNDLE), verbosity=0)
    call_command("triage", benchmark=BENCHMARK, verbosity=0)
    bench = Benchmark.objects.get(name=BENCHMARK)
    reviewer = make_user("h-reviewer", "reviewer")
    editor = make_user("h-editor", "editor")
    edition = make_correction(bench, reviewer=reviewer, approver=editor)
    judge = Judge.objects.filter(benchmark=bench, role="judge").order_by("judge_id").first()
    judge.base_url = "https://svc:hunter2@llm.example.org:8443/v1?key=sk-secret#x"
    judge.api_key_env = "SNAGLIST_JUDGE_KEY_ACME"
    judge.backend_settings = {"temperature": 0.0, "max_tokens": 600, "api_key": "sk-secret"}
    judge.save()
    auditor = Judge.objects.filter(benchmark=bench, role="auditor").order_by("judge_id").first()
    auditor.active = False
    auditor.api_key_env = "sk-proj-secret123"  # a key pasted where a variable name belongs
    auditor.save()
    _rejected_removal(bench, reviewer, editor)
    return bench, edition


def _rejected_removal(bench, reviewer, editor) -> None:
    """A second item: claimed, its citation checked, a removal proposed and rejected."""
    from review import services
    from review.models import ReviewItem

    item = ReviewItem.objects.filter(benchmark=bench, status="open").order_by("id").first()
    item = services.review_item_claim(item=item, user=reviewer)
    services.citation_check_record(
        item=item,
        user=reviewer,
        version=item.version,
        locator_exists="yes",
        supports="partly",
        edition_in_force="superseded",
        amended="unknown",
        note="Table 2 moved in the 2021 edition — ≤ 0.18 W/(m²·K).",
        source_url="https://www.gov.uk/guidance/approved-documents",
    )
    item.refresh_from_db()
    proposal = services.proposal_create(
        item=item,
        user=reviewer,
        version=item.version,
        action="remove",
        reason="superseded_edition",
        note="Cites a withdrawn edition.",
    )
    services.proposal_reject(proposal=proposal, user=editor, comment="The 2021 text agrees.")


def test_the_history_restores_into_an_empty_database_field_by_field(worked, tmp_path):
    bench, edition = worked
    backup = tmp_path / "backup"
    call_command("export_bundle", str(backup), benchmark=BENCHMARK, verbosity=0)
    # Secrets never travel: not the password or token in the URL, not the api_key setting.
    text = "".join(p.read_text() for p in backup.iterdir())
    assert "hunter2" not in text and "sk-secret" not in text and "sk-proj" not in text
    assert "correct-horse" not in text and "md5$" not in text

    sqlite = Path("/tmp") / f"snaglist-history-{uuid.uuid4().hex}.sqlite3"
    url = f"sqlite:///{sqlite}"
    try:
        _manage("migrate", "--verbosity", "0", database_url=url)
        _manage("import_bundle", str(backup), database_url=url)
        script = DUMP + f"\nprint(json.dumps(dump({BENCHMARK!r})))"
        there = json.loads(_manage("shell", "-c", script, database_url=url).stdout.splitlines()[-1])
    finally:
        sqlite.unlink(missing_ok=True)

    here = _here()
    # Editions: the same names, publication times and publishers (original by the system).
    assert there["editions"] == here["editions"]
    assert here["editions"][-1][0] == edition.name and here["editions"][-1][2] == "h-editor"
    # Judges: every setting but the secrets, which were dropped on export.
    source_judges = {j[0]: j for j in here["judges"]}
    for jid, base_url, env, settings, active in there["judges"]:
        _, s_url, s_env, s_settings, s_active = source_judges[jid]
        assert (env, active) == ("" if s_env.startswith("sk-") else s_env, s_active)
        assert settings == {k: v for k, v in s_settings.items() if k != "api_key"}
        assert base_url == s_url.replace("svc:hunter2@", "").split("?")[0]
    assert [j for j in there["judges"] if j[1]] == [
        [
            "ref-lenient",
            "https://llm.example.org:8443/v1",
            "SNAGLIST_JUDGE_KEY_ACME",
            {"temperature": 0.0, "max_tokens": 600},
            True,
        ]
    ]
    assert [j[0] for j in there["judges"] if not j[4]] == ["ref-auditor-a"]
    # The audit log: every entry, every field, in order. The import adds one of its own:
    # seating the bundle's judges as the new benchmark's judge panel (by the system); rule 4
    # excludes nothing here (the demo's auditors share a vendor).
    own = [row for row in there["log"] if row not in here["log"]]
    assert [(row[1], row[3]) for row in own] == [(None, "judge_panel.set")]
    assert [row for row in there["log"] if row not in own] == here["log"]
    assert len(here["log"]) >= 4
    assert {row[1] for row in there["log"]} >= {"h-reviewer", "h-editor"}
    # Review items with their evidence, citation checks and proposals (author, editor,
    # comment, decision times, key entries by edition), every field.
    assert there["items"] == here["items"]
    statuses = sorted(i[5] for i in here["items"])
    assert (
        "corrected" in statuses and "claimed" in statuses and len(statuses) >= 9
    )  # the demo queue: 9 items since issue 27
    proposals = [p for i in here["items"] for p in i[15]]
    assert sorted((p[0], p[9], p[10]) for p in proposals) == [
        ("h-reviewer", "approved", "h-editor"),
        ("h-reviewer", "rejected", "h-editor"),
    ]
    assert [p[13] for p in proposals if p[9] == "approved"][0][0] == edition.name
    assert sum(len(i[14]) for i in here["items"]) == 1
    assert sum(len(i[13]) for i in here["items"]) >= len(here["items"])
    # Users by name only: created inactive, with no usable password and no role.
    assert there["users"] == [["h-editor", False, False, 0], ["h-reviewer", False, False, 0]]


def test_re_importing_the_export_adds_nothing_and_changes_no_log_row(worked, tmp_path):
    backup = tmp_path / "backup"
    call_command("export_bundle", str(backup), benchmark=BENCHMARK, verbosity=0)
    before = list(AuditLogEntry.objects.order_by("id").values())
    result = import_bundle(backup)
    assert result.already_imported, result.created
    # The judge's settings were exported without the secret: a difference, kept as stored.
    assert any("judge_settings.jsonl" in w and "kept as stored" in w for w in result.warnings)
    assert list(AuditLogEntry.objects.order_by("id").values()) == before


def test_an_old_bundle_without_the_history_files_still_imports(db):
    names = {p.name for p in DEMO_BUNDLE.iterdir()}
    assert not names & {"publications.jsonl", "judge_settings.jsonl", "audit_log.jsonl"}
    result = import_bundle(DEMO_BUNDLE)
    assert result.created["questions"] == 46 and result.created["audit_log"] == 0
    original = KeyEdition.objects.get(benchmark__name=BENCHMARK, name="original")
    assert original.published_by is None and original.published_at is not None


def _item(**changes) -> str:
    """One line of review_items.jsonl: a valid open item of Q001, with `changes`."""
    item = {
        "question_id": "Q001",
        "source": "manual",
        "sources": ["manual"],
        "priority": 0,
        "reasons": "",
        "status": "open",
        "version": 1,
        "created_at": "2026-01-02T10:00:00+00:00",
        "updated_at": "2026-01-02T10:00:00+00:00",
    }
    item.update(changes)
    return json.dumps(item)


PROPOSAL = {
    "author": "ann",
    "action": "remove",
    "reason": "other",
    "status": "approved",
    "decided_by": "bob",
    "decided_at": "2026-01-02T11:00:00+00:00",
    "created_at": "2026-01-02T10:30:00+00:00",
}
CHECK = {
    "reviewer": "ann",
    "locator_exists": "yes",
    "supports": "no",
    "edition_in_force": "yes",
    "amended": "no",
    "created_at": "2026-01-02T10:30:00+00:00",
}

BAD_ROWS = {
    "review_items.jsonl": [
        (_item(question_id="Q999"), "question_id"),
        (_item(status="claimed", question_id="Q002"), "claimed_by"),
        (_item(created_at="2026-01-02 10:00", question_id="Q003"), "created_at"),
        (_item(status="shelved", question_id="Q004"), "status"),
        (
            _item(question_id="Q005", proposals=[{**PROPOSAL, "decided_by": None}]),
            "proposals[0].decided_by",
        ),
        (
            _item(question_id="Q006", proposals=[{**PROPOSAL, "decided_by": "ann"}]),
            "proposals[0].decided_by",
        ),
        (_item(question_id="Q007", proposals=[{**PROPOSAL, "reason": ""}]), "proposals[0].reason"),
        (
            _item(question_id="Q008", citation_checks=[{**CHECK, "key_entry": "corrected-9"}]),
            "citation_checks[0].key_entry",
        ),
        (
            _item(question_id="Q009", citation_checks=[{**CHECK, "reviewer": None}]),
            "citation_checks[0].reviewer",
        ),
        (
            _item(
                question_id="Q010",
                evidence=[
                    {
                        "kind": "gossip",
                        "detail": {},
                        "fingerprint": "f",
                        "created_at": "2026-01-02T10:00:00+00:00",
                    }
                ],
            ),
            "evidence[0].kind",
        ),
        (
            _item(
                question_id="Q012",
                evidence=[
                    {
                        "kind": "manual",
                        "detail": {"why": "a\u0000b"},
                        "fingerprint": "f",
                        "created_at": "2026-01-02T10:00:00+00:00",
                    }
                ],
            ),
            "evidence[0].detail",
        ),
        (_item(question_id="Q011"), None),
        (_item(question_id="Q011"), "status"),
    ],
    "publications.jsonl": [
        ('{"edition": "corrected-9", "published_at": "2026-01-02T10:00:00+00:00"}', "edition"),
        ('{"edition": "original", "published_at": "2026-01-02T10:00:00"}', "published_at"),
        ('{"edition": "original", "published_at": "2 Jan 2026"}', "published_at"),
    ],
    "judge_settings.jsonl": [
        ('{"judge_id": "ref-lenient", "backend_settings": {"api_key": "x"}}', "backend_settings"),
        ('{"judge_id": "ref-lenient", "base_url": "https://u:p@h.example/v1"}', "base_url"),
        ('{"judge_id": "ref-lenient", "base_url": "https://h.example/v1?token=x"}', "base_url"),
        ('{"judge_id": "nobody"}', "judge_id"),
        ('{"judge_id": "ref-lenient", "api_key_env": "sk-live-123"}', "api_key_env"),
        ('{"judge_id": "ref-lenient", "active": "yes"}', "active"),
    ],
    "audit_log.jsonl": [
        (
            '{"actor_label": "ann", "action": "x.y", "target_type": "t", "target_id": "1"}',
            "created_at",
        ),
        (
            '{"created_at": "2026-01-02T10:00:00+00:00", "actor_label": "", "action": "x.y",'
            ' "target_type": "t", "target_id": "1"}',
            "actor_label",
        ),
        (
            '{"created_at": "2026-01-02T10:00:00+00:00", "actor_label": "ann", "action": "x.y",'
            ' "target_type": "t", "target_id": "1", "after": {"a": "\\u0000"}}',
            "after.a",
        ),
        (
            '{"created_at": "2026-01-02T10:00:00+00:00", "actor": "' + "u" * 151 + '",'
            ' "actor_label": "ann", "action": "x.y", "target_type": "t", "target_id": "1"}',
            "actor",
        ),
    ],
}


def test_bad_history_rows_refuse_the_whole_bundle_naming_file_line_and_field(db, tmp_path):
    bundle = tmp_path / "bad"
    shutil.copytree(DEMO_BUNDLE, bundle)
    judges = (bundle / "judges.csv").read_text()
    assert "ref-lenient" in judges, judges
    expected = []
    for name, rows in BAD_ROWS.items():
        (bundle / name).write_text("".join(r + "\n" for r, _ in rows))
        expected += [
            f"{name}:{i}: {field}: " for i, (_, field) in enumerate(rows, start=1) if field
        ]
    with pytest.raises(BundleError) as caught:
        import_bundle(bundle)
    problems = caught.value.problems
    for prefix in expected:
        assert any(p.startswith(prefix) for p in problems), (prefix, problems)
    assert len(problems) == len(expected), problems
    assert any("secrets never travel" in p for p in problems)
    assert any("cannot decide their own proposal" in p for p in problems)
    assert any("at most one" in p for p in problems)
    # All or nothing: not even the valid files were written.
    assert not Benchmark.objects.exists() and not AuditLogEntry.objects.exists()
    assert not User.objects.exists()


def test_a_valid_history_sets_publication_and_creates_missing_users_inactive(db, tmp_path):
    bundle = tmp_path / "ok"
    shutil.copytree(DEMO_BUNDLE, bundle)
    (bundle / "publications.jsonl").write_text(
        '{"edition": "original", "published_at": "2025-11-03T09:15:00+01:00",'
        ' "published_by": "zoë"}\n'
    )
    (bundle / "audit_log.jsonl").write_text(
        '{"created_at": "2025-11-03T08:15:00+00:00", "actor": "zoë", "actor_label": "zoë",'
        ' "action": "key_edition.publish", "target_type": "key_edition", "target_id": "1",'
        ' "target_label": "original", "before": null, "after": {"status": "published"}}\n'
    )
    existing = make_user("zoë")
    result = import_bundle(bundle)
    assert result.created["users"] == 0 and result.created["audit_log"] == 1
    assert result.created["publications"] == 1
    original = KeyEdition.objects.get(name="original")
    assert original.published_by == existing
    assert original.published_at.isoformat() == "2025-11-03T08:15:00+00:00"
    # (the import's own entry, seating the judge panel, is the other one)
    entry = AuditLogEntry.objects.get(action="key_edition.publish")
    assert (entry.actor, entry.benchmark_name, entry.after) == (
        existing,
        BENCHMARK,
        {"status": "published"},
    )
    assert existing.is_active  # an existing user is used as it is, never changed


def test_an_open_item_for_a_question_with_one_open_in_the_database_is_refused(db, tmp_path):
    call_command("import_bundle", str(DEMO_BUNDLE), verbosity=0)
    call_command("triage", benchmark=BENCHMARK, verbosity=0)
    from review.models import ReviewItem

    busy = ReviewItem.objects.filter(status="open").order_by("id").first()
    qid = busy.question.question_id
    bundle = tmp_path / "more"
    shutil.copytree(DEMO_BUNDLE, bundle)
    (bundle / "review_items.jsonl").write_text(_item(question_id=qid) + "\n")
    count = ReviewItem.objects.count()
    with pytest.raises(BundleError) as caught:
        import_bundle(bundle)
    assert caught.value.problems == [
        f"review_items.jsonl:1: status: question {qid!r} already has a review item that is "
        "not closed in the database; close it or import into an empty database"
    ]
    assert ReviewItem.objects.count() == count
