"""Review pages: what they show, htmx fragments, 409 on stale forms, bounded query counts."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.utils import timezone

from questions.models import Section
from review import services
from review.models import ReviewItem
from review.triage import triage_run
from scoring.models import Grade
from tests.factories import ReviewItemFactory
from tests.review_fixtures import *  # noqa: F403
from tests.review_fixtures import build_world, set_grades, set_verdicts
from tests.test_serving_cost import ITEM_PAGE_QUERIES, _session_queries, _sqlite

pytestmark = pytest.mark.django_db


def make_items(world, n):
    return ReviewItem.objects.bulk_create(
        [
            ReviewItem(
                benchmark=world.benchmark,
                question=world.q(i),
                source="single_auditor_flag",
                sources=["single_auditor_flag"],
                priority=200 + i,
            )
            for i in range(n)
        ]
    )


@pytest.mark.parametrize("n", [3, 30])
def test_queue_query_count_does_not_grow(client, reviewer, django_assert_max_num_queries, n):
    world = build_world(n_questions=n, n_models=2, with_grades=False, with_audits=False)
    make_items(world, n)
    services.review_item_claim(item=ReviewItem.objects.order_by("id")[1], user=reviewer)
    client.force_login(reviewer)
    client.get("/review/")  # the session in the cache (cached_db with Redis)
    # 10 since the issue 18 load work (tests/test_serving_cost.py), + a database session
    with django_assert_max_num_queries(10 + _session_queries()):
        response = client.get("/review/?benchmark=demo")
    body = response.content.decode()
    assert response.status_code == 200
    assert f"{n} items shown" in body
    assert "Claimed: 1" in body and f"Open: {n - 1}" in body
    assert 'data-key="n"' in body and 'data-key="c"' in body
    assert response["Vary"].count("HX-Request") == 1


def test_queue_htmx_returns_results_fragment_and_filters(client, reviewer, world):
    make_items(world, 4)
    ReviewItem.objects.filter(question=world.q(0)).update(
        source="judge_flag", sources=["judge_flag"]
    )
    client.force_login(reviewer)
    response = client.get("/review/?source=judge_flag", HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert (
        "<html" not in body and "1 item shown" in body and "Q0000" in body and "Q0001" not in body
    )
    # A history restore (Back with no cache) gets the full page.
    full = client.get(
        "/review/?source=judge_flag", HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true"
    )
    assert "<html" in full.content.decode()
    # Every hx-get has a real href: the filter form also has method=get action=/review/.
    page = client.get("/review/").content.decode()
    assert 'action="/review/"' in page and 'hx-push-url="true"' in page


def test_queue_paginates(client, reviewer):
    world = build_world(n_questions=55, n_models=1, with_grades=False, with_audits=False)
    make_items(world, 55)
    client.force_login(reviewer)
    body = client.get("/review/").content.decode()
    assert "Page 1 of 2" in body and "page=2" in body
    # the queue's links swap only its results (htmx), keeping the page usable without JS
    assert 'href="?page=2" hx-get="?page=2" hx-target="#queue-results"' in body
    assert "Page 2 of 2" in client.get("/review/?page=2").content.decode()


def test_queue_counts_follow_the_assignee_me_filter(client, reviewer, editor2, world):
    """Assignee "me": the counts per status and the page count are the signed-in user's (they
    read 0 everywhere: "me" was taken for a user name where the counts were made)."""
    items = make_items(world, 3)
    services.review_item_claim(item=items[0], user=reviewer)
    services.review_item_claim(item=items[1], user=editor2)
    client.force_login(reviewer)
    response = client.get("/review/?assignee=me")
    counts = response.context["counts"]
    assert (counts["claimed"], counts["open"]) == (1, 0)
    assert "1 item shown" in response.content.decode()


def test_queue_c_shortcut_is_on_the_top_claimable_row(client, reviewer, editor2, world):
    items = make_items(world, 3)
    top = max(items, key=lambda i: (i.priority, -i.pk))
    services.review_item_claim(item=top, user=editor2)
    client.force_login(reviewer)
    body = client.get("/review/").content.decode()
    assert body.count('data-key="c"') == 1
    rows = body.split("<tr>")[2:]
    assert 'data-key="c"' not in rows[0] and 'data-key="c"' in rows[1]


def test_next_button_claims_and_opens_the_item(client, reviewer, world):
    items = make_items(world, 3)
    client.force_login(reviewer)
    response = client.post("/review/next/", {"benchmark": "demo"})
    top = max(items, key=lambda i: i.priority)
    assert response.status_code == 303 and response["Location"] == f"/review/items/{top.pk}/"
    assert ReviewItem.objects.get(pk=top.pk).claimed_by == reviewer


def test_review_page_shows_everything_needed_to_decide(client, reviewer, db):
    world = build_world(n_questions=4, n_models=5)
    set_verdicts(world, 2, "correct", "wrong")
    set_grades(world, 2, 0, models=world.models[:4])
    Grade.objects.filter(
        response__question=world.q(2), judge=world.judges[0], response__model=world.models[0]
    ).update(flag=True, flag_reason="Key cites a withdrawn clause")
    triage_run(benchmark=world.benchmark)
    item = ReviewItem.objects.get(question=world.q(2))
    client.force_login(reviewer)
    body = client.get(f"/review/items/{item.pk}/").content.decode()
    assert "What is the minimum bearing for lintel type 2?" in body
    assert "102 mm" in body  # key answer
    assert "<mark>minimum bearing is 102 mm</mark>" in body  # quote highlighted in the passage
    assert "2004 edition incorporating 2013 amendments" in body and "Current" in body
    # neighbouring passages, in reading order, open in place (issue 18)
    assert "← Previous: <strong>1.1</strong>" in body and "Next: <strong>1.3</strong>" in body
    assert 'a2</strong> <span class="badge bad">Wrong</span> a2 says wrong' in body
    assert "Key cites a withdrawn clause" in body
    assert "4 of 5 models graded 0 by both judges" in body
    assert body.count('class="against"') == 4
    # each piece of evidence says which key edition's triage found it
    assert '<span class="muted">key edition original, ' in body
    assert 'id="shortcut-help"' in body and 'data-key="c"' in body
    # Claimed: the forms and the outcome shortcuts appear.
    item = services.review_item_claim(item=item, user=reviewer)
    body = client.get(f"/review/items/{item.pk}/").content.decode()
    for key in ("a", "e", "r"):
        assert f'data-key="{key}"' in body
    # the decision panel (issue 18) holds the citation questions and the outcome
    assert "Does the locator exist in that edition?" in body and 'id="decide-form"' in body
    assert f'name="version" value="{item.version}"' in body


def test_review_page_query_count_is_bounded(client, reviewer, django_assert_max_num_queries):
    world = build_world(n_questions=3, n_models=18)
    item = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    services.review_item_claim(item=item, user=reviewer)
    client.force_login(reviewer)
    client.get("/review/")
    # tests/test_serving_cost.py's bound, + a database session, + SQLite's second
    # neighbour query
    with django_assert_max_num_queries(ITEM_PAGE_QUERIES + _session_queries() + _sqlite()):
        assert client.get(f"/review/items/{item.pk}/").status_code == 200


def test_missing_locator_says_so_and_lists_nearest(client, reviewer, world):
    Section.objects.filter(document=world.documents["ADA"], locator="1.1").update(locator="1.10")
    item = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    client.force_login(reviewer)
    body = client.get(f"/review/items/{item.pk}/").content.decode()
    assert "Locator “1.1” was not found in AD A." in body
    assert "<code>1.10</code>" in body


def test_htmx_outcome_errors_return_only_the_fragment_next_to_fields(client, reviewer, world):
    item = services.review_item_claim(
        item=ReviewItemFactory(question=world.q(1), benchmark=world.benchmark), user=reviewer
    )
    client.force_login(reviewer)
    response = client.post(
        f"/review/items/{item.pk}/propose/",
        {"version": item.version, "action": "correct", "answer": "", "reason": ""},
        HTTP_HX_REQUEST="true",
    )
    body = response.content.decode()
    assert response.status_code == 422
    assert "<html" not in body and 'id="outcome-form-box"' in body
    assert "A correction or removal needs a reason." in body
    assert 'class="field has-error"' in body
    # Without htmx the whole page comes back with the errors.
    full = client.post(
        f"/review/items/{item.pk}/propose/", {"version": item.version, "action": "remove"}
    )
    assert full.status_code == 422 and "<html" in full.content.decode()


def test_stale_form_gets_409_with_what_changed(client, reviewer, world):
    item = services.review_item_claim(
        item=ReviewItemFactory(question=world.q(1), benchmark=world.benchmark), user=reviewer
    )
    stale = item.version
    services.review_item_renew(item=item, user=reviewer)
    client.force_login(reviewer)
    response = client.post(
        f"/review/items/{item.pk}/check/",
        {
            "version": stale,
            "locator_exists": "yes",
            "supports": "yes",
            "edition_in_force": "yes",
            "amended": "no",
        },
        HTTP_HX_REQUEST="true",
    )
    body = response.content.decode()
    assert response.status_code == 409
    assert "This item changed since you opened it." in body and "review_item.renew" in body
    assert not item.checks.exists()


def test_successful_htmx_post_redirects_the_client(client, reviewer, world):
    item = services.review_item_claim(
        item=ReviewItemFactory(question=world.q(1), benchmark=world.benchmark), user=reviewer
    )
    client.force_login(reviewer)
    response = client.post(
        f"/review/items/{item.pk}/check/",
        {
            "version": item.version,
            "locator_exists": "no",
            "supports": "no",
            "edition_in_force": "withdrawn",
            "amended": "yes",
            "note": "Gone",
        },
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200 and response["HX-Redirect"] == f"/review/items/{item.pk}/"
    check = item.checks.get()
    assert (check.locator_exists, check.edition_in_force, check.note) == ("no", "withdrawn", "Gone")


def test_full_workflow_and_edition_page_shows_diff(client, reviewer, editor, editor2, world):
    item = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    client.force_login(reviewer)
    client.post(f"/review/items/{item.pk}/claim/")
    client.post(
        f"/review/items/{item.pk}/propose/",
        {
            "version": 2,
            "action": "correct",
            "answer": "150 mm",
            "citation_doc_id": "ADA",
            "citation_locator": "1.3",
            "reason": "amended_or_repealed",
        },
    )
    client.force_login(editor2)
    body = client.get("/review/approvals/").content.decode()
    # word-level diff (issue 18): only the figure is marked; the new answer also reads whole
    assert '<del class="diff-old">101</del> <ins class="diff-new">150</ins> mm' in body
    assert "Reads: 150 mm" in body
    proposal = item.proposals.get()
    assert (
        client.post(f"/review/proposals/{proposal.pk}/approve/", {"comment": "Agreed"}).status_code
        == 303
    )
    client.force_login(editor)
    assert client.post("/editions/demo/corrected-1/publish/").status_code == 303
    body = client.get("/editions/demo/corrected-1/").content.decode()
    assert "Published" in body and "Changes from original" in body
    assert "Proposed by reviewer" in body and "approved by editor2" in body and "Agreed" in body
    # The publish returned before any worker started the re-scoring (its task is sent after
    # commit): the page says it is pending, then what became of it.
    assert "Re-scoring is pending" in body
    from scoring.runs.services import rescore_request_start

    rescore_request_start(edition_id=world.benchmark.editions.get(name="corrected-1").pk)
    body = client.get("/editions/demo/corrected-1/").content.decode()
    assert "Re-scoring is pending" not in body
    assert "Re-scoring after publishing" in body
    listing = client.get("/editions/demo/").content.decode()
    assert "corrected-1" in listing and "original" in listing
    history = client.get(f"/review/items/{item.pk}/").content.decode()
    # The history panel names each action in plain English (core.actions.Action's labels).
    for action in ("claimed the item", "sent a proposal for approval", "closed the item"):
        assert action in history


def _propose(client, item, **fields):
    return client.post(
        f"/review/items/{item.pk}/propose/",
        {"version": item.version, "action": "correct", "answer": "150 mm", **fields},
    )


def test_the_claim_box_says_what_became_of_a_decided_item(client, reviewer, world):
    """After a proposal the item is no longer anybody's claim: the box says it awaits an
    editor's approval (it said "You hold this item"); closed, it says how it closed."""
    item = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    client.force_login(reviewer)
    client.post(f"/review/items/{item.pk}/claim/")
    item.refresh_from_db()
    _propose(client, item, citation_doc_id="ADA", citation_locator="1.1", reason="factually_wrong")
    box = client.get(f"/review/items/{item.pk}/").content.decode().split('id="claim-box"')[1]
    box = box.split("</div>")[0]
    assert "Awaiting an editor's approval of reviewer's correction" in box
    assert "You hold this item" not in box and "Claimed by" not in box
    item.refresh_from_db()
    ReviewItem.objects.filter(pk=item.pk).update(status="confirmed")
    box = client.get(f"/review/items/{item.pk}/").content.decode().split('id="claim-box"')[1]
    assert "Closed: key confirmed." in box.split("</div>")[0]


