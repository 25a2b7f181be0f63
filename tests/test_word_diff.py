"""Word-level diff of answers and citations (issue 18 item 4, first part)."""

from __future__ import annotations

import pytest

from review.templatetags.review_tags import word_diff
from tests.review_fixtures import *  # noqa: F403


def test_only_the_changed_figure_is_marked_apart_from_its_replacement():
    # a space between the deleted word and its replacement: never "9001100"
    assert word_diff("At least 900 mm wide.", "At least 1100 mm wide.") == (
        'At least <del class="diff-old">900</del> <ins class="diff-new">1100</ins> mm wide.'
    )


def test_added_and_removed_words_and_empty_sides():
    # 3 of 4 words kept (2 x 3 / 8 = 0.75): marked word by word
    assert word_diff("Yes, a 1,500 m² cap.", "No, a 1,500 m² cap.") == (
        '<del class="diff-old">Yes</del> <ins class="diff-new">No</ins>, a 1,500 m² cap.'
    )
    assert word_diff("a cap", "a cap removed") == 'a cap<ins class="diff-new"> removed</ins>'
    assert word_diff(None, "new") == '<ins class="diff-new">new</ins>'
    assert word_diff("old", "") == '<del class="diff-old">old</del>'


def test_a_rewrite_is_shown_before_and_after_whole():
    """Issue 30 item 7: "More than 2500 litres" -> "Above 3,500 litres" kept 2 of 7 words
    (than? no: "litres" only, 2 x 1 / 6 = 0.33 < 0.5), so each side is shown whole, not
    "MoreAbove than 25003,500 litres"."""
    out = word_diff("More than 2500 litres", "Above 3,500 litres")
    assert out == (
        '<del class="diff-old diff-whole">More than 2500 litres</del> '
        '<ins class="diff-new diff-whole">Above 3,500 litres</ins>'
    )
    # exactly half kept (2 x 2 / 8 = 0.5) is not below the line: word by word
    assert "diff-whole" not in word_diff("one two three four", "one two five six")
    assert "diff-whole" in word_diff("one two three four", "one seven five six")


def test_every_piece_is_escaped():
    out = word_diff("<b> c d e", "<script> c d e")
    assert "<script" not in out and "<b>" not in out
    assert out == ('&lt;<del class="diff-old">b</del> <ins class="diff-new">script</ins>&gt; c d e')
    whole = word_diff("<b>a</b>", "<script>x</script>")
    assert "<script" not in whole and "&lt;script&gt;x&lt;/script&gt;" in whole


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
    assert '<del class="diff-old">101</del> <ins class="diff-new">150</ins> mm' in body
    assert '<del class="diff-old">1.1</del> <ins class="diff-new">1.2</ins>' in body
