"""Methodology rule 7 under attack: a published key edition cannot be changed by any path.

tests/test_immutability.py already proves the triggers stop save/update/delete/
bulk_update/create and plain UPDATE/DELETE SQL on a tiny hand-made edition. This module
attacks a real one (the demo bundle's `original`, plus a corrected edition published
through the review workflow) along the paths that test leaves out: bulk_create (plain,
ignore_conflicts, upsert), moving entries between editions, cascades from the benchmark,
question and document, the Django admin as a superuser, the REST API as a superuser,
bundle re-imports that differ, and raw SQL shapes (INSERT, UPDATE ... FROM, CTEs,
INSERT ... ON CONFLICT, TRUNCATE). After every attempt the editions' rows are
byte-identical: the hash of a canonical dump of their KeyEdition and KeyEntry rows.
Issue 7, item 1.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.db.models import F, ProtectedError
from django.test import Client

from interchange.bundles import BundleError, import_bundle
from questions.models import (
    AuditExclusion,
    Benchmark,
    KeyEdition,
    KeyEntry,
    Question,
    SourceDocument,
)
from tests.conftest import DEMO_BUNDLE

BENCHMARK = "uk-construction-demo"
ATTACKS: list[str] = []  # names of the attacks tried (counted in the report)


# ------------------------------------------------------------------ the scene


def make_user(name: str, *groups: str) -> User:
    user = User.objects.create_user(name, password="correct-horse-battery-1")
    for group in groups:
        user.groups.add(Group.objects.get(name=group))
    return user


def make_correction(bench: Benchmark, *, reviewer: User, approver: User) -> KeyEdition:
    """Correct one key entry through the review services and publish the new edition.

    Claim -> propose a correction -> approve by a second editor -> publish: the workflow
    of methodology rules 5-7, as the pages and API drive it.
    """
    from review import services
    from review.models import ReviewItem
    from tests.review_fixtures import propose_correction

    item = ReviewItem.objects.filter(benchmark=bench, status="open").order_by("id").first()
    proposal = propose_correction(
        item,
        reviewer,
        suffix=" (corrected after checking the source)",
        note="Checked against the cited clause.",
    )
    proposal = services.proposal_approve(proposal=proposal, user=approver, comment="Agreed.")
    draft = proposal.key_entry.edition
    return services.key_edition_publish(edition=draft, user=approver)


@pytest.fixture
def scene(db):
    call_command("import_bundle", str(DEMO_BUNDLE), verbosity=0)
    call_command("triage", benchmark=BENCHMARK, verbosity=0)
    bench = Benchmark.objects.get(name=BENCHMARK)
    reviewer = make_user("a-reviewer", "reviewer")
    editor = make_user("a-editor", "editor")
    corrected = make_correction(bench, reviewer=reviewer, approver=editor)
    original = KeyEdition.objects.get(benchmark=bench, name="original")
    superuser = User.objects.create_superuser("a-super", password="correct-horse-battery-1")
    return {
        "bench": bench,
        "original": original,
        "corrected": corrected,
        "entry": KeyEntry.objects.filter(edition=original).order_by("pk").first(),
        "corrected_entry": KeyEntry.objects.get(edition=corrected),
        "superuser": superuser,
        "editor": editor,
    }


def canonical_dump() -> str:
    """Every column of every KeyEdition and published KeyEntry row, in a fixed order."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM questions_keyedition WHERE status = 'published' ORDER BY id")
        editions = [[str(v) for v in row] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT e.* FROM questions_keyentry e JOIN questions_keyedition k ON k.id = e.edition_id"
            " WHERE k.status = 'published' ORDER BY e.id"
        )
        entries = [[str(v) for v in row] for row in cursor.fetchall()]
    return json.dumps({"editions": editions, "entries": entries}, ensure_ascii=False)


def edition_hash() -> str:
    return hashlib.sha256(canonical_dump().encode()).hexdigest()


# The triggers' messages (questions/migrations/0002): the refusal must be theirs, not a
# syntax error or some other failure that would also be a DatabaseError.
TRIGGER_MESSAGE = r"published|immutable"


