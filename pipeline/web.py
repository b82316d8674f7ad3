"""Fetch one web page for the ingest step and turn it into a Document.

Only an ingest worker fetches (the CLI that plans a run never does), so pages are indexed the same
way in the in-process and the distributed shapes. A fetch is bounded: a 10 s timeout per network
operation and 30 s in all (knowledge.fetch_timeout), kept on the clock by a watchdog that shuts the
fetch's sockets at the deadline however slowly the bytes arrive; at most 5 redirects (each to http
or https only), at most 512 KiB of body (decoded). HTML (text/html, application/xhtml+xml) is
converted by pipeline.html_text; text/markdown and text/plain bodies are indexed as they are; other
content types are skipped.
The document's sha256 is the hash of the text indexed (title included), so a page whose markup
or scripts change but whose text does not is unchanged. `size` holds the body's byte length and
`mtime_ns` its Last-Modified time (0 when the server sends none), which the next run sends back
as If-Modified-Since. Every httpx error is translated here into FetchError or FileSkipped."""

from __future__ import annotations

import codecs
import hashlib
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from urllib.parse import urljoin, urlsplit

import httpx

from config.errors import FetchError, FileSkipped
from config.urls import WEB_SCHEMES
from pipeline import formats
from pipeline.chunker import chunk_text
from pipeline.extraction import Caller, inline
from pipeline.files import Parsed
from pipeline.fingerprint import StoredStat
from pipeline.html_text import html_to_text, strip_controls
from pipeline.languages import document_hint
from pipeline.models import Document, FileJob
from pipeline.walker import MAX_FILE_BYTES
from pipeline.watchdog import Watchdog

SOURCE = "web"
MAX_BODY_BYTES = MAX_FILE_BYTES
MAX_REDIRECTS = 5
TIMEOUT = httpx.Timeout(10.0, connect=5.0)
TOTAL_SECONDS = 30.0
USER_AGENT = "knowledge-pipeline/0.1 (documentation indexer)"
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"text/markdown", "text/x-markdown", "text/plain"})
TEXT_SUFFIXES = tuple(sorted(formats.extensions_of(formats.PLAIN)))  # read as they are, whatever the format
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9._:-]{1,40})""", re.IGNORECASE)


@dataclass(frozen=True)
class PageUnchanged:
    """The page's text is what the store holds (same hash, or 304); the stat to record."""

    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Response:
    """A page as fetched: body bytes (at most MAX_BODY_BYTES), media type, charset, Last-Modified."""

    body: bytes
    media_type: str
    charset: str | None
    last_modified_ns: int


def url_jobs(urls: Iterable[str], stored: dict[str, StoredStat], reindex: bool,
             backfill: frozenset[str] | set[str] = frozenset()) -> list[FileJob]:
    """One job per URL: every page is fetched every run; what the store knows rides along."""
    jobs: list[FileJob] = []
    for url in urls:
        row = stored.get(url)
        if row is None:
            jobs.append(FileJob(url, url, 0, 0, None))
        else:
            sha = None if reindex or url in backfill else row.sha256
            jobs.append(FileJob(url, url, row.size, row.mtime_ns, sha))
    return jobs


def ingest_url(job: FileJob, force: bool = False, client: httpx.Client | None = None,
               total_seconds: float = TOTAL_SECONDS, call: Caller = inline) -> Document | PageUnchanged:
    """Fetch (within total_seconds in all), convert, hash and chunk the page job.path names.

    The conversion (parse_page) is run by call: in a bounded child when ingest runs it. Returns
    PageUnchanged when the server answers 304 or the text's hash equals the stored one (and force
    is off). Raises FileSkipped (not HTML or text, too large, binary, past the extraction bound) or
    FetchError.
    """
    conditional = not force and job.stored_sha256 is not None and job.mtime_ns > 0
    since = job.mtime_ns if conditional else 0
    if client is None:
        with new_client() as own:
            response = fetch(own, job.path, since, total_seconds)
    else:
        response = fetch(client, job.path, since, total_seconds)
    if response is None:
        return PageUnchanged(job.size, job.mtime_ns)
    digest, parsed = call(parse_page, response, job.path, size=len(response.body))
    if not force and job.stored_sha256 == digest:
        return PageUnchanged(len(response.body), response.last_modified_ns)
    return Document(
        path=job.path, root=job.root, sha256=digest, size=len(response.body),
        mtime_ns=response.last_modified_ns, title=parsed.title, chunks=parsed.chunks, source=SOURCE,
        language=parsed.language,
    )


def parse_page(response: Response, url: str) -> tuple[str, Parsed]:
    """The hash of a fetched page's text (title included) and its sections; raise FileSkipped."""
    title, text = page_text(response, url)
    digest = hashlib.sha256(f"{title or ''}\x00{text}".encode()).hexdigest()
    chunked = chunk_text(text)
    title = title or chunked.title
    language = document_hint({}, title, (c.body for c in chunked.chunks))
    return digest, Parsed(title, chunked.chunks, {}, None, language)


def new_client() -> httpx.Client:
    """An httpx client with the fetch's timeout and User-Agent; redirects are followed by hand."""
    return httpx.Client(timeout=TIMEOUT, follow_redirects=False, headers={"User-Agent": USER_AGENT})


