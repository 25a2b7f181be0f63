"""questions.services / questions.selectors used by review and scoring, and the admin's
read-only rule for published key editions."""

from __future__ import annotations

import pytest
from django.contrib.admin.sites import site
from django.contrib.auth import get_user_model
from django.test import RequestFactory

from questions import services
from questions.errors import AmbiguousError, DomainError, NotFoundError
from questions.models import (
    AuditExclusion,
    Benchmark,
    KeyEdition,
    KeyEntry,
    Question,
    SourceDocument,
)
from questions.selectors import (
    edition_chain,
    get_benchmark,
    get_edition,
    key_entries_for_edition,
    latest_published_edition,
    scored_entries,
)


@pytest.fixture
def bench(db):
    bench = Benchmark.objects.create(name="svc", grade_scale=[0, 1, 2])
    SourceDocument.objects.create(benchmark=bench, doc_id="ADK", title="AD K")
    qs = [Question.objects.create(benchmark=bench, question_id=f"Q{i}", text="?") for i in range(3)]
    original = services.key_edition_create(benchmark=bench, name="original", parent=None)
    for q in qs:
        services.key_entry_create(
            edition=original,
            question=q,
            answer=f"a{q.question_id}",
            citation_doc_id="ADK",
            citation_locator="1.1",
        )
    services.key_edition_publish(edition=original, user=None)
    return bench


@pytest.mark.sqlite
def test_effective_entries_follow_the_nearest_edition_in_two_queries(
    bench, django_assert_num_queries
):
    original = KeyEdition.objects.get(name="original")
    parent = original
    for n in range(1, 4):
        draft = services.key_edition_create(benchmark=bench, name=f"c{n}", parent=parent)
        services.key_entry_create(
            edition=draft,
            question=Question.objects.get(question_id="Q1"),
            answer=f"fix {n}",
            reason="factually_wrong",
        )
        services.key_edition_publish(edition=draft, user=None)
        parent = draft
    with django_assert_num_queries(2):
        effective = key_entries_for_edition(parent)
    by_qid = {Question.objects.get(pk=k).question_id: e.answer for k, e in effective.items()}
    assert by_qid == {"Q0": "aQ0", "Q1": "fix 3", "Q2": "aQ2"}
    assert [e.name for e in edition_chain(parent)] == ["original", "c1", "c2", "c3"]
    assert latest_published_edition(bench).name == "c3"
    assert get_edition(bench, None).name == "c3" and get_edition(bench, "c1").name == "c1"
    with pytest.raises(NotFoundError):
        get_edition(bench, "nope")


@pytest.mark.sqlite
def test_scored_entries_leave_out_removals_and_audit_exclusions_of_the_effective_entry(
    bench, django_assert_num_queries
):
    """One effective-entry rule in every shape, and one 'scored' rule (issue 16).

    c1 corrects Q1 and removes Q2; the original Q0 entry is excluded by audit. In c1:
    Q0 inherits the excluded entry (not scored), Q1's correction is scored, Q2 is a
    removal (not scored). In the original, Q1 and Q2 are scored, Q0 is not.
    """
    original = KeyEdition.objects.get(name="original")
    q0, q1, q2 = (Question.objects.get(question_id=f"Q{i}") for i in range(3))
    c1 = services.key_edition_create(benchmark=bench, name="c1", parent=original)
    fix = services.key_entry_create(edition=c1, question=q1, answer="fix", reason="other")
    services.key_entry_create(edition=c1, question=q2, removed=True, reason="other")
    services.key_edition_publish(edition=c1, user=None)
    excluded = KeyEntry.objects.get(edition=original, question=q0)
    services.key_entry_exclude(entry=excluded, reason="auditors_agree")

    instances = key_entries_for_edition(c1)
    with django_assert_num_queries(2):
        rows = key_entries_for_edition(c1, fields=("id", "removed"))
    assert {q: e.pk for q, e in instances.items()} == {q: r.id for q, r in rows.items()}
    assert rows[q2.pk].removed and rows[q1.pk].edition_id == c1.pk
    assert list(key_entries_for_edition(c1, question_ids=[q1.pk])) == [q1.pk]
    with django_assert_num_queries(3):
        assert scored_entries(c1) == {q1.pk: fix.pk}
    original_q1 = KeyEntry.objects.get(edition=original, question=q1)
    original_q2 = KeyEntry.objects.get(edition=original, question=q2)
    assert scored_entries(original) == {q1.pk: original_q1.pk, q2.pk: original_q2.pk}


