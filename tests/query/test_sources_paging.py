"""/v1/sources and the search page's /sources page through a large store instead of answering it whole."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from query.serve.http_api import build_app
from query.serve.page import SOURCES_PAGE
from tests.query.stores import build_store, store_settings
from tests.query.test_http_api import AUTH, TOKEN, Running

DOCUMENTS = 250
DOCS = {f"docs/{'api' if i % 5 == 0 else 'guide'}/p{i:03d}.md": f"# Page {i}\n\ntext {i}\n" for i in range(DOCUMENTS)}
DOCS["docs/a_b/literal.md"] = "# Literal\n\nunderscore\n"
DOCS["docs/axb/other.md"] = "# Other\n\nnot the underscore directory\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = build_store(store_settings(tmp_path_factory.mktemp("paging")), DOCS)
    with Running(build_app(settings, "127.0.0.1", TOKEN, warn=lambda m: None)) as url:
        yield url


def _get(url: str, route: str, **params: object) -> httpx.Response:
    return httpx.get(url + route, headers=AUTH, params=params, timeout=20)  # type: ignore[arg-type]


def test_v1_sources_pages_by_limit_offset_and_path(site: str) -> None:
    whole = _get(site, "/v1/sources").json()
    assert whole["total"] == whole["returned"] == len(DOCS) and whole["next_offset"] is None
    page = _get(site, "/v1/sources", limit=10, offset=245).json()
    assert [d["path"] for d in page["documents"]] == sorted(DOCS)[245:252]
    assert page["returned"] == 7 and page["next_offset"] is None and page["offset"] == 245
    first = _get(site, "/v1/sources", limit=10, path="docs/api").json()
    assert first["total"] == 50 and first["next_offset"] == 10
    assert all(d["path"].startswith("docs/api/") for d in first["documents"])
    literal = _get(site, "/v1/sources", path="docs/a_b").json()
    assert [d["path"] for d in literal["documents"]] == ["docs/a_b/literal.md"]
    nothing = _get(site, "/v1/sources", path="docs/none").json()
    assert (nothing["status"], nothing["total"], nothing["documents"]) == ("ok", 0, [])
    for bad in ({"limit": 0}, {"offset": -1}, {"limit": "ten"}, {"path": "docs/" + "*" * 600}):
        refused = _get(site, "/v1/sources", **bad)
        assert refused.status_code == 400 and refused.json()["status"] == "query_error", bad


def test_the_sources_page_lists_a_page_with_links_to_its_neighbours(site: str) -> None:
    first = _get(site, "/sources")
    assert first.status_code == 200
    rows = re.findall(r"<tr><td><a href=", first.text)
    assert len(rows) == SOURCES_PAGE and f"Documents 1-{SOURCES_PAGE} of {len(DOCS)} indexed" in first.text
    assert 'rel="next" href="/sources?offset=100"' in first.text and 'rel="prev"' not in first.text
    last = _get(site, "/sources", offset=200)
    assert len(re.findall(r"<tr><td><a href=", last.text)) == len(DOCS) - 200
    assert 'rel="prev" href="/sources?offset=100"' in last.text and 'rel="next"' not in last.text
    under = _get(site, "/sources", path="docs/api", offset=0)
    assert "Documents 1-50 of 50 indexed under docs/api" in under.text and 'value="docs/api"' in under.text
    assert "docs/guide/" not in under.text and 'rel="next"' not in under.text
    more = _get(site, "/sources", path="docs/guide")
    assert 'rel="next" href="/sources?path=docs%2Fguide&amp;offset=100"' in more.text
    assert len(first.content) < 100_000  # a page, not the whole store
    refused = _get(site, "/sources", path="docs/" + "*" * 600)
    assert refused.status_code == 400 and "at most 512 characters" in refused.text


def test_the_sources_page_escapes_the_path_it_echoes(site: str) -> None:
    shown = _get(site, "/sources", path='"><script>alert(1)</script>')
    assert shown.status_code == 200 and "<script>alert" not in shown.text and "&lt;script&gt;" in shown.text