def fetch(client: httpx.Client, url: str, if_modified_since_ns: int = 0,
          total_seconds: float = TOTAL_SECONDS) -> Response | None:
    """GET url, following up to MAX_REDIRECTS http(s) redirects, all within total_seconds; None on 304."""
    watchdog = Watchdog(total_seconds, TIMEOUT)
    with watchdog:
        try:
            return _fetch(client, url, if_modified_since_ns, watchdog)
        except FetchError:
            if watchdog.fired.is_set():
                raise FetchError(f"took longer than {total_seconds:g} s in all (knowledge.fetch_timeout)") from None
            raise


def _fetch(client: httpx.Client, url: str, if_modified_since_ns: int, watchdog: Watchdog) -> Response | None:
    headers = {"Accept": "text/html, application/xhtml+xml, text/markdown, text/plain;q=0.9, */*;q=0.1"}
    if if_modified_since_ns > 0:
        stamp = datetime.fromtimestamp(if_modified_since_ns / 1e9, tz=UTC)
        headers["If-Modified-Since"] = format_datetime(stamp, usegmt=True)
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        try:
            with client.stream("GET", current, headers=headers, timeout=watchdog.timeout(),
                               extensions={"trace": watchdog.trace}) as response:
                if response.status_code in _REDIRECTS and "location" in response.headers:
                    current = _redirect_target(current, response.headers["location"])
                    continue
                if response.status_code == 304 and if_modified_since_ns > 0:
                    return None
                if not response.is_success:
                    raise FetchError(f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
                                     + _via(url, current))
                return _read(response, watchdog)
        except httpx.TimeoutException as exc:
            raise FetchError(f"timed out ({type(exc).__name__}){_via(url, current)}") from exc
        except httpx.ConnectError as exc:
            raise FetchError(f"cannot connect: {_reason(exc)}{_via(url, current)}") from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise FetchError(f"fetch failed: {type(exc).__name__}: {_reason(exc)}{_via(url, current)}") from exc
    raise FetchError(f"more than {MAX_REDIRECTS} redirects (last to {current})")


def _redirect_target(current: str, location: str) -> str:
    try:
        target = urljoin(current, location.strip())
        scheme = urlsplit(target).scheme.lower()
    except ValueError as exc:
        raise FetchError(f"redirected to an invalid URL: {exc}") from exc
    if scheme not in WEB_SCHEMES:
        raise FetchError(f"redirected to a {scheme or 'relative'}: URL, refused (only http and https are followed)")
    return target.split("#", 1)[0]


def _read(response: httpx.Response, watchdog: Watchdog) -> Response:
    media_type, charset = _content_type(response.headers.get("content-type", ""))
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise FileSkipped(f"too large ({declared} bytes > {MAX_BODY_BYTES})")
    if media_type and media_type not in HTML_TYPES | TEXT_TYPES:
        raise FileSkipped(f"not HTML or text (Content-Type: {media_type})")
    body = bytearray()
    for piece in response.iter_bytes():  # each piece as it arrives: the deadline is checked however small
        body += piece
        if len(body) > MAX_BODY_BYTES:
            raise FileSkipped(f"too large (over {MAX_BODY_BYTES} bytes)")
        if time.monotonic() > watchdog.deadline:
            watchdog.fired.set()
            break
    if watchdog.fired.is_set():  # a body the watchdog's shutdown ended early is cut short, not whole
        raise FetchError(f"took longer than {watchdog.seconds:g} s")
    return Response(bytes(body), media_type, charset, _last_modified_ns(response.headers.get("last-modified")))


def page_text(response: Response, url: str) -> tuple[str | None, str]:
    """(title, text) of a fetched page: HTML converted, markdown and plain text as they are."""
    media_type = response.media_type
    if not media_type:
        path = urlsplit(url).path.lower()
        if path.endswith(TEXT_SUFFIXES):
            media_type = "text/plain"
        elif path.endswith((".html", ".htm", "/")) or _looks_like_html(response.body):
            media_type = "text/html"
        else:
            raise FileSkipped("no Content-Type, and neither the URL nor the body looks like HTML or text")
    html = media_type in HTML_TYPES
    text = _decode(response.body, response.charset, sniff_meta=html)
    if "\x00" in text:
        raise FileSkipped("binary content (contains NUL bytes)")
    if html:
        page = html_to_text(text)
        return page.title, page.text
    return None, strip_controls(text)


def _decode(body: bytes, charset: str | None, sniff_meta: bool) -> str:
    if body.startswith(codecs.BOM_UTF8):
        return body[3:].decode("utf-8", errors="replace")
    if charset is None and sniff_meta:
        match = _META_CHARSET.search(body[:4096])
        charset = match.group(1).decode("ascii") if match else None
    try:
        codec = codecs.lookup(charset or "utf-8").name
    except LookupError:
        codec = "utf-8"
    return body.decode(codec, errors="replace")


def _looks_like_html(body: bytes) -> bool:
    head = body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html"))


def _content_type(value: str) -> tuple[str, str | None]:
    media_type, _, params = value.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset" and val.strip():
            charset = val.strip().strip("\"'")
    return media_type.strip().lower(), charset


def _last_modified_ns(value: str | None) -> int:
    if not value:
        return 0
    try:
        stamp = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return 0
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return max(0, int(stamp.timestamp())) * 1_000_000_000


def _reason(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    return strip_controls(text)[:200]


def _via(url: str, current: str) -> str:
    return "" if current == url else f" (after a redirect to {current})"
