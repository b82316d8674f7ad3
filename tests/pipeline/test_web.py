"""Fetching a page against a loopback server: conversion, redirects, limits and every error's reason."""

from __future__ import annotations

import socket

import httpx
import pytest

from config.errors import FetchError, FileSkipped
from pipeline import web
from pipeline.fingerprint import StoredStat
from pipeline.models import FileJob
from pipeline.web import PageUnchanged, ingest_url, url_jobs
from tests.webserver import Page, WebSite, web_site  # noqa: F401 - the fixture

GUIDE = """<!doctype html><html><head><title>Team Guide</title><script>track()</script></head>
<body><nav>Home | About</nav><h1>Guide</h1><p>Install the zebra tool.</p>
<h2>Budgets</h2><p>Limit spending per run.</p></body></html>"""


def _job(url: str, sha: str | None = None, size: int = 0, mtime_ns: int = 0) -> FileJob:
    return FileJob(url, url, size, mtime_ns, sha)


def test_an_html_page_becomes_a_web_document_with_its_title_and_breadcrumbs(web_site: WebSite) -> None:
    url = web_site.html("/guide.html", GUIDE)
    doc = ingest_url(_job(url))
    assert not isinstance(doc, PageUnchanged)
    assert (doc.path, doc.root, doc.source, doc.title) == (url, url, "web", "Team Guide")
    assert [c.heading_path for c in doc.chunks] == ["Guide", "Guide > Budgets"]
    assert "zebra" in doc.chunks[0].body and "track" not in doc.chunks[0].body and "Home" not in doc.chunks[0].body
    assert doc.size == len(GUIDE.encode())
    _, headers = web_site.requests[-1]
    assert headers["user-agent"] == web.USER_AGENT


def test_markdown_and_plain_bodies_are_indexed_as_they_are_with_the_first_heading_as_title(web_site: WebSite) -> None:
    web_site.pages["/notes.md"] = Page(b"# Notes\n\nokapi facts\n\n## More\n\nx\n", "text/markdown; charset=utf-8")
    doc = ingest_url(_job(web_site.url("/notes.md")))
    assert not isinstance(doc, PageUnchanged)
    assert doc.title == "Notes" and [c.heading_path for c in doc.chunks] == ["Notes", "Notes > More"]


def test_the_same_text_is_unchanged_and_a_304_is_unchanged_without_a_body(web_site: WebSite) -> None:
    url = web_site.html("/guide.html", GUIDE, last_modified=1_700_000_000)
    first = ingest_url(_job(url))
    assert not isinstance(first, PageUnchanged) and first.mtime_ns == 1_700_000_000 * 10**9
    again = ingest_url(_job(url, first.sha256, first.size, 0))  # no stored Last-Modified: a full GET
    assert again == PageUnchanged(first.size, first.mtime_ns)
    conditional = ingest_url(_job(url, first.sha256, first.size, first.mtime_ns))
    assert conditional == PageUnchanged(first.size, first.mtime_ns)
    assert "if-modified-since" in web_site.requests[-1][1]
    forced = ingest_url(_job(url, first.sha256, first.size, first.mtime_ns), force=True)
    assert not isinstance(forced, PageUnchanged) and "if-modified-since" not in web_site.requests[-1][1]


def test_markup_changes_that_keep_the_text_are_unchanged(web_site: WebSite) -> None:
    url = web_site.html("/guide.html", GUIDE)
    first = ingest_url(_job(url))
    web_site.html("/guide.html", GUIDE.replace("track()", "track('other')"))
    assert isinstance(ingest_url(_job(url, first.sha256)), PageUnchanged)  # type: ignore[union-attr]


def test_redirects_are_followed_and_the_document_keeps_the_url_as_given(web_site: WebSite) -> None:
    web_site.html("/new.html", GUIDE)
    web_site.redirect("/mid", "/new.html", 301)
    url = web_site.redirect("/old.html", web_site.url("/mid"))
    doc = ingest_url(_job(url))
    assert not isinstance(doc, PageUnchanged) and doc.path == url and doc.title == "Team Guide"


