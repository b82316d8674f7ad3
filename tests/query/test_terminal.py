"""Printing indexed text: control sequences never reach the terminal; previews read as prose."""

from __future__ import annotations

from query.terminal import clean, one_line, preview


def test_control_sequences_and_characters_are_stripped_but_newlines_and_tabs_stay() -> None:
    assert clean("a\x1b[2Jb\x1b]8;;http://x\x07c\x00d\n\te") == "abcd\n\te"


def test_a_preview_strips_tags_includes_and_entities() -> None:
    text = 'Use <abbr title="Application Programming Interface">API</abbr> keys &amp; tokens {!> ../src/x.py !} here'
    assert preview(text) == "Use API keys & tokens here"


def test_a_long_line_is_cut_at_a_word_with_an_ellipsis() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
    cut = one_line(text, 30)
    assert cut == "alpha beta gamma delta..." and len(cut) <= 30
    assert one_line("x" * 50, 20) == "x" * 17 + "..."


def test_a_preview_strips_mkdocs_attribute_lists_and_ends_at_a_near_sentence_end() -> None:
    assert preview("See [the tutorial](../t.md){.internal-link target=_blank} and {: #anchor } first.") == (
        "See [the tutorial](../t.md) and first.")
    text = ("The session closes after the response is sent, and the error handlers see it too. "
            "Then read the reference, which lists every parameter.")
    assert preview(text) == "The session closes after the response is sent, and the error handlers see it too."
    assert preview(text, 60).endswith("...") and "," not in preview(text, 60)[-5:]
