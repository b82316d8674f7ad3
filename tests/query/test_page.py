"""The search page on `knowledge serve` over real loopback HTTP: rendering, escaping, sign-in, headers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from query.highlight import excerpt
from query.serve.http_api import build_app
from query.serve.page import section_href, text
from query.serve.page_routes import COOKIE, CSP
from query.terms import build_query
from tests.query.stores import DOCS, build_store, store_settings
from tests.query.test_http_api import AUTH, RULES, TOKEN, Running

HOSTILE = {
    "docs/hostile.md": (
        "# Evil <script>alert('heading')</script> guide\n\n"
        "Retention of <script>alert('body')</script> and <img src=x onerror=alert(1)> tricks.\n"
    ),
}
EXPOSED = {"mcp": {"builtins": ["knowledge_search", "knowledge_enumerate"]}}


def _settings(base: Path, **block: object) -> object:
    return build_store(store_settings(base, citations=RULES, expose=EXPOSED, **block), {**DOCS, **HOSTILE})


@pytest.fixture(scope="module")
def open_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = _settings(tmp_path_factory.mktemp("page"))
    with Running(build_app(settings, "127.0.0.1", None, warn=lambda m: None)) as url:  # type: ignore[arg-type]
        yield url


@pytest.fixture(scope="module")
def locked_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = _settings(tmp_path_factory.mktemp("locked"))
    with Running(build_app(settings, "127.0.0.1", TOKEN, warn=lambda m: None)) as url:  # type: ignore[arg-type]
        yield url


def page(url: str, path: str = "/", **params: object) -> httpx.Response:
    return httpx.get(url + path, params=params, timeout=10)  # type: ignore[arg-type]


def test_the_home_page_is_a_labelled_search_form_under_the_page_headers(open_site: str) -> None:
    home = page(open_site)
    assert home.status_code == 200 and home.headers["content-type"].startswith("text/html")
    assert home.headers["content-security-policy"] == CSP and "script-src 'self'" in CSP
    assert home.headers["x-content-type-options"] == "nosniff"
    assert home.headers["referrer-policy"] == "same-origin"
    body = home.text
    assert '<label for="q">' in body and 'id="q" name="q"' in body and "<main" in body and "<nav" in body
    assert 'href="/static/page.css"' in body and 'src="/static/page.js"' in body
    assert "<script>" not in body and "style=" not in body  # no inline script or style


def test_a_search_lists_sections_with_trail_marked_excerpt_mapped_link_and_tier(open_site: str) -> None:
    body = page(open_site, q="deprecated").text
    items = re.findall(r'<li class="hit">(.*?)</li>', body)
    first = next(item for item in items if "docs/api.md%230" in item)
    assert '<a href="/show/docs/api.md%230">API</a>' in first
    assert "<mark>deprecated</mark>" in first and "<mark>deprecation</mark>" in first  # any form of the word
    assert '<a class="mapped" href="https://docs.example.net/api/">' in first
    assert "tier: lexical" in body and "<ol class=\"results\">" in body


def test_a_document_heading_or_body_holding_markup_is_printed_as_text(open_site: str) -> None:
    for response in (page(open_site, q="retention tricks"), page(open_site, "/show/docs/hostile.md%230"),
                     page(open_site, "/show/docs/hostile.md"), page(open_site, "/sources"),
                     page(open_site, q="retention", mode="match")):
        body = response.text
        assert "<script>alert" not in body and "<img src=x" not in body, response.url
        assert "&lt;script&gt;alert(" in body or "hostile.md" in body
    shown = page(open_site, "/show/docs/hostile.md%230").text
    assert "<h1>Evil &lt;script&gt;alert(&#x27;heading&#x27;)&lt;/script&gt; guide</h1>" in shown


def test_the_query_itself_is_escaped_wherever_it_is_echoed(open_site: str) -> None:
    body = page(open_site, q='"><script>alert(1)</script>').text
    assert "<script>alert(1)" not in body and 'value="&quot;&gt;&lt;script&gt;' in body


def test_which_documents_contain_calls_match_and_reports_the_complete_count(open_site: str) -> None:
    body = page(open_site, q="retention", mode="match").text
    assert "4 documents contain" in body  # retention, split, notes and the hostile document
    assert '<a href="/show/docs/retention.md%230">docs/retention.md</a>' in body
    refused = page(open_site, q="a OR b", mode="match")
    assert refused.status_code == 400 and "OR is not supported" in refused.text


def test_a_section_page_links_its_neighbours_and_a_missing_one_is_404(open_site: str) -> None:
    first = page(open_site, "/show/docs/retention.md%230").text
    assert 'rel="next" href="/show/docs/retention.md%231"' in first and 'rel="prev"' not in first
    second = page(open_site, "/show/docs/retention.md%231").text
    assert 'rel="prev" href="/show/docs/retention.md%230"' in second and "Audit records" in second
    assert 'rel="next"' not in second
    assert page(open_site, "/show/docs/nowhere.md%230").status_code == 404


def test_sources_and_stats_are_tables(open_site: str) -> None:
    sources = page(open_site, "/sources").text
    assert "<table>" in sources and '<th scope="col">Path</th>' in sources
    assert '<a href="https://docs.example.net/api/">' in sources
    stats = page(open_site, "/stats").text
    assert "<td>documents</td><td>6</td>" in stats and "tier: lexical" in stats


def test_the_static_files_come_from_the_package_and_nothing_else_does(open_site: str) -> None:
    css = page(open_site, "/static/page.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert "prefers-color-scheme: dark" in css.text
    assert page(open_site, "/static/page.js").headers["content-type"].startswith("text/javascript")
    assert page(open_site, "/static/../http_api.py").status_code == 404
    assert page(open_site, "/static/other.js").status_code == 404


def test_without_the_token_a_page_answers_the_sign_in_form_and_the_api_stays_header_only(locked_site: str) -> None:
    refused = page(locked_site, q="retention")
    assert refused.status_code == 401 and '<form class="login" method="post" action="/login">' in refused.text
    assert "retention" not in refused.text.split("<main", 1)[1]
    assert page(locked_site, "/static/page.css").status_code == 200
    assert httpx.get(locked_site + "/", headers=AUTH, timeout=10).status_code == 200
    wrong = httpx.post(locked_site + "/login", data={"token": "nope"}, timeout=10)
    assert wrong.status_code == 401 and "not this server" in wrong.text
    signed = httpx.post(locked_site + "/login", data={"token": TOKEN, "next": "/sources"}, timeout=10)
    assert signed.status_code == 303 and signed.headers["location"] == "/sources"
    cookie = signed.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert TOKEN not in cookie
    jar = {COOKIE: signed.cookies[COOKIE]}
    assert httpx.get(locked_site + "/", params={"q": "retention"}, cookies=jar, timeout=10).status_code == 200
    assert httpx.get(locked_site + "/v1/search", params={"q": "x"}, cookies=jar, timeout=10).status_code == 401
    assert httpx.get(locked_site + "/", cookies={COOKIE: "forged"}, timeout=10).status_code == 401


def test_only_the_server_itself_may_post_the_sign_in_form(locked_site: str) -> None:
    port = locked_site.rsplit(":", 1)[1]
    cross = httpx.post(locked_site + "/login", data={"token": TOKEN}, headers={"Origin": "http://evil.example"},
                       timeout=10)
    assert cross.status_code == 403
    elsewhere = httpx.post(locked_site + "/login", data={"token": TOKEN},
                           headers={"Origin": f"http://localhost:{port}"}, timeout=10)
    assert elsewhere.status_code == 403  # the Host asked for is 127.0.0.1, so localhost is another origin
    same = httpx.post(locked_site + "/login", data={"token": TOKEN}, headers={"Origin": locked_site}, timeout=10)
    assert same.status_code == 303


def test_the_modes_are_gated_by_the_tool_allowlist_like_v1(tmp_path: Path) -> None:
    settings = build_store(store_settings(tmp_path, expose={"mcp": {"builtins": ["knowledge_search"]}}), DOCS)
    with Running(build_app(settings, "127.0.0.1", None, warn=lambda m: None)) as url:
        assert page(url, q="retention").status_code == 200
        refused = page(url, q="retention", mode="match")
        assert refused.status_code == 404 and "knowledge_enumerate is not exposed" in refused.text


def test_an_unbuilt_index_says_so_on_every_view(tmp_path: Path) -> None:
    settings = store_settings(tmp_path, expose=EXPOSED)
    with Running(build_app(settings, "127.0.0.1", None, warn=lambda m: None)) as url:
        for path, params in (("/", {"q": "x"}), ("/sources", {}), ("/stats", {}), ("/show/a.md%230", {})):
            assert "The index is not built" in page(url, path, **params).text


def test_excerpts_mark_each_escaped_piece_and_never_pass_markup_through() -> None:
    segments = excerpt("Before <b>retention</b> & after", build_query("retention"))
    rendered = "".join(f"<mark>{text(s.text)}</mark>" if s.marked else text(s.text) for s in segments)
    assert rendered == "Before &lt;b&gt;<mark>retention</mark>&lt;/b&gt; &amp; after"
    long = "filler " * 100 + "the retention clause " + "tail " * 100
    cut = excerpt(long, build_query("retention"), width=120)
    assert cut[0].text == "…" and cut[-1].text == "…" and any(s.marked for s in cut)
    assert sum(len(s.text) for s in cut) <= 125


def test_section_links_percent_encode_the_whole_ref() -> None:
    assert section_href("docs/a b.md#3") == "/show/docs/a%20b.md%233"
    assert section_href("docs/q?x.md#0") == "/show/docs/q%3Fx.md%230"
    assert section_href("docs/\udcff.md#1") == "/show/docs/%FF.md%231"


def test_the_form_renders_whatever_filters_and_toggles_are_named_and_passes_them_by_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from query.serve import page as page_module

    monkeypatch.setattr(page_module, "FILTER_FIELDS", (page_module.FilterField("path", "Path prefix", "docs/"),))
    monkeypatch.setattr(page_module, "TOGGLES", (page_module.Toggle("explain", "Explain the ranking"),))
    state = page_module.FormState(q="x", filters={"path": 'docs/"a'}, toggles={"explain": True})
    form = page_module.search_form(state)
    assert '<label for="f-path">Path prefix</label>' in form and 'value="docs/&quot;a"' in form
    assert '<input type="checkbox" name="explain" value="1" checked>' in form
    assert state.keywords() == {"path": 'docs/"a', "explain": True}
    state.mode = "match"
    assert state.keywords() == {"path": 'docs/"a'}  # the toggle names the search mode only
    extra = page_module.details({"citation": "c", "explain": {"lexical_rank": 1, "note": "<b>"}})
    assert extra == '<dl class="details"><dt>explain</dt><dd>lexical_rank: 1, note: &lt;b&gt;</dd></dl>'


def test_only_an_http_citation_becomes_a_link() -> None:
    from query.serve.page import citation_line

    assert '<a class="mapped" href="https://d.example/a/?x=1&amp;y=2">' in citation_line(
        "https://d.example/a/?x=1&y=2", "a.md#0")
    for unsafe in ("javascript:alert(1)", "data:text/html,<script>x</script>", "file:///etc/passwd"):
        line = citation_line(unsafe, "a.md#0")
        assert "<a" not in line and "<script>" not in line
    assert citation_line("a.md#0", "a.md#0") == '<p class="cite">Cite: <code>a.md#0</code></p>'


def test_the_page_filters_by_path_and_front_matter_and_explains_on_request(open_site: str) -> None:
    home = page(open_site).text
    assert 'name="path"' in home and 'name="where"' in home and 'name="explain"' in home
    body = httpx.get(open_site + "/", params={"q": "retention", "path": "docs/"}, timeout=10).text
    shown = set(re.findall(r'<a href="/show/([^"%]+)%23', body))
    assert shown and all(p.startswith("docs") for p in shown) and "notes.md" not in shown
    assert "filtered to path docs/" in body
    assert "explain" not in page(open_site, q="retention").text.split("</form>", 1)[1]
    explained = page(open_site, q="retention", explain="1").text.split("</form>", 1)[1]
    assert "explain" in explained and "lexical" in explained
    refused = page(open_site, q="retention", where="tags")
    assert refused.status_code == 400 and "key=value" in refused.text