def test_approvals_page_shows_missing_checks_and_unknown_locators(client, reviewer, editor2, world):
    """Rule 5: the editor sees whether the reviewer recorded a citation check and whether
    the proposed locator is in the source index (ADA has paragraphs 1.0 ... 1.n+1)."""
    unchecked = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    checked = ReviewItemFactory(question=world.q(2), benchmark=world.benchmark)
    client.force_login(reviewer)
    for item in (unchecked, checked):
        client.post(f"/review/items/{item.pk}/claim/")
        item.refresh_from_db()
    _propose(
        client,
        unchecked,
        citation_doc_id="ADA",
        citation_locator="1.99",
        reason="factually_wrong",
    )
    client.post(
        f"/review/items/{checked.pk}/check/",
        {
            "version": checked.version,
            "locator_exists": "yes",
            "supports": "partly",
            "edition_in_force": "yes",
            "amended": "no",
            "note": "Table moved",
        },
    )
    checked.refresh_from_db()
    _propose(
        client, checked, citation_doc_id="ADA", citation_locator="1.3", reason="factually_wrong"
    )
    assert unchecked.proposals.count() == 1 and checked.proposals.count() == 1

    client.force_login(editor2)
    body = client.get("/review/approvals/").content.decode()
    first, second = body.split('aria-labelledby="p-')[1:3]
    assert "No citation check is recorded on this item" in first
    assert "The proposed citation ADA 1.99 is not in the document's source index." in first
    assert "Nearest locators: 1.7, 1.6" in first  # the fixture's last paragraphs
    assert "No citation check is recorded" not in second
    assert "Citation check by reviewer on " in second
    assert "supports the key: partly" in second and "Check note: Table moved" in second
    assert "The proposed locator ADA 1.3 is in the source index." in second


