"""Runs pages and API: admins only, live progress that stops polling when the run is done."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from scoring.models import ScoringRun
from scoring.runs import services
from scoring.runs.services import backends
from tests.test_rescore import CountingBackend
from tests.worker_fixtures import build_benchmark, publish_correction

pytestmark = pytest.mark.django_db


def _user(name: str, role: str | None) -> User:
    user = User.objects.create_user(name, password="x-very-long-pass-1")
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def admin_client(client):
    client.force_login(_user("admin1", "admin"))
    return client


@pytest.fixture
def fake_backend(monkeypatch):
    backend = CountingBackend()
    monkeypatch.setattr(backends, "judge_backend", lambda judge: backend)
    return backend


@pytest.fixture
def data():
    return build_benchmark(n_questions=4, n_models=3)


@pytest.mark.parametrize("role", ["reviewer", "editor", None])
def test_runs_pages_and_api_are_for_admins_only(client, data, role):
    """The list, starting, cancelling and resuming are an admin's; an editor may watch one
    run read-only (issue 30 item 5: test_editors_watch_a_run_read_only)."""
    run = services.scoring_run_create(
        edition=data.original, judges=data.auditors, kind="audit", enqueue=False
    )
    client.force_login(_user("someone", role))
    watch = (
        []
        if role == "editor"
        else [
            ("scoring:run-detail", {"pk": run.pk}, "Only an editor or an admin may watch"),
            ("scoring:run-progress", {"pk": run.pk}, "Only an editor or an admin may watch"),
        ]
    )
    for name, kwargs, why in [
        ("scoring:runs", {}, "Only an admin may see or start re-scoring runs."),
        *watch,
    ]:
        refused = client.get(reverse(name, kwargs=kwargs))
        assert refused.status_code == 403
        # The site's own "Not allowed" page (templates/403.html), not Django's bare one.
        assert [t.name for t in refused.templates][:2] == ["403.html", "base.html"]
        assert why in refused.content.decode()
    for name, kwargs in [
        ("scoring:run-create", {}),
        ("scoring:run-cancel", {"pk": run.pk}),
        ("scoring:run-resume", {"pk": run.pk}),
    ]:
        assert (
            client.post(reverse(name, kwargs=kwargs), {"edition": data.original.pk}).status_code
            == 403
        )
    assert client.get("/api/scoring/runs/").status_code == 403
    assert client.post("/api/scoring/runs/", {"kind": "grade"}).status_code == 403
    assert ScoringRun.objects.count() == 1
    run.refresh_from_db()
    assert run.status == "pending"


def test_anonymous_is_sent_to_login_and_api_answers_403(client):
    assert client.get("/runs/").status_code == 302
    assert client.get("/api/scoring/runs/").status_code in (401, 403)


def test_deactivated_admin_is_refused(client, data):
    user = _user("gone", "admin")
    user.is_active = False
    user.save()
    client.force_login(user)
    response = client.get("/runs/")
    assert response.status_code in (302, 403)


def test_runs_page_shows_progress_and_polls_only_while_running(admin_client, data):
    run = services.scoring_run_create(
        edition=data.original, judges=data.auditors, kind="audit", enqueue=False
    )
    ScoringRun.objects.filter(pk=run.pk).update(status="running", done=3)
    page = admin_client.get("/runs/").content.decode()
    assert f'<progress class="progress" max="{run.needed}" value="3"' in page
    assert 'hx-trigger="every 1s"' in page and "3 / 8" in page
    assert "Re-score" in page and "Audit key" in page and 'name="csrfmiddlewaretoken"' in page

    fragment = admin_client.get(f"/runs/{run.pk}/progress/").content.decode()
    assert fragment.startswith(f'<div id="run-progress-{run.pk}"')
    assert 'hx-trigger="every 1s"' in fragment
    assert "<strong>3</strong> of <strong>8</strong> pairs settled" in fragment

    ScoringRun.objects.filter(pk=run.pk).update(needed=1, done=0)
    fragment = admin_client.get(f"/runs/{run.pk}/progress/").content.decode()
    assert "<strong>0</strong> of <strong>1</strong> pair settled" in fragment
    ScoringRun.objects.filter(pk=run.pk).update(needed=8, done=3)

    ScoringRun.objects.filter(pk=run.pk).update(status="complete", done=8, graded=8)
    fragment = admin_client.get(f"/runs/{run.pk}/progress/").content.decode()
    assert "hx-trigger" not in fragment and 'value="8"' in fragment and "complete" in fragment
    table = admin_client.get("/runs/", HTTP_HX_REQUEST="true")
    assert table["Vary"].count("HX-Request") == 1
    assert "hx-trigger" not in table.content.decode() and "<h1>" not in table.content.decode()


def test_runs_list_takes_a_fixed_number_of_queries(
    admin_client, data, django_assert_max_num_queries
):
    for _ in range(5):
        services.scoring_run_create(
            edition=data.original, judges=data.auditors, kind="audit", enqueue=False
        )
    with django_assert_max_num_queries(12):
        response = admin_client.get("/runs/")
    assert response.content.decode().count("<progress") == 5
    with django_assert_max_num_queries(8):
        response = admin_client.get("/api/scoring/runs/")
    assert response.json()["count"] == 5


def test_rescore_button_creates_a_run_and_enqueues_it_after_commit(
    admin_client, data, fake_backend, django_capture_on_commit_callbacks
):
    corrected = publish_correction(data)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = admin_client.post("/runs/new/", {"edition": corrected.pk, "kind": "grade"})
    run = ScoringRun.objects.get()
    assert response.status_code == 303 and response["Location"] == f"/runs/{run.pk}/"
    assert (run.status, run.needed, len(fake_backend.calls)) == (
        "pending",
        6,
        0,
    )  # not before commit
    assert len(callbacks) == 1
    callbacks[0]()
    run.refresh_from_db()
    assert (run.status, run.graded, len(fake_backend.calls)) == ("complete", 6, 6)
    detail = admin_client.get(f"/runs/{run.pk}/").content.decode()
    assert "Judge-call ledger" in detail and "No failed pair." in detail
    assert "<dt>Calls sent</dt><dd>6</dd>" in detail


def test_run_detail_lists_failed_pairs(
    admin_client, data, monkeypatch, settings, django_capture_on_commit_callbacks
):
    settings.SNAGLIST_RESCORE_MAX_RETRIES = 0
    backend = CountingBackend(unavailable_for=10**6)
    monkeypatch.setattr(backends, "judge_backend", lambda judge: backend)
    corrected = publish_correction(data)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.scoring_run_create(edition=corrected, judges=data.judges[:1])
    page = admin_client.get(f"/runs/{run.pk}/").content.decode()
    assert page.count("HTTP 429 from fake") == 3 and "badge bad" in page


def test_cancel_button_stops_an_active_run(admin_client, data):
    run = services.scoring_run_create(
        edition=data.original, judges=data.auditors, kind="audit", enqueue=False
    )
    response = admin_client.post(f"/runs/{run.pk}/cancel/")
    assert response.status_code == 303  # See Other (core.views.done)
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_api_create_detail_and_schema(
    admin_client, data, fake_backend, django_capture_on_commit_callbacks
):
    publish_correction(data)
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            "/api/scoring/runs/",
            {"kind": "grade", "judges": ["j1"]},
            content_type="application/json",
        )
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["edition"], body["judges"], body["needed"], body["status"]) == (
        "corrected-1",
        ["j1"],
        3,
        "pending",
    )
    detail = admin_client.get(f"/api/scoring/runs/{body['id']}/").json()
    assert (detail["status"], detail["graded"], detail["ledger"]["calls"]) == ("complete", 3, 3)
    bad = admin_client.post(
        "/api/scoring/runs/", {"judges": ["zz"]}, content_type="application/json"
    )
    assert bad.status_code == 400 and "zz" in bad.content.decode()
    schema = admin_client.get("/api/schema/").content.decode()
    assert "/api/scoring/runs/" in schema and "/api/scoring/runs/{id}/" in schema


def test_run_page_resume_and_cancel_buttons_go_when_the_run_ends(admin_client, data):
    run = services.scoring_run_create(
        edition=data.original, judges=data.auditors, kind="audit", enqueue=False
    )
    ScoringRun.objects.filter(pk=run.pk).update(status="running", done=3)
    detail = admin_client.get(f"/runs/{run.pk}/").content.decode()
    assert "Cancel run" in detail and f"/runs/{run.pk}/progress/?actions=1" in detail
    polled = admin_client.get(f"/runs/{run.pk}/progress/?actions=1").content.decode()
    assert "Cancel run" in polled and "Resume" in polled
    ScoringRun.objects.filter(pk=run.pk).update(status="complete", done=8, graded=8)
    polled = admin_client.get(f"/runs/{run.pk}/progress/?actions=1").content.decode()
    assert "Cancel run" not in polled and "Resume" not in polled and "complete" in polled


def test_editors_watch_a_run_read_only(client, data):
    """Issue 30 item 5: an editor opens a run's page and its progress (no Resume or Cancel,
    no list of all runs); the published edition's page links the run for them."""
    run = services.scoring_run_create(
        edition=data.original, judges=data.judges, kind="grade", enqueue=False
    )
    client.force_login(_user("ed", "editor"))
    page = client.get(reverse("scoring:run-detail", kwargs={"pk": run.pk}))
    body = page.content.decode()
    assert page.status_code == 200
    assert f"Run {run.pk}:" in body and "watching this run read-only" in body
    assert "Cancel run" not in body and "run-resume" not in body and 'href="/runs/"' not in body
    progress = client.get(
        reverse("scoring:run-progress", kwargs={"pk": run.pk}) + "?actions=1"
    ).content.decode()
    assert "Cancel run" not in progress
    assert client.post(reverse("scoring:run-cancel", kwargs={"pk": run.pk})).status_code == 403
    run.refresh_from_db()
    assert run.status == "pending"
    # the edition's page names the re-scoring run as a link for the editor
    from django.utils import timezone

    from scoring.models import RescoreRequest

    RescoreRequest.objects.create(edition=data.original, run=run, started_at=timezone.now())
    edition_page = client.get(
        reverse("review:edition", args=[data.benchmark.name, data.original.name])
    ).content.decode()
    assert f'<a href="/runs/{run.pk}/">run {run.pk}</a>' in edition_page
