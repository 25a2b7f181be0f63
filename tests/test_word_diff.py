"""Word-level diff of answers and citations (issue 18 item 4, first part)."""

from __future__ import annotations

import pytest

from review.templatetags.review_tags import word_diff
from tests.review_fixtures import *  # noqa: F403


def test_only_the_changed_figure_is_marked():
    assert word_diff("At least 900 mm wide.", "At least 1100 mm wide.") == (
        'At least <del class="diff-old">900</del><ins class="diff-new">1100</ins> mm wide.'
    )


def test_added_and_removed_words_and_empty_sides():
    assert word_diff("Yes, 1,500 m² cap.", "No cap.") == (
        '<del class="diff-old">Yes, 1,500 m²</del><ins class="diff-new">No</ins> cap.'
    )
    assert word_diff(None, "new") == '<ins class="diff-new">new</ins>'
    assert word_diff("old", "") == '<del class="diff-old">old</del>'


def test_every_piece_is_escaped():
    out = word_diff("<b>a</b>", "<script>x</script>")
    assert "<script" not in out and "<b>" not in out
    assert out.startswith("&lt;") and out.endswith("&gt;")


@pytest.mark.django_db
def test_approvals_page_marks_only_the_changed_words(client, world, reviewer, editor):
    from review import services
    from tests.factories import ReviewItemFactory

    item = services.review_item_claim(
        item=ReviewItemFactory(question=world.q(1), benchmark=world.benchmark), user=reviewer
    )
    base = item.question.key_entries.get()
    services.proposal_create(
        item=item,
        user=reviewer,
        version=item.version,
        action="correct",
        reason="factually_wrong",
        answer=base.answer.replace("101", "150"),
        citation_doc_id=base.citation_doc_id,
        citation_locator="1.2",
        citation_quote=base.citation_quote,
    )
    client.force_login(editor)
    body = client.get("/review/approvals/").content.decode()
    assert '<del class="diff-old">101</del><ins class="diff-new">150</ins> mm' in body
    assert '<del class="diff-old">1.1</del><ins class="diff-new">1.2</ins>' in body
