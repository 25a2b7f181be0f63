"""Readers report key errors on a public benchmark (issue 22 item 3), on the `tiny` fixture.

No account: the report becomes `reported` evidence of the question's review item. Rate and
size limits, spam marking (logged), the reply address for editors only, and every XSS
payload of tests/data/xss-payloads.txt escaped wherever a report is shown.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils.html import escape

from core.models import AuditLogEntry
from questions.models import Benchmark, Question
from questions.services import benchmark_publicity_set
from review.errors import InvalidTransitionError, NotAllowedError
from review.models import Evidence, ReaderReport, ReviewItem
from review.services import reader_report_create, reader_report_mark_spam
from tests.test_leaderboard import _private_cache, build_tiny  # noqa: F401
from tests.test_xss import ALL, live_markup

pytestmark = pytest.mark.django_db

FORM = "/public/tiny/questions/Q4/report/"
GOOD = {
    "what": "The key says 2.5 m; the current edition says 2.6 m.",
    "source_text": "Approved Document K, 2013 edition, paragraph 1.4",
    "email": "reader@example.org",
}


def _user(name: str, *groups: str) -> User:
    user = User.objects.create_user(name, password="x-very-long-pass-1")
    for g in groups:
        user.groups.add(Group.objects.get_or_create(name=g)[0])
    return user


@pytest.fixture
def public(db):
    build_tiny()
    bench = Benchmark.objects.get(name="tiny")
    benchmark_publicity_set(
        benchmark=bench, user=_user("an-admin", "admin"), public=True, credit_reviewers=False
    )
    return bench


def _post(client: Client, data: dict, address: str = "192.0.2.1", path: str = FORM):
    return client.post(path, data, REMOTE_ADDR=address)


# ----------------------------------------------------------------------------- filing
def test_anyone_reports_an_error_and_it_becomes_a_reported_item(client, public):
    page = client.get(FORM)
    assert page.status_code == 200
    body = page.content.decode()
    assert "question Q4" in body and 'name="what"' in body
    assert "Answer Q4" not in body, "the form shows no key answer that is not already published"
    response = _post(client, GOOD)
    assert response.status_code == 303 and response["Location"] == FORM + "?sent=1"
    assert "Thank you" in client.get(response["Location"]).content.decode()
    item = ReviewItem.objects.get(question__question_id="Q4", question__benchmark=public)
    assert item.source == "reported" and item.sources == ["reported"]
    assert item.reasons.startswith("reported by a reader: The key says 2.5 m")
    evidence = item.evidence.get()
    assert evidence.kind == "reported"
    assert evidence.detail["note"] == GOOD["what"]
    assert evidence.detail["source"] == GOOD["source_text"]
    assert "reader@example.org" not in str(evidence.detail), "the address is not evidence"
    report = ReaderReport.objects.get()
    assert (report.item, report.evidence, report.email) == (item, evidence, "reader@example.org")
    log = AuditLogEntry.objects.get(action="review_item.create", target_id=str(item.pk))
    assert log.actor is None and log.actor_label == "system"


def test_a_second_report_adds_evidence_to_the_open_item(client, public):
    assert _post(client, GOOD).status_code == 303
    assert _post(client, {**GOOD, "what": "Also the citation is wrong."}).status_code == 303
    assert ReviewItem.objects.filter(question__question_id="Q4").count() == 1
    item = ReviewItem.objects.get(question__question_id="Q4")
    assert item.evidence.count() == 2 and item.reader_reports.count() == 2
    assert AuditLogEntry.objects.filter(action="review_item.add_evidence").count() == 1


def test_a_private_benchmark_takes_no_reports(client, public):
    build_tiny("tiny-private")
    response = _post(client, GOOD, path="/public/tiny-private/questions/Q4/report/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    question = Question.objects.get(benchmark__name="tiny-private", question_id="Q4")
    with pytest.raises(NotAllowedError):
        reader_report_create(question=question, what="x", address="192.0.2.9")
    assert not ReaderReport.objects.exists()


def test_an_unknown_question_is_404(client, public):
    assert client.get("/public/tiny/questions/Q99/report/").status_code == 404


# ----------------------------------------------------------------------------- limits
def test_size_limits_name_the_field(client, public):
    response = _post(client, {**GOOD, "what": "x" * 2001})
    assert response.status_code == 422
    assert "at most 2000 characters (it has 2001)" in response.content.decode()
    response = _post(client, {**GOOD, "source_text": "y" * 1001})
    assert response.status_code == 422 and "at most 1000 characters" in response.content.decode()
    response = _post(client, {**GOOD, "email": "not-an-address"})
    assert response.status_code == 422 and "Enter a valid email address" in (
        response.content.decode()
    )
    response = _post(client, {**GOOD, "what": "   "})
    assert response.status_code == 422 and "This field is required" in response.content.decode()
    assert not ReaderReport.objects.exists()
    # The service holds the same limits whatever the caller.
    from review.errors import InvalidInputError

    q = Question.objects.get(benchmark=public, question_id="Q1")
    with pytest.raises(InvalidInputError, match="what: At most 2000 characters, not 2001"):
        reader_report_create(question=q, what="x" * 2001, address="192.0.2.7")


def test_a_body_over_the_cap_is_refused_413(client, public):
    from public.views import REPORT_BODY_MAX

    assert REPORT_BODY_MAX == 12 * (2000 + 1000 + 254) + 2048
    response = client.post(
        FORM, {**GOOD, "padding": "z" * REPORT_BODY_MAX}, REMOTE_ADDR="192.0.2.1"
    )
    assert response.status_code == 413
    assert not ReaderReport.objects.exists()


def _post_urlencoded(client: Client, data: dict):
    """POST as a browser sends a plain form: url-encoded, 9 bytes for a `≤`."""
    from urllib.parse import urlencode

    return client.post(
        FORM,
        urlencode(data),
        content_type="application/x-www-form-urlencoded",
        REMOTE_ADDR="192.0.2.1",
    )


def test_the_report_limit_counts_characters_not_bytes(client, public):
    """2,000 `≤` (6,000 bytes of UTF-8, 18,000 url-encoded) are within the 2,000-character
    limit (issue 26 part 4: they were refused 413); 2,001 are refused by the form."""
    over = _post_urlencoded(client, {**GOOD, "what": "\u2264" * 2001})
    assert over.status_code == 422
    assert "at most 2000 characters (it has 2001)" in over.content.decode()
    ok = _post_urlencoded(client, {**GOOD, "what": "\u2264" * 2000})
    assert ok.status_code == 303, ok.content[:300]
    assert ReaderReport.objects.get().what == "\u2264" * 2000


def test_every_field_at_its_limit_in_four_byte_characters_is_accepted(client, public):
    wide = "\U0001d7cf"  # MATHEMATICAL BOLD DIGIT ONE: 4 bytes in UTF-8
    data = {"what": wide * 2000, "source_text": wide * 1000, "email": GOOD["email"]}
    response = _post_urlencoded(client, data)
    assert response.status_code == 303, response.content[:300]
    report = ReaderReport.objects.get()
    assert (len(report.what), len(report.source_text)) == (2000, 1000)


def test_rate_limit_per_address(client, public, settings):
    settings.SNAGLIST_READER_REPORTS_PER_ADDRESS = 2
    assert _post(client, GOOD).status_code == 303
    assert _post(client, {**GOOD, "what": "second"}).status_code == 303
    third = _post(client, {**GOOD, "what": "third"})
    assert third.status_code == 429 and third["Retry-After"] == "3600"
    assert "at most 2 an hour" in third.content.decode()
    assert ReaderReport.objects.count() == 2
    assert (
        _post(client, {**GOOD, "what": "another reader"}, address="198.51.100.4").status_code == 303
    )
    assert ReaderReport.objects.count() == 3


def test_rate_limit_per_benchmark(client, public, settings):
    settings.SNAGLIST_READER_REPORTS_PER_BENCHMARK = 3
    for i in range(3):
        assert _post(client, {**GOOD, "what": f"r{i}"}, address=f"203.0.113.{i}").status_code == 303
    fourth = _post(client, {**GOOD, "what": "r3"}, address="203.0.113.99")
    assert fourth.status_code == 429 and "about tiny" in fourth.content.decode()
    assert ReaderReport.objects.count() == 3


# ----------------------------------------------------------------------------- reviewers
def _report(public) -> ReaderReport:
    q = Question.objects.get(benchmark=public, question_id="Q4")
    report, _ = reader_report_create(
        question=q,
        what=GOOD["what"],
        source_text=GOOD["source_text"],
        email=GOOD["email"],
        address="192.0.2.1",
    )
    return report


def test_a_reviewer_marks_a_report_as_spam_and_it_is_logged(public):
    report = _report(public)
    reviewer = _user("rev", "reviewer")
    with pytest.raises(NotAllowedError):
        reader_report_mark_spam(report=report, user=_user("nobody"))
    marked = reader_report_mark_spam(report=report, user=reviewer)
    assert marked.spam and marked.spam_marked_by == reviewer and marked.spam_marked_at
    entry = AuditLogEntry.objects.get(action="reader_report.spam")
    assert entry.actor == reviewer and entry.target_id == str(report.pk)
    assert entry.after == {"spam": True, "item": report.item_id}
    with pytest.raises(InvalidTransitionError, match="already marked as spam"):
        reader_report_mark_spam(report=report, user=reviewer)
    # Its only evidence was spam: the item sinks to the bottom of the queue, still a reader's.
    item = ReviewItem.objects.get(pk=report.item_id)
    assert (item.priority, item.reasons, item.source) == (0, "no evidence", "reported")


def test_spam_no_longer_ranks_the_item_but_a_real_report_does(public):
    spam = _report(public)
    q = Question.objects.get(benchmark=public, question_id="Q4")
    real, created = reader_report_create(
        question=q, what="Table 2 was amended in 2023.", address="198.51.100.7"
    )
    assert not created and real.item_id == spam.item_id
    reader_report_mark_spam(report=spam, user=_user("rev", "reviewer"))
    item = ReviewItem.objects.get(pk=spam.item_id)
    assert item.priority == 500  # a reader's report: 0.5 ban (review.priority.WEIGHTS)
    assert item.reasons == "reported by a reader: Table 2 was amended in 2023."
    assert spam.evidence.__class__.objects.get(pk=spam.evidence_id).detail["spam"] is True


def test_spam_button_on_the_item_page(client, public):
    report = _report(public)
    client.force_login(_user("rev", "reviewer"))
    page = client.get(f"/review/items/{report.item_id}/").content.decode()
    assert f'action="/review/reports/{report.pk}/spam/"' in page
    response = client.post(f"/review/reports/{report.pk}/spam/")
    assert (
        response.status_code == 303 and response["Location"] == f"/review/items/{report.item_id}/"
    )
    report.refresh_from_db()
    assert report.spam
    assert "marked as spam" in client.get(f"/review/items/{report.item_id}/").content.decode()


def test_the_reply_address_is_shown_to_editors_only(client, public):
    report = _report(public)
    page = f"/review/items/{report.item_id}/"
    client.force_login(_user("rev", "reviewer"))
    assert "reader@example.org" not in client.get(page).content.decode()
    assert (
        "reader@example.org"
        not in client.get(f"/api/review/items/{report.item_id}/").content.decode()
    )
    assert GOOD["what"] in client.get(page).content.decode()
    client.force_login(_user("ed", "editor"))
    assert "reader@example.org" in client.get(page).content.decode()


# ----------------------------------------------------------------------------- XSS
def test_every_xss_payload_in_a_report_is_escaped_wherever_it_is_shown(client, public, settings):
    """The whole payload corpus in one report's `what` and `source`: escaped on the public
    form shown again with an error, the item page and the queue (its reasons); the audit log
    page, which does not show the text, has no live markup either."""
    settings.SNAGLIST_READER_REPORTS_PER_ADDRESS = 10
    hostile = {"what": "What " + ALL, "source_text": "Source " + ALL[:990], "email": ""}
    again = _post(client, {**hostile, "email": "bad"})  # 422: the form shows the text again
    assert again.status_code == 422
    html = again.content.decode()
    assert not live_markup(html), live_markup(html)[:5]
    assert escape("What " + ALL) in html
    assert _post(client, hostile).status_code == 303
    item = ReviewItem.objects.get(question__question_id="Q4")
    admin = _user("the-admin", "admin")
    staff = Client()
    staff.force_login(admin)
    pages = {
        "item": f"/review/items/{item.pk}/",
        "queue": "/review/",
        "log": "/log/",
    }
    for name, url in pages.items():
        response = staff.get(url)
        assert response.status_code == 200, (name, response.status_code)
        html = response.content.decode()
        assert not live_markup(html), (name, live_markup(html)[:5])
        if name != "log":  # the log records the item's state, not the report's text
            assert "__xss" in html, f"{name} shows the report (escaped)"
    item_html = staff.get(pages["item"]).content.decode()
    assert escape("What " + ALL) in item_html
    assert escape("Source " + ALL[:990].strip()) in item_html
    assert Evidence.objects.get(item=item).detail["note"] == "What " + ALL


# ------------------------------------------------------------- issue 30 item 9: the way in
def test_a_reader_reaches_the_form_for_a_question_without_an_erratum(client, public):
    chooser = "/public/tiny/questions/report/"
    body = client.get(chooser).content.decode()
    assert all(f'<option value="{q}">' in body for q in ("Q1", "Q2", "Q3", "Q4", "Q5"))
    response = client.get(chooser, {"question": "Q1"})
    assert (
        response.status_code == 303 and response["Location"] == "/public/tiny/questions/Q1/report/"
    )
    missing = client.get(chooser, {"question": "Q99"})
    assert missing.status_code == 404 and "tiny has no question “Q99”" in missing.content.decode()
    # linked from the leaderboard's comparison, with or without a comparison shown
    for query in ("?edition=corrected-1&compare=original", "?edition=original"):
        board = client.get("/public/tiny/" + query).content.decode()
        assert f'Found an error in a question\'s key entry? <a href="{chooser}">' in board
    # from the errata register (each erratum's question, and any other question) ...
    register = client.get("/public/tiny/errata/").content.decode()
    assert f'href="{chooser}"' in register
    for q in ("Q2", "Q3"):  # corrected-1's correction and removal
        assert f'href="/public/tiny/questions/{q}/report/">Report an error</a>' in register
    # ... and from each corrected question of the public methodology report
    report = client.get("/public/tiny/report/?edition=corrected-1").content.decode()
    assert 'href="/public/tiny/questions/Q2/report/">report an error</a>' in report


def test_the_reader_text_is_near_the_top_of_the_item_page(client, public):
    report = _report(public)
    client.force_login(_user("rev", "reviewer"))
    page = client.get(f"/review/items/{report.item_id}/").content.decode()
    top = page.index('class="reader-report-top"')
    assert page.index('id="h-question"') < top < page.index('id="h-source"')
    assert GOOD["what"] in page[top : page.index('id="h-source"')]
    assert GOOD["source_text"] in page[top : page.index('id="h-source"')]