def test_history_lists_each_action_once_and_says_who_sent_the_item_back(
    client, reviewer, editor2, world
):
    import re

    item = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    client.force_login(reviewer)
    client.post(f"/review/items/{item.pk}/claim/")
    item.refresh_from_db()
    client.post(
        f"/review/items/{item.pk}/check/",
        {
            "version": item.version,
            "locator_exists": "yes",
            "supports": "no",
            "edition_in_force": "yes",
            "amended": "no",
        },
    )
    item.refresh_from_db()
    _propose(client, item, citation_doc_id="ADA", citation_locator="1.3", reason="other")
    client.force_login(editor2)
    proposal = item.proposals.get()
    client.post(f"/review/proposals/{proposal.pk}/reject/", {"comment": "Cite Table 2"})
    client.force_login(reviewer)
    history = client.get(f"/review/items/{item.pk}/").content.decode()
    # the reviewer sees the rejection at the top of the page, not only in the history
    banner = history[history.index('<div class="message message-warning" role="status">') :]
    assert (
        banner.split("</div>")[0]
        .split("\n")[1]
        .strip()
        .startswith("<strong>Correction rejected</strong> by editor2 on ")
    )
    assert ". Their comment: “Cite Table 2”" in banner.split("</div>")[0]
    panel = history[history.index('id="h-history"') :]
    lines = [
        " ".join(re.sub(r"<[^>]+>", " ", li).split())
        for li in re.findall(r"<li>(.*?)</li>", panel[: panel.index("</ol>")], re.S)
    ]
    actions = [line.split(" ", 4)[-1] for line in lines]  # after "30 November 2026, 14:22"
    assert actions == [
        "reviewer claimed the item → claimed (reviewer)",
        "reviewer recorded a citation check → claimed (reviewer)",
        "reviewer sent a proposal for approval → awaiting approval (reviewer)",
        "editor2 rejected the proposal → rejected: “Cite Table 2”",
        "editor2 sent the item back to its reviewer after a rejection → claimed (reviewer)",
    ], lines


