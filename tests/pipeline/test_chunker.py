"""The chunker: headings, breadcrumbs, fences, packing, and UTF-8-safe splitting."""

from __future__ import annotations

import re
from typing import Literal

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.chunker import HARD_LIMIT, TARGET, chunk_text, parse_heading, split_utf8


def test_headings_build_a_breadcrumb_joined_by_arrows() -> None:
    text = "# Guide\n\nintro\n\n## Install\n\nsteps\n\n### Linux\n\napt\n\n## Use\n\nrun it\n"
    chunks = chunk_text(text).chunks
    assert [(c.heading_path, c.body) for c in chunks] == [
        ("Guide", "intro"),
        ("Guide > Install", "steps"),
        ("Guide > Install > Linux", "apt"),
        ("Guide > Use", "run it"),
    ]


def test_the_document_title_is_the_first_heading() -> None:
    assert chunk_text("text first\n\n## Second\n\n# First top\n").title == "Second"
    assert chunk_text("no headings at all\n").title is None


def test_a_heading_needs_a_space_after_the_hashes() -> None:
    assert parse_heading("#include <stdio.h>") is None
    assert parse_heading("#hashtag") is None
    assert parse_heading("## Two ##") == (2, "Two")
    assert parse_heading("####### seven") is None
    chunks = chunk_text("# Title\n\n#include <x.h>\nint main;\n").chunks
    assert chunks[0].body == "#include <x.h>\nint main;"


def test_crlf_is_normalised() -> None:
    chunks = chunk_text("# A\r\n\r\none\r\ntwo\r\n").chunks
    assert chunks[0].body == "one\ntwo"


def test_a_fenced_code_block_is_kept_whole_and_its_hashes_are_not_headings() -> None:
    code = "```python\n# comment, not a heading\n\n\n" + "x = 1\n" * 400 + "```"
    chunks = chunk_text(f"# Code\n\n{code}\n\nafter\n").chunks
    assert chunks[0].body == code
    assert all(c.heading_path == "Code" for c in chunks)
    assert len(code.encode()) > HARD_LIMIT


def test_an_unclosed_fence_runs_to_the_end_of_the_document() -> None:
    chunks = chunk_text("# A\n\n~~~\n# inside\n").chunks
    assert chunks == chunks[:1] and chunks[0].body == "~~~\n# inside"


def test_paragraphs_are_packed_toward_the_target_size() -> None:
    paragraphs = ["word " * 50 for _ in range(20)]  # ~250 bytes each
    chunks = chunk_text("# P\n\n" + "\n\n".join(paragraphs)).chunks
    sizes = [len(c.body.encode()) for c in chunks]
    assert all(s <= TARGET for s in sizes)
    assert all(s > TARGET - 300 for s in sizes[:-1])


def test_a_long_paragraph_is_split_without_cutting_a_multibyte_character() -> None:
    text = "é漢" * 2000
    pieces = split_utf8(text)
    assert "".join(pieces) == text
    assert all(len(p.encode()) <= TARGET for p in pieces)
    chunks = chunk_text(text).chunks
    assert "".join(c.body for c in chunks) == text


def test_sections_without_text_make_no_chunk_and_ordinals_are_dense() -> None:
    chunks = chunk_text("# A\n## B\n### C\n\ntext\n# D\n").chunks
    assert [(c.ordinal, c.heading_path) for c in chunks] == [(0, "A > B > C")]


def test_equal_text_has_equal_hashes_and_a_heading_change_changes_it() -> None:
    a = chunk_text("# X\n\nsame\n").chunks[0]
    b = chunk_text("# X\n\nsame\n").chunks[0]
    c = chunk_text("# Y\n\nsame\n").chunks[0]
    assert a.text_hash == b.text_hash != c.text_hash


def test_cjk_runs_are_extracted_for_the_trigram_table() -> None:
    chunk = chunk_text("# 数据库\n\nThe 索引 is built. カタカナ and 한국어\n").chunks[0]
    assert chunk.cjk.split() == ["数据库", "索引", "カタカナ", "한국어"]


