"""The search page's rendering over real loopback HTTP: folded filters, clean excerpts, marks, the show page."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from query.serve.http_api import build_app
from tests.query.stores import build_store, store_settings
from tests.query.test_http_api import Running

MKDOCS = {
    "docs/tutorial.md": (
        "# Dependencies with yield\n\n"
        "Use [dependencies](../dependencies/index.md){.internal-link target=_blank} with yield to run cleanup code "
        "after the response. The <abbr title=\"Application Programming Interface\">API</abbr> stays the same.\n\n"
        "{!../../docs_src/dependencies/tutorial007.py!}\n\n"
        "## Steps\n\n"
        "1. Create the session\n2. Yield it\n\n"
        "- a **bold** point\n- a `code <span>` point\n\n"
        "```python\ndef get_db():\n    if a < b:\n        yield session\n```\n\n"
        "See [the guide](https://example.org/guide) and [a trap](javascript:alert(1)).\n"
    ),
    "docs/other.md": "# Other\n\nNothing with yield here, only cleanup notes with words.\n",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = build_store(store_settings(tmp_path_factory.mktemp("render"),
                                          expose={"mcp": {"builtins": ["knowledge_search"]}}), MKDOCS)
    with Running(build_app(settings, "127.0.0.1", None, warn=lambda m: None)) as url:
        yield url


def get(url: str, route: str = "/", **params: object) -> str:
    response = httpx.get(url + route, params=params, timeout=10)  # type: ignore[arg-type]
    assert response.status_code == 200, response.text
    return response.text


def test_the_filters_are_folded_away_so_the_results_come_first(site: str) -> None:
    body = get(site, q="yield", path="docs")
    form = body[body.index('<form class="search"'):body.index("</form>")]
    folded = form[form.index('<details class="options">'):]
    assert 'name="path"' in folded and 'name="root"' in folded and 'name="where"' in folded
    assert 'name="top_k"' in folded and 'name="explain"' in folded
    assert "<details class=\"options\" open" not in form and "(1 set)" in folded  # closed, but says one is set
    assert 'name="q"' not in folded and 'name="mode"' not in folded  # the box and the mode stay in view


def test_an_excerpt_shows_no_mkdocs_markup_and_no_formatting_tags(site: str) -> None:
    body = get(site, q="cleanup response")
    snippets = " ".join(re.findall(r'<p class="snippet">(.*?)</p>', body))
    assert "cleanup" in snippets
    for raw in ("{!", "docs_src", "{.internal-link", "target=_blank", "&lt;abbr", "abbr"):
        assert raw not in snippets, raw
    assert "The API stays the same" in snippets


def test_a_stop_word_of_the_query_is_not_marked_but_its_other_words_are(site: str) -> None:
    body = get(site, q="cleanup with yield")
    marked = {m.lower() for m in re.findall(r"<mark>(.*?)</mark>", body)}
    assert {"cleanup", "yield"} <= marked and "with" not in marked


def test_the_show_page_renders_the_markdown_and_escapes_everything(site: str) -> None:
    body = get(site, "/show/docs/tutorial.md")
    content = " ".join(re.findall(r'<div class="content">(.*?)</div>', body, re.S))
    assert "<ol>" in content and "<li>Create the session</li>" in content
    assert "<strong>bold</strong>" in content and "<code>code &lt;span&gt;</code>" in content
    assert '<pre><code class="language-python">def get_db():' in content and "if a &lt; b:" in content
    assert '<a href="https://example.org/guide" rel="nofollow">the guide</a>' in content
    assert "javascript:" not in content.replace("[a trap](javascript:alert(1))", "") \
        and 'href="javascript' not in content
    assert "{.internal-link" not in content and "{!" not in content and "<abbr" not in content
    assert "```" not in content and "## Steps" not in content