def test_key_page_lists_every_question_with_its_entry_and_status_per_edition(
    client, reviewer, world
):
    """The original key has every question; corrected-1 changes Q0001's answer and
    removes Q0002, and the auditors exclude corrected-1's Q0001 entry only."""
    from questions import services as question_services
    from questions.models import AuditExclusion, KeyEdition

    original = KeyEdition.objects.get(benchmark=world.benchmark, name="original")
    corrected = question_services.key_edition_create(
        benchmark=world.benchmark, name="corrected-1", parent=original
    )
    fixed = question_services.key_entry_create(
        edition=corrected, question=world.q(1), answer="150 mm", reason="factually_wrong"
    )
    question_services.key_entry_create(
        edition=corrected, question=world.q(2), removed=True, reason="ungradeable"
    )
    question_services.key_edition_publish(edition=corrected, user=None)
    AuditExclusion.objects.create(key_entry=fixed, reason="auditors_agree")
    n = world.benchmark.questions.count()
    client.force_login(reviewer)

    body = client.get("/editions/demo/original/key/").content.decode()
    assert f"{n} questions." in body and body.count("Scored</span>") == n

    body = client.get("/editions/demo/corrected-1/key/").content.decode()
    assert f"{n} questions." in body
    assert body.count("Scored</span>") == n - 2
    assert body.count("Excluded by audit</span>") == 1
    assert body.count("Removed by review</span>") == 1
    assert "150 mm" in body and "101 mm" not in body  # Q0001's corrected answer only

    only = client.get("/editions/demo/corrected-1/key/?status=excluded").content.decode()
    assert "1 question." in only and "Q0001" in only and "Q0002" not in only
    found = client.get("/editions/demo/corrected-1/key/?q=q0003").content.decode()
    assert "1 question." in found and "Q0003" in found


