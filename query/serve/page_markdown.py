"""A section's markdown as the show page's HTML: headings, paragraphs, lists, tables, code and links.

markdown-it-py (already installed under rich) parses CommonMark; raw HTML in the text is never
passed through: an inline formatting tag (`<abbr title=..>`) is dropped and its text kept, any
other inline tag (`<script>`) is shown as text, a block of HTML is shown as its text without tags,
every text run and code block is escaped, an image shows as its alt text, and a link is kept only
when its address is http(s), mailto, a fragment or a relative path (markdown-it refuses javascript:
and data: already). mkdocs include directives (`{!> ../x.py !}`, `--8<-- "x"`) and attribute lists
(`{.internal-link target=_blank}`) are taken out first, as the previews do (query/terminal.py).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pipeline.text import without_controls
from query.terminal import FORMATTING_TAGS, strip_directives, strip_tags

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

SAFE_SCHEMES = frozenset({"", "http", "https", "mailto"})


def _linkable(url: str) -> bool:
    try:
        return urlsplit(url.strip()).scheme.lower() in SAFE_SCHEMES
    except ValueError:
        return False


def _inline_tag(renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """A formatting tag (`<abbr ..>`) is dropped, its text kept; any other (`<script>`) is shown as text."""
    tag = tokens[idx].content
    return "" if not strip_tags(tag, FORMATTING_TAGS) else html.escape(tag)


def _html_block(renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    shown = " ".join(html.unescape(strip_tags(tokens[idx].content)).split())
    return f"<p>{html.escape(shown)}</p>\n" if shown else ""


def _link_open(renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    href = str(tokens[idx].attrGet("href") or "")
    if not _linkable(href):
        return "<span>"
    return f'<a href="{html.escape(href, quote=True)}" rel="nofollow">'


def _link_close(renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    opener = next((t for t in reversed(tokens[:idx]) if t.type == "link_open"), None)
    return "</a>" if opener is not None and _linkable(str(opener.attrGet("href") or "")) else "</span>"


def _image(renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """An image shows as its alt text: the page loads nothing the document names."""
    return html.escape("".join(child.content for child in tokens[idx].children or []))


@cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt  # on the first show page, not on the serve's start

    md = MarkdownIt("commonmark", {"html": True, "linkify": False, "typographer": False})
    md.enable("table").enable("strikethrough")
    md.add_render_rule("html_inline", _inline_tag)
    md.add_render_rule("html_block", _html_block)
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("link_close", _link_close)
    md.add_render_rule("image", _image)
    return md


def render(markdown: str) -> str:
    """markdown as escaped HTML with no raw markup of the document's own."""
    source = without_controls(markdown).encode("utf-8", "replace").decode("utf-8")
    return str(_parser().render(strip_directives(source)))
