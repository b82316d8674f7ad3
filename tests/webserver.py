"""A loopback HTTP server for the web-page tests: a mutable table of pages, redirects and faults."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class Page:
    """One route: status, body, content type, extra headers, an optional Last-Modified and a delay."""

    body: bytes = b""
    content_type: str | None = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    last_modified: float | None = None  # seconds since the epoch
    delay: float = 0.0
    send_length: bool = True  # False: no Content-Length, the body ends when the connection closes
    drip: float = 0.0  # > 0: send the body one byte at a time, this many seconds apart (a slow-drip server)
    drip_headers: bool = False  # with drip: the status line and headers drip too


class _Handler(BaseHTTPRequestHandler):
    """Answers from its site's pages (a subclass per WebSite sets `site`)."""

    site: WebSite

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.site.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        page = self.site.pages.get(self.path)
        if page is None:
            self.send_error(404, "Not Found")
            return
        if page.delay:
            time.sleep(page.delay)
        if page.drip and page.drip_headers:
            head = (f"HTTP/1.1 {page.status} OK\r\nContent-Length: {len(page.body)}\r\n"
                    f"Content-Type: {page.content_type}\r\n\r\n").encode()
            self._drip(head + page.body, page.drip)
            return
        since = self.headers.get("If-Modified-Since")
        if (page.last_modified is not None and since
                and parsedate_to_datetime(since).timestamp() >= int(page.last_modified)):
            self.send_response(304)
            self.end_headers()
            return
        self.send_response(page.status)
        if page.content_type is not None:
            self.send_header("Content-Type", page.content_type)
        if page.last_modified is not None:
            self.send_header("Last-Modified", formatdate(page.last_modified, usegmt=True))
        for name, value in page.headers.items():
            self.send_header(name, value)
        if page.send_length:
            self.send_header("Content-Length", str(len(page.body)))
        self.end_headers()
        if page.drip:
            self._drip(page.body, page.drip)
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(page.body)

    def _drip(self, data: bytes, interval: float) -> None:
        """Write data a byte at a time, interval apart, until done or the client is gone."""
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for i in range(len(data)):
                self.wfile.write(data[i:i + 1])
                self.wfile.flush()
                time.sleep(interval)

    def log_message(self, *args: object) -> None:
        pass


class WebSite:
    """Serves `pages` on 127.0.0.1 (an ephemeral port); records every request path and its headers."""

    def __init__(self) -> None:
        self.pages: dict[str, Page] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        handler = type("Handler", (_Handler,), {"site": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base(self) -> str:
        """http://127.0.0.1:<port>"""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def url(self, path: str) -> str:
        """The absolute URL of a route."""
        return self.base + path

    def html(self, path: str, body: str, **options: object) -> str:
        """Serve an HTML page at path (options as Page fields); return its URL."""
        self.pages[path] = Page(body=body.encode("utf-8"), **options)  # type: ignore[arg-type]
        return self.url(path)

    def redirect(self, path: str, location: str, status: int = 302) -> str:
        """Serve a redirect at path; return its URL."""
        self.pages[path] = Page(status=status, content_type=None, headers={"Location": location})
        return self.url(path)

    def hits(self, path: str) -> int:
        """How many requests reached path."""
        return sum(1 for p, _ in self.requests if p == path)

    def start(self) -> WebSite:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def web_site() -> Iterator[WebSite]:
    """A started loopback WebSite, stopped after the test."""
    site = WebSite().start()
    try:
        yield site
    finally:
        site.stop()
