"""Untrusted text is inert on every page (issue 7, item 3).

Model responses, judge rationales and flag reasons, auditor rationales, question text,
key answers, model/category/document names (all from a bundle), and reviewer notes,
citation check notes, proposal answers and notes, and editors' decision comments (typed
in the product) are untrusted. The payloads of tests/data/xss-payloads.txt are put into
every one of those places, and every page that shows them must render them escaped:
no element, attribute, event handler, htmx attribute or javascript: URL of a payload's
making in the HTML, and no template syntax evaluated. tests/test_xss_browser.py loads the
same pages in Chromium and checks that no script ran.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils.html import escape

from tests.conftest import DEMO_BUNDLE, PROJECT_ROOT
from tests.test_attack_immutability import make_user

BENCHMARK = "uk-construction-demo"
PAYLOADS = [
    line
    for line in (PROJECT_ROOT / "tests" / "data" / "xss-payloads.txt")
    .read_text(encoding="utf-8")
    .splitlines()
    if line.strip() and not line.startswith("# ")
]
ALL = " ".join(PAYLOADS)  # what a person types into a note: every payload at once
HOSTILE_URL = "javascript:window.__xss=1"


# ------------------------------------------------------------------ the data


def _rewrite_jsonl(path: Path, change) -> None:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    for i, row in enumerate(rows):
        change(i, row)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")


def _rewrite_csv(path: Path, change) -> None:
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    for i, row in enumerate(rows):
        change(i, row)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8")


def p(i: int) -> str:
    return PAYLOADS[i % len(PAYLOADS)]


def hostile_bundle(target: Path) -> Path:
    """The demo bundle with a payload appended to every untrusted text field.

    Row i gets payload i (mod the number of payloads), so with 46 questions, 276
    responses, 552 grades and 92 verdicts every payload lands in every bundle place.
    """
    shutil.copytree(DEMO_BUNDLE, target)

    def question(i, row):
        row["text"] += " " + p(i)
        row["answer"] += " " + p(i + 7)

    def response(i, row):
        row["text"] += " " + p(i)

    def grade(i, row):
        row["rationale"] += " " + p(i)
        if i % 5 == 0:  # flag one grade in five, with a hostile reason
            row["flag"], row["flag_reason"] = True, "Key looks wrong " + p(i // 5)

    def audit(i, row):
        row["rationale"] += " " + p(i)

    _rewrite_jsonl(target / "questions.jsonl", question)
    _rewrite_jsonl(target / "responses.jsonl", response)
    _rewrite_jsonl(target / "grades.jsonl", grade)
    _rewrite_jsonl(target / "audits.jsonl", audit)
    _rewrite_csv(target / "models.csv", lambda i, r: r.update(name=r["name"] + " " + p(i)))
    _rewrite_csv(target / "categories.csv", lambda i, r: r.update(name=r["name"] + " " + p(i)))
    _rewrite_csv(target / "documents.csv", lambda i, r: r.update(title=r["title"] + " " + p(i)))
    return target


@dataclass
class XssWorld:
    reviewer: User
    editor: User
    admin: User
    item_ids: list[int]
    corrected: str
    pages: list[str]


def build_xss_world(tmp_path: Path) -> XssWorld:
    """Import the hostile bundle, triage, and type payloads into every review form."""
    from questions.models import Benchmark, KeyEntry
    from review import services
    from review.models import ReviewItem

    call_command("import_bundle", str(hostile_bundle(tmp_path / "hostile")), verbosity=0)
    call_command("triage", benchmark=BENCHMARK, verbosity=0)
    bench = Benchmark.objects.get(name=BENCHMARK)
    reviewer = make_user("x-reviewer", "reviewer")
    editor = make_user("x-editor", "editor")
    admin = make_user("x-admin", "admin")
    items = list(ReviewItem.objects.filter(benchmark=bench).order_by("id"))
    first, second = items[0], items[1]

    def claim_check_propose(item, action):
        item = services.review_item_claim(item=item, user=reviewer)
        services.citation_check_record(
            item=item,
            user=reviewer,
            version=item.version,
            locator_exists="no",
            supports="partly",
            edition_in_force="unknown",
            amended="unknown",
            note="Check note " + ALL,
            source_url="https://example.org/source?q=%3Cscript%3E",
        )
        item.refresh_from_db()
        entry = KeyEntry.objects.get(
            edition__benchmark=bench, edition__name="original", question=item.question
        )
        return services.proposal_create(
            item=item,
            user=reviewer,
            version=item.version,
            action=action,
            answer="Corrected answer " + ALL if action == "correct" else "",
            citation_doc_id=entry.citation_doc_id if action == "correct" else "",
            citation_locator=entry.citation_locator if action == "correct" else "",
            citation_quote=entry.citation_quote if action == "correct" else "",
            reason="factually_wrong",
            note="Proposal note " + ALL,
        )

    approved = claim_check_propose(first, "correct")
    approved = services.proposal_approve(
        proposal=approved, user=editor, comment="Decision comment " + ALL
    )
    edition = services.key_edition_publish(edition=approved.key_entry.edition, user=editor)
    claim_check_propose(second, "remove")  # stays pending: the approvals page shows it
    pages = [
        "/",
        "/review/",
        "/review/?status=closed",
        *[f"/review/items/{i.pk}/" for i in items],
        "/review/approvals/",
        f"/editions/{BENCHMARK}/",
        f"/editions/{BENCHMARK}/original/",
        f"/editions/{BENCHMARK}/{edition.name}/",
        f"/leaderboard/{BENCHMARK}/",
        f"/leaderboard/{BENCHMARK}/?edition=original&compare={edition.name}",
        f"/report/{BENCHMARK}/",
        "/log/",
        "/runs/",
    ]
    return XssWorld(reviewer, editor, admin, [i.pk for i in items], edition.name, pages)


# ------------------------------------------------------------------ what "live" means


class LiveMarkup(HTMLParser):
    """Collect every trace of a payload that became markup instead of text."""

    MARKERS = ("__xss", "XSS", "xss=1")
    URL_ATTRS = {"href", "src", "action", "formaction", "data", "content", "background"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.live: list[str] = []
        self._in_script = False

    def _marked(self, value: str | None) -> bool:
        return bool(value) and any(m in value for m in self.MARKERS)

    def handle_starttag(self, tag, attrs):
        self._in_script = tag == "script"
        for name, value in attrs:
            value = value or ""
            if name.startswith("on") and self._marked(value):
                self.live.append(f"<{tag} {name}={value!r}>")
            elif name.startswith(("hx-", "data-hx-")) and self._marked(value):
                self.live.append(f"<{tag} {name}={value!r}>")
            elif name == "style" and self._marked(value):
                self.live.append(f"<{tag} style={value!r}>")
            elif name in self.URL_ATTRS and "javascript:" in value.lower().replace(" ", ""):
                self.live.append(f"<{tag} {name}={value!r}>")
        if tag in {"iframe", "object", "embed", "base", "template", "math"}:
            self.live.append(f"<{tag}> element")  # none of the product's pages uses these
        if tag == "meta" and any(n == "http-equiv" for n, _ in attrs):
            self.live.append("<meta http-equiv>")
        if tag == "body" and any(n.startswith("on") for n, _ in attrs):
            self.live.append("<body on...>")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script and self._marked(data):
            self.live.append(f"<script>{data[:60]}")


def live_markup(html: str) -> list[str]:
    parser = LiveMarkup()
    parser.feed(html)
    parser.close()
    evaluated = re.findall(r"(?:49|\d{4})XSS-TPL", html)
    return parser.live + [f"template syntax evaluated: {e}" for e in evaluated]


# ------------------------------------------------------------------ the tests


@pytest.fixture
def xss(db, tmp_path) -> XssWorld:
    return build_xss_world(tmp_path)


def test_the_payload_corpus_is_big_and_varied():
    assert len(PAYLOADS) >= 30
    for needle in (
        "<script>",
        "onerror=",
        "<svg onload",
        "javascript:",
        '" onmouseover=',
        "</textarea><script>",
        "{{ 7*7 }}",
        "hx-get=",
        "hx-trigger=load",
        "style=",
        "](javascript:",
    ):
        assert any(needle.replace("hx-trigger=load", 'hx-trigger="load"') in p for p in PAYLOADS), (
            needle
        )


def test_every_page_renders_every_payload_escaped(xss, capsys):
    """No payload becomes markup on any page, for the admin (who sees every page)."""
    client = Client()
    client.force_login(xss.admin)
    problems = {}
    sizes = {}
    for url in xss.pages:
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        html = response.content.decode()
        sizes[url] = html.count("__xss")
        live = live_markup(html)
        if live:
            problems[url] = live[:5]
    assert not problems, json.dumps(problems, indent=1)
    # The pages did show the payloads (escaped): the check above is not vacuous.
    assert all(sizes[u] for u in xss.pages if "/items/" in u or "approvals" in u)


# (place, page, the text that must appear escaped there)
def _placements(xss: XssWorld) -> list[tuple[str, str, str]]:
    from questions.models import KeyEntry, ModelUnderTest, Question, Response, SourceDocument
    from review.models import ReviewItem
    from scoring.models import AuditVerdict, Grade

    item = ReviewItem.objects.get(pk=xss.item_ids[0])
    item_page = f"/review/items/{item.pk}/"
    q = item.question
    entry = KeyEntry.objects.get(edition__name="original", question=q)
    out = [
        ("question text", item_page, q.text),
        ("key answer", item_page, entry.answer),
        ("check note", item_page, "Check note " + ALL),
        ("proposal answer", f"/editions/{BENCHMARK}/{xss.corrected}/", "Corrected answer " + ALL),
        ("proposal note", "/review/approvals/", "Proposal note " + ALL),
        ("decision comment", "/log/", None),
        ("model name", f"/leaderboard/{BENCHMARK}/", None),
    ]
    for r in Response.objects.filter(question=q).select_related("model"):
        out.append(("model response", item_page, r.text))
    for g in Grade.objects.filter(response__question=q).exclude(rationale=""):
        out.append(("judge rationale", item_page, g.rationale))
    for g in Grade.objects.filter(response__question=q, flag=True):
        out.append(("flag reason", item_page, g.flag_reason))
    for v in AuditVerdict.objects.filter(key_entry=entry):
        out.append(("auditor rationale", item_page, v.rationale))
    for m in ModelUnderTest.objects.all()[:3]:
        out.append(("model name", f"/leaderboard/{BENCHMARK}/", m.name))
    if entry.citation_document_id:
        doc = SourceDocument.objects.get(pk=entry.citation_document_id)
        out.append(("document title", item_page, doc.title))
    _ = Question
    return [(place, page, text) for place, page, text in out if text]


def test_each_untrusted_place_is_shown_escaped_where_it_is_displayed(xss, capsys):
    """Each place's hostile text appears on its page in escaped form (so it was shown)."""
    client = Client()
    client.force_login(xss.admin)
    cache: dict[str, str] = {}
    shown, missing = set(), []
    for place, page, text in _placements(xss):
        if page not in cache:
            cache[page] = client.get(page).content.decode()
        html = cache[page]
        escaped = escape(text)
        # Pages may wrap lines (linebreaksbr) or shorten text: look for each payload.
        payloads_in_text = [p for p in PAYLOADS if p in text]
        found = escaped in html or (
            payloads_in_text and all(escape(p) in html for p in payloads_in_text)
        )
        if found:
            shown.add(place)
        else:
            missing.append((place, page))
    with capsys.disabled():
        print(f"\nXSS: {len(PAYLOADS)} payloads; places shown escaped: {sorted(shown)}")
        if missing:
            print(f"XSS: not displayed verbatim (shortened or not shown): {sorted(set(missing))}")
    for place in (
        "question text",
        "key answer",
        "model response",
        "auditor rationale",
        "check note",
        "proposal note",
        "proposal answer",
    ):
        assert place in shown, (place, missing)


def test_a_javascript_url_in_a_bundle_is_refused_or_never_linked(db, settings, tmp_path):
    """A source document's `url` from a bundle becomes a link on the review page.

    A `javascript:` URL must be refused at import (with file and line) or, if stored by
    another path, never rendered as a link.
    """
    from interchange.bundles import BundleError, import_bundle
    from questions.models import SourceDocument

    bundle = tmp_path / "bundle"
    shutil.copytree(DEMO_BUNDLE, bundle)
    _rewrite_csv(bundle / "documents.csv", lambda i, r: r.update(url=HOSTILE_URL))
    with pytest.raises(BundleError) as excinfo:
        import_bundle(bundle)
    assert "documents.csv" in str(excinfo.value) and "url" in str(excinfo.value)
    assert not SourceDocument.objects.exists()
