"""Review services: the state machine, four-eyes, optimistic locking, publishing, audit log."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from core.models import AuditLogEntry
from questions.models import KeyEdition, KeyEntry
from review import services
from review.errors import ConflictError, InvalidInputError, InvalidTransitionError, NotAllowedError
from review.models import ReviewItem
from scoring.models import RescoreRequest
from scoring.runs.services import runs as scoring_runs
from tests.factories import ReviewItemFactory
from tests.review_fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db


@pytest.fixture
def item(world):
    return ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)


def claimed(item, user):
    return services.review_item_claim(item=item, user=user)


def propose_correction(item, user, **kw):
    fields = {
        "action": "correct",
        "answer": "150 mm",
        "citation_doc_id": "ADA",
        "citation_locator": "1.3",
        "citation_quote": "minimum bearing is 103 mm",
        "reason": "factually_wrong",
        "note": "Table changed",
    }
    fields.update(kw)
    return services.proposal_create(item=item, user=user, version=item.version, **fields)


def edition_hash(edition: KeyEdition) -> str:
    """Hash every column of an edition's row and its entries (rule 7 byte-identical check)."""
    with connection.cursor() as cur:
        cur.execute("SELECT * FROM questions_keyedition WHERE id = %s", [edition.pk])
        rows = [cur.fetchall()]
        cur.execute(
            "SELECT * FROM questions_keyentry WHERE edition_id = %s ORDER BY id", [edition.pk]
        )
        rows.append(cur.fetchall())
    return hashlib.sha256(json.dumps(rows, default=str).encode()).hexdigest()


# ------------------------------------------------------------------ claims


def test_reviewer_claims_an_open_item_and_it_is_logged(item, reviewer):
    got = claimed(item, reviewer)
    assert got.status == "claimed" and got.claimed_by == reviewer
    assert got.version == 2
    expected = timezone.now() + timedelta(minutes=30)
    assert abs((got.claim_expires_at - expected).total_seconds()) < 5
    log = AuditLogEntry.objects.get(action="review_item.claim")
    assert log.actor == reviewer and log.target_id == str(item.pk)
    assert log.before["status"] == "open" and log.after["status"] == "claimed"
    assert log.after["claimed_by"] == "reviewer"


def test_second_reviewer_cannot_claim_a_live_claim(item, reviewer, reviewer2):
    claimed(item, reviewer)
    with pytest.raises(InvalidTransitionError, match="by reviewer"):
        claimed(item, reviewer2)


def test_expired_claim_can_be_taken_over(item, reviewer, reviewer2):
    claimed(item, reviewer)
    ReviewItem.objects.filter(pk=item.pk).update(
        claim_expires_at=timezone.now() - timedelta(seconds=1)
    )
    got = claimed(item, reviewer2)
    assert got.claimed_by == reviewer2


def test_claim_minutes_come_from_settings(item, reviewer, settings):
    settings.SNAGLIST_CLAIM_MINUTES = 5
    got = claimed(item, reviewer)
    assert (got.claim_expires_at - timezone.now()).total_seconds() < 5 * 60 + 5


def test_renew_and_release(item, reviewer):
    got = claimed(item, reviewer)
    ReviewItem.objects.filter(pk=item.pk).update(
        claim_expires_at=timezone.now() + timedelta(minutes=1)
    )
    renewed = services.review_item_renew(item=got, user=reviewer)
    assert renewed.claim_expires_at > timezone.now() + timedelta(minutes=29)
    released = services.review_item_release(item=renewed, user=reviewer, version=renewed.version)
    assert released.status == "open" and released.claimed_by is None
    assert list(
        AuditLogEntry.objects.filter(target_type="review_item")
        .order_by("id")
        .values_list("action", flat=True)
    ) == ["review_item.claim", "review_item.renew", "review_item.release"]


def test_outsider_cannot_claim(item, outsider):
    with pytest.raises(NotAllowedError):
        claimed(item, outsider)


def test_claim_next_takes_highest_priority_and_skips_claimed(world, reviewer, reviewer2):
    low = ReviewItemFactory(question=world.q(0), benchmark=world.benchmark, priority=101)
    high = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark, priority=401)
    first = services.review_item_claim_next(user=reviewer, benchmark=world.benchmark)
    second = services.review_item_claim_next(user=reviewer2, benchmark=world.benchmark)
    third = services.review_item_claim_next(user=reviewer2, benchmark=world.benchmark)
    assert (first.pk, second.pk, third) == (high.pk, low.pk, None)