def test_approvals_page_query_count_does_not_grow_with_proposals(client, reviewer, editor2, world):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def propose(i):
        item = ReviewItemFactory(question=world.q(i), benchmark=world.benchmark)
        client.force_login(reviewer)
        client.post(f"/review/items/{item.pk}/claim/")
        item.refresh_from_db()
        _propose(client, item, citation_doc_id="ADA", citation_locator=f"1.{i}", reason="other")
        assert item.proposals.count() == 1

    def queries():
        client.force_login(editor2)
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/review/approvals/").status_code == 200
        return len(ctx.captured_queries)

    propose(1)
    # The first view computes the edition's per-question sums for the impact column
    # (scoring.board.impact.edition_contributions) and caches them by data version; compare
    # the steady state.
    queries()
    one = queries()
    for i in (2, 3, 4):
        propose(i)
    assert queries() == one


def test_a_refused_htmx_save_says_why_in_place_of_the_form(
    client, reviewer, editor, editor2, world
):
    """The item was reassigned while the reviewer had it open: the htmx save gets a 403
    fragment that replaces the form (review.js swaps 403), not a silent failure."""
    item = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    item = services.review_item_claim(item=item, user=reviewer)
    services.review_item_reassign(item=item, user=editor, assignee=editor2, version=item.version)
    client.force_login(reviewer)
    response = client.post(
        f"/review/items/{item.pk}/check/",
        {
            "version": item.version,
            "locator_exists": "yes",
            "supports": "yes",
            "edition_in_force": "yes",
            "amended": "no",
        },
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL=f"http://testserver/review/items/{item.pk}/",
    )
    assert response.status_code == 409  # another reviewer holds it: as the API answers
    body = response.content.decode()
    assert body.startswith('<div class="conflict" role="alert" id="forbidden">')
    assert "<strong>Not saved.</strong> editor2 holds this item now" in body
    assert f'href="http://testserver/review/items/{item.pk}/"' in body
    assert not item.checks.exists()