@pytest.mark.sqlite
def test_get_benchmark_needs_a_name_only_when_there_are_several(bench):
    assert get_benchmark(None) == bench
    Benchmark.objects.create(name="two", grade_scale=[0, 1, 2])
    with pytest.raises(AmbiguousError) as info:
        get_benchmark(None)
    assert info.value.choices == ["svc", "two"]
    with pytest.raises(NotFoundError):
        get_benchmark("three")


@pytest.mark.sqlite
def test_key_entry_create_checks_its_inputs(bench):
    draft = services.key_edition_create(
        benchmark=bench, name="c1", parent=KeyEdition.objects.get(name="original")
    )
    q = Question.objects.get(question_id="Q0")
    with pytest.raises(NotFoundError):
        services.key_entry_create(edition=draft, question=q, citation_doc_id="ADZ")
    with pytest.raises(DomainError):
        services.key_entry_create(edition=draft, question=q, reason="because")
    entry = services.key_entry_create(edition=draft, question=q, removed=True, reason="other")
    assert entry.has_citation is False and entry.removed
    with pytest.raises(DomainError):
        services.key_entry_create(edition=draft, question=q, answer="again")


@pytest.mark.sqlite
def test_key_entry_exclude_is_idempotent(bench):
    entry = KeyEntry.objects.get(question__question_id="Q2", edition__name="original")
    exclusion, created = services.key_entry_exclude(entry=entry, reason="audit_both_adverse")
    assert created
    again, created = services.key_entry_exclude(entry=entry, reason="other")
    assert not created
    assert (again.pk, again.reason, again.excluded_at) == (
        exclusion.pk,
        "audit_both_adverse",
        exclusion.excluded_at,
    )
    with pytest.raises(DomainError):
        services.key_entry_exclude(entry=entry, reason=" ")
    with pytest.raises(DomainError, match="50 characters"):
        services.key_entry_exclude(entry=entry, reason="x" * 51)
    assert list(AuditExclusion.objects.values_list("key_entry_id", "reason")) == [
        (entry.pk, "audit_both_adverse")
    ]


@pytest.mark.sqlite
def test_admin_makes_published_editions_and_entries_read_only(bench):
    admin_user = get_user_model().objects.create_superuser("root", "r@example.org", "pw")
    request = RequestFactory().get("/")
    request.user = admin_user
    original = KeyEdition.objects.get(name="original")
    draft = services.key_edition_create(benchmark=bench, name="c1", parent=original)
    edition_admin = site._registry[KeyEdition]
    entry_admin = site._registry[KeyEntry]
    assert not edition_admin.has_change_permission(request, original)
    assert not edition_admin.has_delete_permission(request, original)
    assert edition_admin.has_change_permission(request, draft)
    entry = KeyEntry.objects.filter(edition=original).first()
    assert not entry_admin.has_change_permission(request, entry)
    assert not entry_admin.has_delete_permission(request, entry)
    from django.apps import apps

    from scoring.models import AuditVerdict, Grade, Judge, JudgeCall, ScoringRun

    for model in [
        *apps.get_app_config("questions").get_models(),
        Judge,
        ScoringRun,
        Grade,
        AuditVerdict,
        JudgeCall,
    ]:
        assert model in site._registry, f"{model.__name__} has no admin"