_ws = re.compile(r"\s+")


def _content_without_headings(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [ln for ln in text.split("\n") if parse_heading(ln) is None]
    return _ws.sub("", "".join(lines))


_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)
_line = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=_SURROGATES, exclude_characters="`~"), max_size=300),
    st.sampled_from(["# H1", "## H2", "", "\r\n", "#no", "   ### H3 ###", "####"]),
    st.text(alphabet="aé漢 \n", min_size=1000, max_size=3000),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_line, max_size=25))
def test_chunk_bodies_reassemble_the_text(parts: list[str]) -> None:
    text = "\n".join(parts)
    chunks = chunk_text(text).chunks
    content = _content_without_headings(text)
    if content:
        assert _ws.sub("", "".join(c.body for c in chunks)) == content
    else:  # headings only: at most one section, holding the headings
        assert len(chunks) <= 1
    for chunk in chunks:
        assert chunk.body.strip() != ""
        assert len(chunk.body.encode()) <= HARD_LIMIT or len(chunk.body) == 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(_line, st.sampled_from(["```", "~~~", "````py", "```"])), max_size=25))
def test_fences_never_lose_text(parts: list[str]) -> None:
    text = "\n".join(parts)
    chunks = chunk_text(text).chunks
    rebuilt = _ws.sub("", "".join(c.body for c in chunks))
    # Every non-heading character lands in a body; `#` lines inside a fence stay body text too.
    assert len(_content_without_headings(text)) <= len(rebuilt) <= len(_ws.sub("", text))


def test_a_headings_only_page_becomes_one_section_of_its_headings() -> None:
    chunked = chunk_text("# Release notes\n\n## Version 2\n\n### Fixes\n")
    assert chunked.title == "Release notes"
    assert [(c.heading_path, c.body) for c in chunked.chunks] == [("Release notes", "Release notes\nVersion 2\nFixes")]


def test_a_bare_hash_line_is_text_not_a_heading() -> None:
    chunked = chunk_text("# Title\n\nbefore\n#\nafter\n")
    assert [c.body for c in chunked.chunks] == ["before\n#\nafter"]


def test_a_headings_inline_html_is_stripped_to_its_text_outside_code_spans() -> None:
    assert parse_heading('## Use <a href="https://x.example" target="_blank">WebSockets</a> here') == \
        (2, "Use WebSockets here")
    assert parse_heading("# The <abbr title='Cross-Origin'>CORS</abbr> middleware <br/>") == (1, "The CORS middleware")
    assert parse_heading("### `Option<a>` and Vec<T>") == (3, "`Option<a>` and Vec<T>")
    assert parse_heading("## <span class=x>`<code>`</span> tags") == (2, "`<code>` tags")
    chunks = chunk_text('# Guide\n\n## Run <a href="r.md" target="_blank">it</a>\n\nBody.\n').chunks
    assert [c.heading_path for c in chunks] == ["Guide > Run it"]


def test_a_headings_attribute_list_is_markup_neither_breadcrumb_nor_title() -> None:
    text = ("# WebSockets { #websockets }\n\nintro\n\n## Install `websockets` {#install-websockets}\n\npip\n\n"
            "### Notes {: #notes .tip }\n\nsee\n\n## A set {a, b} and a dict {}\n\nkept\n")
    chunked = chunk_text(text)
    assert chunked.title == "WebSockets"
    assert [c.heading_path for c in chunked.chunks] == [
        "WebSockets", "WebSockets > Install `websockets`", "WebSockets > Install `websockets` > Notes",
        "WebSockets > A set {a, b} and a dict {}"]
    assert parse_heading("## 生命周期事件 { #lifespan-events }") == (2, "生命周期事件")
    assert parse_heading('## Styled { .note data-x="1 2" }') == (2, "Styled")
    assert not any("#" in c.heading_path or "#" in c.cjk for c in chunked.chunks)