def test_redirect_loops_and_redirects_to_other_schemes_are_refused(web_site: WebSite) -> None:
    loop = web_site.redirect("/a", "/b")
    web_site.redirect("/b", "/a")
    with pytest.raises(FetchError, match=f"more than {web.MAX_REDIRECTS} redirects"):
        ingest_url(_job(loop))
    assert web_site.hits("/a") + web_site.hits("/b") == web.MAX_REDIRECTS + 1
    escape = web_site.redirect("/escape", "file:///etc/passwd")
    with pytest.raises(FetchError, match="redirected to a file: URL, refused"):
        ingest_url(_job(escape))
    broken = web_site.redirect("/broken", "http://[::1/x")
    with pytest.raises(FetchError, match=r"(?i)invalid URL"):
        ingest_url(_job(broken))


def test_http_errors_name_the_status(web_site: WebSite) -> None:
    with pytest.raises(FetchError, match=r"^HTTP 404 Not Found$"):
        ingest_url(_job(web_site.url("/missing.html")))
    web_site.pages["/boom"] = Page(b"oops", status=503)
    with pytest.raises(FetchError, match=r"^HTTP 503"):
        ingest_url(_job(web_site.url("/boom")))


def test_a_refused_connection_and_a_timeout_are_fetch_errors_with_their_reason(
        web_site: WebSite, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(FetchError, match="cannot connect: connection refused"):
        ingest_url(_job(f"http://127.0.0.1:{port}/x.html"))
    monkeypatch.setattr(web, "TIMEOUT", httpx.Timeout(0.2))
    url = web_site.html("/slow.html", GUIDE, delay=1.0)
    with pytest.raises(FetchError, match="timed out"):
        ingest_url(_job(url))


def test_oversized_pages_are_skipped_by_declared_or_actual_length(web_site: WebSite) -> None:
    big = web_site.html("/big.html", "<p>" + "x" * (web.MAX_BODY_BYTES + 10) + "</p>")
    with pytest.raises(FileSkipped, match=r"too large \(\d+ bytes > 524288\)"):
        ingest_url(_job(big))
    undeclared = web_site.html("/big2.html", "<p>" + "x" * (web.MAX_BODY_BYTES + 10) + "</p>", send_length=False)
    with pytest.raises(FileSkipped, match="too large \\(over 524288 bytes\\)"):
        ingest_url(_job(undeclared))


def test_other_content_types_are_skipped_with_the_type(web_site: WebSite) -> None:
    web_site.pages["/logo.png"] = Page(b"\x89PNG\r\n\x1a\n", "image/png")
    with pytest.raises(FileSkipped, match=r"not HTML or text \(Content-Type: image/png\)"):
        ingest_url(_job(web_site.url("/logo.png")))
    web_site.pages["/blob"] = Page(b"\x00\x01binary", None)
    with pytest.raises(FileSkipped, match="no Content-Type"):
        ingest_url(_job(web_site.url("/blob")))


def test_a_declared_charset_is_honoured(web_site: WebSite) -> None:
    web_site.pages["/latin.html"] = Page("<h1>Café</h1><p>crème brûlée</p>".encode("latin-1"),
                                         "text/html; charset=iso-8859-1")
    doc = ingest_url(_job(web_site.url("/latin.html")))
    assert not isinstance(doc, PageUnchanged) and doc.title == "Café" and "crème brûlée" in doc.chunks[0].body


def test_url_jobs_carry_what_the_store_knows_unless_reindexing() -> None:
    stored = {"http://h/a": StoredStat("abc", 10, 5, 7)}
    jobs = url_jobs(["http://h/a", "http://h/b"], stored, reindex=False)
    assert [j.to_wire() for j in jobs] == [
        ["http://h/a", "http://h/a", 10, 5, "abc", ""], ["http://h/b", "http://h/b", 0, 0, None, ""]
    ]
    assert url_jobs(["http://h/a"], stored, reindex=True)[0].stored_sha256 is None
    assert url_jobs(["http://h/a"], stored, reindex=False, backfill={"http://h/a"})[0].stored_sha256 is None