def refused(name: str, attempt, *errors: type[BaseException]) -> None:
    """Run `attempt` in a savepoint; it must raise one of `errors`.

    By default the error must be the immutability trigger's (a DatabaseError whose
    message names the published edition).
    """
    ATTACKS.append(name)
    if errors:
        with pytest.raises(errors), transaction.atomic():
            attempt()
        return
    with pytest.raises(DatabaseError, match=TRIGGER_MESSAGE), transaction.atomic():
        attempt()


# ------------------------------------------------------------------ ORM


def test_orm_paths_the_basic_test_leaves_out_all_fail(scene):
    before = edition_hash()
    original, corrected = scene["original"], scene["corrected"]
    entry, fixed = scene["entry"], scene["corrected_entry"]
    other_q = Question.objects.filter(benchmark=scene["bench"]).exclude(pk=entry.question_id)
    spare = other_q.exclude(key_entries__edition=corrected).first()

    def clone(**changes) -> KeyEntry:
        row = KeyEntry.objects.get(pk=entry.pk)
        row.pk = None
        for k, v in changes.items():
            setattr(row, k, v)
        return row

    refused(
        "bulk_create into a published edition",
        lambda: KeyEntry.objects.bulk_create([clone(edition=corrected, question=spare)]),
    )
    refused(
        "bulk_create ignore_conflicts",
        lambda: KeyEntry.objects.bulk_create([clone(answer="sneaked")], ignore_conflicts=True),
    )
    refused(
        "bulk_create upsert (ON CONFLICT DO UPDATE)",
        lambda: KeyEntry.objects.bulk_create(
            [clone(answer="overwritten")],
            update_conflicts=True,
            unique_fields=["edition", "question"],
            update_fields=["answer"],
        ),
    )
    refused(
        "update with an F expression",
        lambda: KeyEntry.objects.filter(edition=original).update(answer=F("note")),
    )
    refused(
        "move a published entry to another edition",
        lambda: KeyEntry.objects.filter(pk=fixed.pk).update(edition=original),
    )
    refused(
        "re-point the corrected edition's parent",
        lambda: KeyEdition.objects.filter(pk=corrected.pk).update(parent=None),
    )
    refused("unpublish with save()", lambda: _unpublish(corrected))
    refused("rename with save(update_fields)", lambda: _rename(original))
    # Cascades from above: Django's collector stops at PROTECT before any DELETE is sent.
    refused(
        "delete the benchmark (cascade)",
        lambda: Benchmark.objects.get(pk=scene["bench"].pk).delete(),
        ProtectedError,
        DatabaseError,
    )
    refused(
        "delete a question with key entries",
        lambda: Question.objects.get(pk=entry.question_id).delete(),
        ProtectedError,
    )
    cited = SourceDocument.objects.filter(citations__edition=original).first()
    refused("delete a cited source document", lambda: cited.delete(), ProtectedError)
    refused(
        "queryset delete of the whole table",
        lambda: KeyEntry.objects.all().delete(),
        ProtectedError,
        DatabaseError,
    )
    # Below the collector: _raw_delete sends one DELETE with no PROTECT check in Python.
    refused(
        "_raw_delete (no collector) of the original's entries",
        lambda: KeyEntry.objects.filter(edition=original)._raw_delete("default"),
    )
    assert edition_hash() == before


def test_a_draft_entry_cannot_be_smuggled_into_a_published_edition(scene):
    """Create an entry in a fresh draft, then try to re-point it at a published edition."""
    from questions import services

    before = edition_hash()
    draft = services.key_edition_create(
        benchmark=scene["bench"], name="smuggler", parent=scene["corrected"]
    )
    q = (
        Question.objects.filter(benchmark=scene["bench"])
        .exclude(key_entries__edition=scene["corrected"])
        .first()
    )
    row = services.key_entry_create(edition=draft, question=q, answer="smuggled", reason="other")

    def repoint():
        row.edition = scene["corrected"]
        row.save()

    refused("re-point a draft entry at a published edition (save)", repoint)
    refused(
        "re-point a draft entry (bulk_update)",
        lambda: KeyEntry.objects.bulk_update([_with(row, edition=scene["original"])], ["edition"]),
    )
    assert edition_hash() == before