def test_editor_reassigns_to_a_reviewer_only(item, editor, reviewer, outsider):
    got = services.review_item_reassign(item=item, user=editor, assignee=reviewer)
    assert got.claimed_by == reviewer and got.status == "claimed"
    with pytest.raises(InvalidInputError):
        services.review_item_reassign(item=item, user=editor, assignee=outsider)
    with pytest.raises(NotAllowedError):
        services.review_item_reassign(item=item, user=reviewer, assignee=reviewer)
    assert AuditLogEntry.objects.filter(action="review_item.reassign", actor=editor).count() == 1


def test_one_open_item_per_question_is_a_database_rule(item):
    with pytest.raises(IntegrityError), transaction.atomic():
        ReviewItem.objects.create(
            benchmark=item.benchmark, question=item.question, source="manual", priority=1
        )


# ------------------------------------------------------------------ checks, proposals, locking


def test_citation_check_requires_the_claim_and_is_logged(item, reviewer, reviewer2):
    with pytest.raises(NotAllowedError):
        services.citation_check_record(
            item=item,
            user=reviewer,
            version=item.version,
            locator_exists="yes",
            supports="yes",
            edition_in_force="yes",
            amended="no",
        )
    got = claimed(item, reviewer)
    check = services.citation_check_record(
        item=got,
        user=reviewer,
        version=got.version,
        locator_exists="yes",
        supports="partly",
        edition_in_force="superseded",
        amended="yes",
        note="Table 2 renumbered",
        source_url="https://example.org/ada",
    )
    assert check.key_entry.question_id == item.question_id
    log = AuditLogEntry.objects.get(action="citation_check.record")
    assert log.after["supports"] == "partly" and log.after["note"] == "Table 2 renumbered"
    with pytest.raises(InvalidInputError) as exc:
        services.citation_check_record(
            item=got,
            user=reviewer,
            version=None,
            locator_exists="maybe",
            supports="yes",
            edition_in_force="yes",
            amended="no",
        )
    assert "locator_exists" in exc.value.errors


def test_stale_version_is_a_conflict_listing_changes_and_writes_nothing(item, reviewer, editor):
    got = claimed(item, reviewer)
    stale = got.version
    services.review_item_renew(item=got, user=reviewer)  # version +1 behind the form's back
    with pytest.raises(ConflictError) as exc:
        services.proposal_create(item=got, user=reviewer, version=stale, action="confirm")
    assert exc.value.current_version == stale + 1
    assert [c["action"] for c in exc.value.changes] == ["review_item.renew"]
    assert not item.proposals.exists()


def test_correction_needs_a_change_and_a_reason(item, reviewer):
    got = claimed(item, reviewer)
    with pytest.raises(InvalidInputError) as exc:
        propose_correction(got, reviewer, reason="")
    assert "reason" in exc.value.errors
    base = got.question.key_entries.get()
    with pytest.raises(InvalidInputError) as exc:
        propose_correction(
            got,
            reviewer,
            answer=base.answer,
            citation_locator=base.citation_locator,
            citation_quote=base.citation_quote,
        )
    assert exc.value.errors["answer"] == ["Nothing changed: change the answer or the citation."]
    with pytest.raises(InvalidInputError) as exc:
        propose_correction(got, reviewer, citation_doc_id="NOPE")
    assert "citation_doc_id" in exc.value.errors


def test_reviewer_cannot_approve(item, reviewer, reviewer2):
    proposal = propose_correction(claimed(item, reviewer), reviewer)
    with pytest.raises(NotAllowedError, match="only an editor"):
        services.proposal_approve(proposal=proposal, user=reviewer2)


def test_editor_cannot_approve_or_reject_own_correction(item, editor):
    proposal = propose_correction(claimed(item, editor), editor)
    with pytest.raises(NotAllowedError, match="your own"):
        services.proposal_approve(proposal=proposal, user=editor)
    with pytest.raises(NotAllowedError, match="your own"):
        services.proposal_reject(proposal=proposal, user=editor, comment="no")
    proposal.refresh_from_db()
    assert proposal.status == "pending"


def test_four_eyes_is_also_a_database_rule(item, editor):
    proposal = propose_correction(claimed(item, editor), editor)
    with pytest.raises(IntegrityError), transaction.atomic():
        type(proposal).objects.filter(pk=proposal.pk).update(
            status="approved", decided_by=editor, decided_at=timezone.now()
        )


