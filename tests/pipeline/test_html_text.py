"""HTML becomes markdown-ish text the chunker reads: headings, lists, fences; junk and controls dropped."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.chunker import chunk_text, parse_heading
from pipeline.html_text import html_to_text, strip_controls


def test_headings_become_atx_headings_and_the_chunker_makes_breadcrumbs() -> None:
    page = html_to_text("<h1>Guide</h1><p>intro</p><h2>Install <small>v2</small></h2><p>run it</p>"
                        "<h3>Linux</h3><p>apt</p>")
    assert page.text.startswith("# Guide\n\nintro\n\n## Install v2\n\nrun it\n\n### Linux")
    crumbs = [c.heading_path for c in chunk_text(page.text).chunks]
    assert crumbs == ["Guide", "Guide > Install v2", "Guide > Install v2 > Linux"]


def test_the_title_comes_from_the_title_element_with_whitespace_collapsed() -> None:
    page = "<html><head><title>\n  The   Guide </title></head><body><h1>X</h1></body>"
    assert html_to_text(page).title == "The Guide"
    assert html_to_text("<h1>No title element</h1>").title is None
    assert html_to_text("<title>   </title><p>x</p>").title is None


def test_scripts_styles_and_navigation_are_dropped_with_their_content() -> None:
    page = html_to_text(
        "<head><style>.a{color:red}</style><script>var s = '<h1>fake</h1>';</script></head>"
        "<body><nav><ul><li>Home</li></ul></nav><div role='navigation'><div>Menu</div></div>"
        "<noscript>enable js</noscript><p>kept text</p><svg><title>icon</title></svg></body>"
    )
    assert page.text == "kept text\n"
    assert page.title is None


def test_lists_become_bullets_and_numbers_indented_by_nesting() -> None:
    page = html_to_text("<ul><li>one</li><li>two<ul><li>deep</li></ul></li></ul>"
                        "<ol start='3'><li>three</li><li><p>four</p><p>more</p></li></ol>")
    assert page.text == "- one\n- two\n  - deep\n\n3. three\n4. four\n  more\n"


def test_pre_becomes_a_fenced_block_longer_than_any_fence_inside() -> None:
    page = html_to_text('<pre><code class="language-python">def f():\n    return 1\n```\n</code></pre><p>after</p>')
    assert page.text == "````python\ndef f():\n    return 1\n```\n````\n\nafter\n"
    chunks = chunk_text("# T\n\n" + page.text).chunks
    assert chunks[0].body.startswith("````python\ndef f():") and "after" in chunks[0].body


def test_text_that_would_read_as_markdown_structure_is_escaped() -> None:
    page = html_to_text("<p># not a heading</p><p>```not a fence</p><li>  ## item</li>")
    for line in page.text.splitlines():
        assert parse_heading(line) is None
    assert "\\# not a heading" in page.text and "\\```not a fence" in page.text


def test_breaks_tables_entities_and_inline_code() -> None:
    page = html_to_text("<p>a &amp; b<br>next <code>x()</code></p>"
                        "<table><tr><th>k</th><th>v</th></tr><tr><td><div>1</div></td><td>2</td></tr></table>")
    assert page.text == "a & b\nnext `x()`\n\nk | v\n1 | 2\n"


def test_control_characters_are_removed() -> None:
    page = html_to_text("<title>t\x1b]0;evil\x07</title><p>red \x1b[31mtext\x9b</p>")
    assert "\x1b" not in page.text and "\x9b" not in page.text and "\x07" not in (page.title or "")
    assert strip_controls("a\r\nb\tc\x00") == "a\nb\tc"


def test_broken_html_still_yields_its_text() -> None:
    page = html_to_text("<h2>Open heading<p>para <b>bold<li>item</ul></div></span><pre>unclosed")
    assert "Open heading" in page.text and "bold" in page.text and "item" in page.text
    assert page.text.rstrip().endswith("```")


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>/=\"' #`-\n\x1babcphl1234ustrieoda&;")), max_size=300))
def test_any_input_converts_without_error_and_chunks(html: str) -> None:
    page = html_to_text(html)
    assert "\x1b" not in page.text
    chunk_text(page.text)