def _with(row, **changes):
    for k, v in changes.items():
        setattr(row, k, v)
    return row


def _unpublish(edition: KeyEdition) -> None:
    row = KeyEdition.objects.get(pk=edition.pk)
    row.status, row.published_at = KeyEdition.Status.DRAFT, None
    row.save()


def _rename(edition: KeyEdition) -> None:
    row = KeyEdition.objects.get(pk=edition.pk)
    row.name = "renamed"
    row.save(update_fields=["name"])


# ------------------------------------------------------------------ raw SQL

RAW = {
    "INSERT into a published edition": (
        "INSERT INTO questions_keyentry (edition_id, question_id, answer, citation_doc_id,"
        " citation_locator, citation_quote, has_citation, removed, reason, note, created_at)"
        " SELECT %(corrected)s, q.id, 'raw', '', '', '', false, false, '', '', now()"
        " FROM questions_question q WHERE q.id NOT IN"
        " (SELECT question_id FROM questions_keyentry WHERE edition_id = %(corrected)s) LIMIT 1"
    ),
    "INSERT ... ON CONFLICT DO UPDATE": (
        "INSERT INTO questions_keyentry (edition_id, question_id, answer, citation_doc_id,"
        " citation_locator, citation_quote, has_citation, removed, reason, note, created_at)"
        " SELECT edition_id, question_id, 'upserted', '', '', '', false, false, '', '', now()"
        " FROM questions_keyentry WHERE id = %(entry)s"
        " ON CONFLICT (edition_id, question_id) DO UPDATE SET answer = EXCLUDED.answer"
    ),
    "UPDATE ... FROM a join": (
        "UPDATE questions_keyentry e SET answer = 'joined' FROM questions_keyedition k"
        " WHERE k.id = e.edition_id AND k.id = %(original)s"
    ),
    "UPDATE through a CTE": (
        "WITH victims AS (SELECT id FROM questions_keyentry WHERE edition_id = %(original)s)"
        " UPDATE questions_keyentry SET citation_locator = 'X' WHERE id IN (SELECT id FROM victims)"
    ),
    "DELETE ... USING a join": (
        "DELETE FROM questions_keyentry e USING questions_keyedition k"
        " WHERE k.id = e.edition_id AND k.status = 'published'"
    ),
    "UPDATE moving the corrected entry into original": (
        "UPDATE questions_keyentry SET edition_id = %(original)s WHERE id = %(fixed)s"
    ),
    "UPDATE the edition's name and parent": (
        "UPDATE questions_keyedition SET name = 'x', parent_id = NULL WHERE id = %(corrected)s"
    ),
    "DELETE every edition": "DELETE FROM questions_keyedition",
}
# Not here: TRUNCATE fires no row trigger; questions/0006 and scoring/0006 add statement
# triggers that refuse it while an edition is published, tried in tests/test_schema_guard.py
# (with the paths only a role that owns nothing closes).


@pytest.mark.parametrize("name", list(RAW))
def test_raw_sql_shapes_cannot_change_a_published_edition(scene, name):
    before = edition_hash()
    ids = {
        "original": scene["original"].pk,
        "corrected": scene["corrected"].pk,
        "entry": scene["entry"].pk,
        "fixed": scene["corrected_entry"].pk,
    }

    def run():
        with connection.cursor() as cursor:
            cursor.execute(RAW[name], ids)

    refused(f"raw SQL: {name}", run)
    assert edition_hash() == before


# ------------------------------------------------------------------ the Django admin


def _admin_client(scene) -> Client:
    client = Client()
    client.force_login(scene["superuser"])
    return client