def test_approved_correction_lands_in_a_new_draft_edition(world, item, reviewer, editor2):
    proposal = propose_correction(claimed(item, reviewer), reviewer)
    item.refresh_from_db()
    assert item.status == "proposed"
    approved = services.proposal_approve(proposal=proposal, user=editor2, comment="Checked")
    draft = KeyEdition.objects.get(benchmark=world.benchmark, status="draft")
    assert draft.name == "corrected-1" and draft.parent == world.original
    entry = approved.key_entry
    assert entry.edition == draft and entry.answer == "150 mm"
    assert entry.citation_locator == "1.3" and entry.reason == "factually_wrong"
    item.refresh_from_db()
    assert item.status == "corrected" and item.closed_at is not None
    actions = list(AuditLogEntry.objects.order_by("id").values_list("action", flat=True))
    assert actions[-3:] == ["key_edition.create", "proposal.approve", "review_item.close"]


def test_removal_keeps_answer_and_marks_removed(world, item, reviewer, editor):
    got = claimed(item, reviewer)
    proposal = services.proposal_create(
        item=got, user=reviewer, version=got.version, action="remove", reason="ungradeable"
    )
    entry = services.proposal_approve(proposal=proposal, user=editor).key_entry
    assert entry.removed is True and entry.answer == world.entry(1).answer
    item.refresh_from_db()
    assert item.status == "removed"


def test_confirmation_closes_at_once_without_approval_and_is_logged(world, item, reviewer, editor):
    """Rule 6 asks approval only for corrections and removals (issue 18, item 3)."""
    got = claimed(item, reviewer)
    proposal = services.proposal_create(
        item=got, user=reviewer, version=got.version, action="confirm", note="Checked."
    )
    assert (proposal.status, proposal.decided_by, proposal.key_entry) == ("recorded", None, None)
    assert proposal.decided_at is not None
    item.refresh_from_db()
    assert (item.status, item.claimed_by, item.closed_at) == (
        "confirmed",
        reviewer,
        proposal.decided_at,
    )
    assert not KeyEdition.objects.filter(status="draft").exists()
    logs = AuditLogEntry.objects.filter(actor=reviewer).order_by("pk")
    assert [e.action for e in logs] == ["review_item.claim", "proposal.create", "review_item.close"]
    assert logs[1].after["status"] == "recorded" and logs[2].after["status"] == "confirmed"
    with pytest.raises(InvalidTransitionError):  # nothing left to approve
        services.proposal_approve(proposal=proposal, user=editor)


def test_confirmation_waits_for_an_editor_when_the_setting_asks(
    world, item, reviewer, editor, settings
):
    settings.SNAGLIST_CONFIRMATION_NEEDS_APPROVAL = True
    got = claimed(item, reviewer)
    proposal = services.proposal_create(
        item=got, user=reviewer, version=got.version, action="confirm"
    )
    approved = services.proposal_approve(proposal=proposal, user=editor)
    assert approved.key_entry is None
    assert not KeyEdition.objects.filter(status="draft").exists()
    item.refresh_from_db()
    assert item.status == "confirmed"


def test_reject_sends_item_back_to_its_reviewer(item, reviewer, editor):
    proposal = propose_correction(claimed(item, reviewer), reviewer)
    with pytest.raises(InvalidInputError):
        services.proposal_reject(proposal=proposal, user=editor, comment="  ")
    rejected = services.proposal_reject(
        proposal=proposal, user=editor, comment="Cite the 2013 table"
    )
    assert rejected.status == "rejected" and rejected.decision_comment == "Cite the 2013 table"
    item.refresh_from_db()
    assert item.status == "claimed" and item.claimed_by == reviewer and item.claim_is_live()
    log = AuditLogEntry.objects.get(action="proposal.reject")
    assert log.before["status"] == "pending" and log.after["status"] == "rejected"
    with pytest.raises(InvalidTransitionError):
        services.proposal_approve(proposal=proposal, user=editor)


def test_publish_freezes_draft_records_affected_and_leaves_original_identical(
    world, item, reviewer, editor, editor2, django_capture_on_commit_callbacks
):
    before = edition_hash(world.original)
    proposal = propose_correction(claimed(item, reviewer), reviewer)
    services.proposal_approve(proposal=proposal, user=editor2)
    draft = KeyEdition.objects.get(status="draft")
    with pytest.raises(NotAllowedError):
        services.key_edition_publish(edition=draft, user=reviewer)
    with django_capture_on_commit_callbacks(execute=False):
        published = services.key_edition_publish(edition=draft, user=editor)
    assert published.status == "published" and published.published_by == editor
    assert edition_hash(world.original) == before
    log = AuditLogEntry.objects.get(action="key_edition.publish")
    assert log.after["affected"] == {"corrected": ["Q0001"], "removed": []}
    assert log.after["parent"] == "original"
    assert "rescoring_requested" in log.after
    with pytest.raises(InvalidTransitionError):
        services.key_edition_publish(edition=draft, user=editor)
    # The database refuses changes to the published draft too (rule 7).
    with pytest.raises(DatabaseError), transaction.atomic():
        KeyEntry.objects.filter(edition=draft).update(answer="tampered")