def test_log_page_filters(client, admin, reviewer, world):
    item = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    services.review_item_claim(item=item, user=reviewer)
    services.review_item_release(item=item, user=reviewer)
    client.force_login(admin)
    body = client.get("/log/?action=review_item.release").content.decode()
    assert "1 entry" in body and "review_item.release" in body
    # the action's label from core.actions, beside the stored name
    assert '<td>released the item <span class="muted">review_item.release</span></td>' in body
    assert '<option value="review_item.release" selected>released the item</option>' in body
    # What changed, in one line per field; the whole record folds away.
    assert "<li><code>status</code>: claimed → open</li>" in body
    assert "<li><code>claimed_by</code>: reviewer → —</li>" in body
    assert "<summary>Whole record</summary>" in body
    assert "2 entries" in client.get("/log/?actor=reviewer&date_from=2000-01-01").content.decode()
    assert "0 entries" in client.get("/log/?actor=nobody&date_to=not-a-date").content.decode()
    # the date as the page shows it works; one that is not a date is reported, not ignored
    today = timezone.localdate().strftime("%d/%m/%Y")
    assert "2 entries" in client.get(f"/log/?actor=reviewer&date_from={today}").content.decode()
    assert "0 entries" in client.get("/log/?actor=reviewer&date_from=01/01/2999").content.decode()
    bad = client.get("/log/?date_from=2026-13-01&date_to=garbage").content.decode()
    assert "Not a date, so not applied: From &#x27;2026-13-01&#x27;, To &#x27;garbage&#x27;." in bad


def test_create_demo_users_prints_fresh_passwords(capsys, db):
    call_command("create_demo_users")
    first = dict(line.split(": ") for line in capsys.readouterr().out.strip().splitlines())
    call_command("create_demo_users")
    second = dict(line.split(": ") for line in capsys.readouterr().out.strip().splitlines())
    assert list(first) == ["reviewer", "editor", "editor2", "admin"]
    assert all(first[u] != second[u] for u in first)
    from django.contrib.auth.models import User

    from core.roles import Role, user_roles

    user = User.objects.get(username="editor2")
    assert user.check_password(second["editor2"]) and not user.check_password(first["editor2"])
    assert user_roles(user) == {Role.REVIEWER, Role.EDITOR}


def test_every_logged_action_has_its_own_label():
    """The audit log's Action filter listed "recorded a citation check" twice (the item's
    entry and the check's own): each action's label now tells it apart."""
    from core.actions import Action

    labels = [label for _, label in Action.choices]
    assert sorted({x for x in labels if labels.count(x) > 1}) == []


def test_reassign_offers_the_names_of_people_who_can_review(
    client, reviewer, editor, outsider, world
):
    """'Reassign to' was a bare text box: it now lists (datalist) the active users holding the
    reviewer role, so an editor picks a name instead of guessing its spelling."""
    item = ReviewItemFactory(question=world.q(1), benchmark=world.benchmark)
    client.force_login(editor)
    body = client.get(f"/review/items/{item.pk}/").content.decode()
    import re

    names = re.findall(r'<option value="([^"]+)"></option>', body.split('id="assignee-names"')[1])
    assert reviewer.username in names and editor.username in names
    assert outsider.username not in names  # no role: cannot review
    assert names == sorted(names)