def test_the_admin_refuses_a_superuser_every_change_to_a_published_edition(scene):
    before = edition_hash()
    client = _admin_client(scene)
    entry, edition = scene["entry"], scene["original"]
    form = {
        "edition": edition.pk,
        "question": entry.question_id,
        "answer": "changed in the admin",
        "citation_doc_id": entry.citation_doc_id,
        "citation_locator": entry.citation_locator,
        "citation_quote": entry.citation_quote,
        "has_citation": "on",
        "reason": "",
        "note": "",
    }
    base = "/admin/questions"
    attempts = {
        "admin change form of a published entry": (f"{base}/keyentry/{entry.pk}/change/", form),
        "admin delete of a published entry": (
            f"{base}/keyentry/{entry.pk}/delete/",
            {"post": "yes"},
        ),
        "admin change form of a published edition": (
            f"{base}/keyedition/{edition.pk}/change/",
            {"benchmark": edition.benchmark_id, "name": "renamed", "note": "changed"},
        ),
        "admin delete of a published edition": (
            f"{base}/keyedition/{edition.pk}/delete/",
            {"post": "yes"},
        ),
    }
    for name, (url, data) in attempts.items():
        ATTACKS.append(name)
        response = client.post(url, data)
        assert response.status_code == 403, (name, response.status_code)
    for model in ("keyentry", "keyedition"):
        ATTACKS.append(f"admin bulk delete_selected on {model}")
        pks = (
            KeyEntry.objects.values_list("pk", flat=True)[:5]
            if model == "keyentry"
            else [edition.pk]
        )
        response = client.post(
            f"{base}/{model}/",
            {"action": "delete_selected", "_selected_action": list(pks), "post": "yes"},
        )
        # The action is not offered: the changelist answers with "no action selected".
        assert response.status_code in (200, 302)
    assert edition_hash() == before


def test_the_admin_cannot_add_an_entry_to_a_published_edition(scene):
    """The add form has no check of its own; the database refuses the INSERT."""
    before = edition_hash()
    client = _admin_client(scene)
    client.raise_request_exception = False
    q = (
        Question.objects.filter(benchmark=scene["bench"])
        .exclude(key_entries__edition=scene["corrected"])
        .first()
    )
    ATTACKS.append("admin add form into a published edition")
    with transaction.atomic():  # the failed INSERT must not poison the test's transaction
        response = client.post(
            "/admin/questions/keyentry/add/",
            {
                "edition": scene["corrected"].pk,
                "question": q.pk,
                "answer": "added in the admin",
                "reason": "",
                "note": "",
            },
        )
    assert response.status_code >= 400
    assert edition_hash() == before


def test_the_admin_cannot_delete_the_benchmark_or_a_question_under_a_published_key(scene):
    before = edition_hash()
    client = _admin_client(scene)
    bench, entry = scene["bench"], scene["entry"]
    for name, url in {
        "admin delete of the benchmark (cascade)": f"/admin/questions/benchmark/{bench.pk}/delete/",
        "admin delete of a keyed question": f"/admin/questions/question/{entry.question_id}/delete/",
    }.items():
        ATTACKS.append(name)
        response = client.post(url, {"post": "yes"})
        if "question" in name:
            # QuestionAdmin refuses delete outright for a question under a published key.
            assert response.status_code == 403, (name, response.status_code)
            continue
        # Refused before Django collects the rows (issue 26): back to the change page,
        # with a message naming delete_benchmark.
        assert response.status_code == 302, (name, response.status_code)
        assert response.url == f"/admin/questions/benchmark/{bench.pk}/change/"
        page = client.get(response.url)
        assert "manage.py delete_benchmark" in page.content.decode()
    assert Benchmark.objects.filter(pk=bench.pk).exists()
    assert edition_hash() == before


# ------------------------------------------------------------------ the API