def test_publish_requests_rescoring_after_commit(
    world, item, reviewer, editor, monkeypatch, django_capture_on_commit_callbacks
):
    sent = []
    monkeypatch.setattr(scoring_runs, "send_rescore_request", sent.append)
    proposal = propose_correction(claimed(item, reviewer), reviewer)
    services.proposal_approve(proposal=proposal, user=editor)
    draft = KeyEdition.objects.get(status="draft")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        services.key_edition_publish(edition=draft, user=editor)
        assert sent == []  # nothing is sent before commit
        # The request is written with the publish, in its transaction (an outbox row).
        request = RescoreRequest.objects.get(edition=draft)
        assert request.requested_by == editor and request.is_waiting()
    # one rescore request sent after commit (the other callback drops the page cache's
    # tokens for the published edition: review.page_cache, issue 28 item 3)
    assert sent == [draft.pk] and len(callbacks) == 2
    assert (
        AuditLogEntry.objects.get(action="key_edition.publish").after["rescoring_requested"] is True
    )


def test_publish_with_the_broker_down_succeeds_and_rescoring_starts_when_it_is_back(
    world, item, reviewer, editor, monkeypatch, django_capture_on_commit_callbacks, caplog
):
    """Issue 16 item 4: a broker outage never turns a successful publish into an error."""
    from kombu.exceptions import OperationalError as BrokerDown

    from scoring.runs import tasks as scoring_tasks

    def broker_down(*args, **kwargs):
        raise BrokerDown("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(scoring_tasks.rescore_requested, "delay", broker_down)
    started = []
    monkeypatch.setattr(
        scoring_runs, "rescore_after_publish", lambda edition_id: started.append(edition_id)
    )
    proposal = propose_correction(claimed(item, reviewer), reviewer)
    services.proposal_approve(proposal=proposal, user=editor)
    draft = KeyEdition.objects.get(status="draft")
    with django_capture_on_commit_callbacks(execute=True):
        published = services.key_edition_publish(edition=draft, user=editor)
    assert published.status == "published"
    assert "Connection refused" in caplog.text  # logged, not raised
    request = RescoreRequest.objects.get(edition=draft)
    assert request.is_waiting() and started == []
    # Too young for the sweep (its own task may still be on the way) ...
    assert scoring_tasks.sweep_rescore_requests() == []
    # ... and once it has waited 30 s and the broker is back, the sweep sends it again.
    RescoreRequest.objects.filter(pk=request.pk).update(
        requested_at=timezone.now() - timedelta(seconds=31)
    )
    monkeypatch.undo()
    monkeypatch.setattr(
        scoring_runs, "rescore_after_publish", lambda edition_id: started.append(edition_id)
    )
    assert scoring_tasks.sweep_rescore_requests() == [draft.pk]  # eager: runs at once
    request.refresh_from_db()
    assert started == [draft.pk] and not request.is_waiting()
    assert request.note == (
        "no judge of the judge panel (with no panel: no active judge) can grade this edition"
    )
    # A second delivery finds the request started and starts nothing.
    assert scoring_tasks.rescore_requested(draft.pk) is None
    assert started == [draft.pk]
    assert scoring_tasks.sweep_rescore_requests() == []


def test_publishing_an_empty_draft_is_refused(world, editor):
    draft = services.draft_edition_get_or_create(benchmark=world.benchmark, user=editor)
    with pytest.raises(InvalidTransitionError, match="no changes"):
        services.key_edition_publish(edition=draft, user=editor)


def test_audit_log_is_append_only(item, reviewer):
    claimed(item, reviewer)
    entry = AuditLogEntry.objects.get()
    with pytest.raises(DatabaseError), transaction.atomic():
        AuditLogEntry.objects.filter(pk=entry.pk).update(action="forged")
    with pytest.raises(DatabaseError), transaction.atomic():
        AuditLogEntry.objects.filter(pk=entry.pk).delete()
    assert AuditLogEntry.objects.get().action == "review_item.claim"


def test_withdraw_returns_item_to_author(item, reviewer, reviewer2):
    proposal = propose_correction(claimed(item, reviewer), reviewer)
    with pytest.raises(NotAllowedError):
        services.proposal_withdraw(proposal=proposal, user=reviewer2)
    services.proposal_withdraw(proposal=proposal, user=reviewer)
    item.refresh_from_db()
    assert item.status == "claimed" and item.claimed_by == reviewer