def test_the_api_has_no_write_verb_for_editions_entries_or_items(scene):
    """PUT/PATCH/DELETE on every detail endpoint, as a superuser: 405, nothing changed."""
    before = edition_hash()
    client = _admin_client(scene)
    from review.models import Proposal, ReviewItem

    item = ReviewItem.objects.first()
    proposal = Proposal.objects.first()
    urls = [
        f"/api/review/editions/{scene['original'].pk}/",
        f"/api/review/editions/{scene['corrected'].pk}/",
        f"/api/review/items/{item.pk}/",
        f"/api/review/proposals/{proposal.pk}/",
        "/api/review/editions/",
        "/api/review/log/",
    ]
    body = json.dumps({"name": "x", "status": "draft", "answer": "changed"})
    for url in urls:
        for verb in ("put", "patch", "delete"):
            ATTACKS.append(f"API {verb.upper()} {url.split('/')[3]}")
            response = getattr(client, verb)(url, body, content_type="application/json")
            assert response.status_code in (403, 404, 405), (verb, url, response.status_code)
    ATTACKS.append("API publish of a published edition")
    response = client.post(f"/api/review/editions/{scene['original'].pk}/publish/")
    assert response.status_code == 409
    assert edition_hash() == before


# ------------------------------------------------------------------ bundle re-import


def _bundle_copy(tmp_path: Path) -> Path:
    target = tmp_path / "bundle"
    shutil.copytree(DEMO_BUNDLE, target)
    return target


def _edit_jsonl(path: Path, line: int, **changes) -> None:
    rows = path.read_text(encoding="utf-8").splitlines()
    row = json.loads(rows[line])
    for key, value in changes.items():
        if "." in key:
            outer, inner = key.split(".")
            row[outer][inner] = value
        else:
            row[key] = value
    rows[line] = json.dumps(row, ensure_ascii=False)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


REIMPORTS = {
    "re-import with a changed citation locator": {"citation.locator": "9.99"},
    "re-import with a changed citation quote": {"citation.quote": "a different quote"},
    "re-import with a changed question text": {"text": "A different question?"},
    "re-import with the key answer emptied": {"answer": ""},
}


@pytest.mark.parametrize("name", list(REIMPORTS))
def test_a_reimport_that_differs_from_the_published_key_is_refused(scene, tmp_path, name):
    before = edition_hash()
    bundle = _bundle_copy(tmp_path)
    _edit_jsonl(bundle / "questions.jsonl", 0, **REIMPORTS[name])
    ATTACKS.append(name)
    with pytest.raises(BundleError) as excinfo:
        import_bundle(bundle)
    assert "questions.jsonl" in str(excinfo.value)
    assert edition_hash() == before


def test_a_reimport_that_rewrites_the_corrected_edition_is_refused(scene, tmp_path):
    """Export (original + corrected), alter the corrected row, import over the live data."""
    from interchange.bundles import export_bundle

    before = edition_hash()
    exported = tmp_path / "export"
    export_bundle(scene["bench"], exported)
    _edit_jsonl(exported / "corrections.jsonl", 0, answer="rewritten history")
    ATTACKS.append("re-import rewriting a published corrected edition")
    with pytest.raises(BundleError) as excinfo:
        import_bundle(exported)
    assert "corrections.jsonl" in str(excinfo.value)
    assert edition_hash() == before


def test_the_wording_of_a_published_question_cannot_change(scene):
    entry = scene["entry"]
    question = Question.objects.get(pk=entry.question_id)
    client = _admin_client(scene)
    ATTACKS.append("admin change of a keyed question's text")
    with transaction.atomic():
        client.post(
            f"/admin/questions/question/{question.pk}/change/",
            {
                "benchmark": question.benchmark_id,
                "question_id": question.question_id,
                "category": question.category_id or "",
                "text": "A quite different question?",
            },
        )
    question.refresh_from_db()
    assert question.text != "A quite different question?"
    # And the database refuses it whatever the route (migration questions/0004).
    with pytest.raises(DatabaseError, match="wording is immutable"), transaction.atomic():
        Question.objects.filter(pk=question.pk).update(text="A quite different question?")
    with pytest.raises(DatabaseError, match="cannot be deleted"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM questions_question WHERE id = %s", [question.pk])
    # Excluding its entry from scoring is still allowed: that is not the question set.
    AuditExclusion.objects.create(key_entry=entry, reason="auditors_agree")


def test_attacks_tried_figure(scene, capsys):
    """Not an attack: prints how many were tried in this module (for the issue's note)."""
    with capsys.disabled():
        print(f"\nimmutability attacks tried so far in this run: {len(ATTACKS)}")
