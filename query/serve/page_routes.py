"""The search page's routes on `knowledge serve`: GET /, /show/<ref>, /sources, /stats, sign-in, /static.

Each handler reads through the same functions as the JSON API (search + hit_json,
enumerate_documents + document_json, sources_answer, stats_answer, Reader.chunk/document) on one
read-only Reader per request, and answers server-rendered HTML (query/serve/page.py) under a
Content-Security-Policy that allows only this server's own stylesheet and script. With a token
configured the Guard lets a page through on the bearer header or on the session cookie the sign-in
form sets (HttpOnly, SameSite=Strict, derived from the token, never the token itself); the token
never travels in a URL.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote_to_bytes

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from config.errors import KnowledgeError, QueryError
from config.settings import MAX_TOP_K, Settings
from query.citations import CitationMapper
from query.enumerate import DEFAULT_LIMIT, document_json, enumerate_documents
from query.filters import Filter
from query.highlight import excerpt, marks
from query.listing import sources_answer, stats_answer
from query.match_query import scrub
from query.rank.parsed import parse_query
from query.reader import Reader, not_built_note, open_reader, parse_ref
from query.search import hit_json, search
from query.serve import page

COOKIE = "knowledge_session"
SHOW_PREFIX = "/show/"
STATIC = {"page.css": "text/css; charset=utf-8", "page.js": "text/javascript; charset=utf-8",
          "favicon.svg": "image/svg+xml"}
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # not no-referrer: a form POST would then send Origin: null
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
MAX_FORM_BYTES = 8192
# The page routes a request may reach without the token (still under the Host and Origin checks).
OPEN_PATHS = frozenset({"/login"})
PAGE_PATHS = frozenset({"/", "/login", "/logout", "/sources", "/stats"})


def session_value(token: str) -> str:
    """The cookie value that stands for the token: an HMAC of a fixed label under it (hex)."""
    return hmac.new(token.encode(), b"knowledge page session", hashlib.sha256).hexdigest()


def owns(path: str) -> bool:
    """Whether a request path is one of the page's (where the session cookie counts)."""
    return path in PAGE_PATHS or path.startswith((SHOW_PREFIX, "/static/"))


def open_path(path: str) -> bool:
    """Whether a page path needs no token: the sign-in form and the packaged stylesheet and script."""
    return path in OPEN_PATHS or path.startswith("/static/")


def html(body: str, code: int = 200) -> HTMLResponse:
    """An HTML answer with the page's security headers."""
    return HTMLResponse(body, status_code=code, headers=SECURITY_HEADERS)


def sign_in_refusal(path: str) -> Response:
    """What a page request without the token gets: the sign-in form, 401."""
    return html(page.layout("Sign in", page.login_page(next_path=path if path in PAGE_PATHS else "/")), 401)


@dataclass
class Site:
    """The page's handlers over one Settings; `served` gates search and match exactly as on /v1."""

    settings: Settings
    served: tuple[str, ...]
    token: str | None = None

    def routes(self) -> list[tuple[str, list[str], Callable[[Request], Any]]]:
        """(path, methods, handler) for each page route."""
        return [
            ("/", ["GET"], self.home),
            ("/show/{ref:path}", ["GET"], self.show),
            ("/sources", ["GET"], self.sources),
            ("/stats", ["GET"], self.stats),
            ("/login", ["GET", "POST"], self.login),
            ("/logout", ["POST"], self.logout),
            ("/static/{name}", ["GET"], self.static),
        ]

    def _signed_in(self, request: Request) -> bool:
        return self.token is not None and request.cookies.get(COOKIE) is not None

    def _page(self, request: Request, title: str, body: str, code: int = 200, current: str = "") -> HTMLResponse:
        return html(page.layout(title, body, self._signed_in(request), current), code)

    def home(self, request: Request) -> Response:
        """The search form, and with ?q= the results of the chosen mode."""
        state, problem = form_state(request)
        form = page.search_form(state)
        if problem:
            return self._page(request, "Search", form + page.message_page("The query was refused", problem), 400, "/")
        if not state.q.strip():
            return self._page(request, "Search", "<h1>Search</h1>" + form, current="/")
        tool = "knowledge_search" if state.mode == "search" else "knowledge_enumerate"
        if tool not in self.served:
            note = f"{tool} is not exposed; name it under knowledge.expose.mcp.builtins"
            return self._page(request, "Search", form + page.message_page("Not served", note), 404, "/")
        try:
            reader = open_reader(self.settings)
            if reader is None:
                body = page.message_page("The index is not built", not_built_note(self.settings))
                return self._page(request, state.q, form + body, current="/")
            with reader:
                results = self._search(reader, state) if state.mode == "search" else self._match(reader, state)
        except QueryError as exc:
            return self._page(request, state.q, form + page.message_page("The query was refused", str(exc)), 400, "/")
        except KnowledgeError as exc:
            return self._page(request, state.q, form + page.message_page("The store could not answer", str(exc)), 500)
        return self._page(request, state.q, "<h1>Search</h1>" + form + results, current="/")

    def _search(self, reader: Reader, state: page.FormState) -> str:
        response = search(self.settings, state.q, state.top_k, reader, **_with_filter(state.keywords()))
        mapper = CitationMapper.from_settings(self.settings)
        answer = {"tier": response.tier, "status": response.status, "note": response.note,
                  "results": [hit_json(h, mapper) for h in response.hits]}
        query = (response.query or parse_query(state.q)).lexical  # the query as search read it
        snippets = [excerpt(h.content, query) for h in response.hits]
        trails = [marks(h.section, query) for h in response.hits]
        return page.search_results(state.q, answer, snippets, trails)

    def _match(self, reader: Reader, state: page.FormState) -> str:
        result = enumerate_documents(self.settings, state.q, state.top_k or DEFAULT_LIMIT, "matches", reader,
                                     **_with_filter(state.keywords()))
        mapper = CitationMapper.from_settings(self.settings)
        answer = {"status": result.status, "note": result.note, "matched": result.matched,
                  "documents": [document_json(d, mapper) for d in result.documents]}
        sections = {f"{d.path}#{d.ordinal}": d.section for d in result.documents}
        return page.match_results(state.q, answer, sections)

    def show(self, request: Request) -> Response:
        """One section with links to its neighbours, or every section of a document path."""
        ref = shown_ref(request)
        try:
            reader = open_reader(self.settings)
            if reader is None:
                return self._page(request, "Not built", page.message_page("The index is not built",
                                                                          not_built_note(self.settings)))
            with reader:
                mapper = CitationMapper.from_settings(self.settings)
                parsed = parse_ref(ref)
                hit = reader.chunk(*parsed) if parsed else None
                if hit is not None:
                    before = reader.chunk(hit.path, hit.ordinal - 1) if hit.ordinal > 0 else None
                    after = reader.chunk(hit.path, hit.ordinal + 1)
                    body = page.section_page(hit_json(hit, mapper), before.index_ref if before else None,
                                             after.index_ref if after else None)
                    return self._page(request, hit.section or hit.path, body)
                hits = reader.document(ref)
        except KnowledgeError as exc:
            return self._page(request, "Error", page.message_page("The store could not answer", str(exc)), 500)
        if not hits:
            note = f"no section or document {ref} in the index; Sources lists the documents"
            return self._page(request, "Not found", page.message_page("Not found", note), 404)
        return self._page(request, ref, page.document_page(ref, [hit_json(h, mapper) for h in hits]))

    def sources(self, request: Request) -> Response:
        """The `sources` answer as a table."""
        return self._listing(request, "Sources", "/sources",
                             lambda reader: page.sources_page(sources_answer(self.settings, reader)))

    def stats(self, request: Request) -> Response:
        """The `stats` answer as a table."""
        return self._listing(request, "Stats", "/stats",
                             lambda reader: page.stats_page(stats_answer(self.settings, reader)))

    def _listing(self, request: Request, title: str, current: str, body: Callable[[Reader], str]) -> Response:
        try:
            reader = open_reader(self.settings)
            if reader is None:
                note = page.message_page("The index is not built", not_built_note(self.settings))
                return self._page(request, title, note, current=current)
            with reader:
                return self._page(request, title, body(reader), current=current)
        except KnowledgeError as exc:
            return self._page(request, title, page.message_page("The store could not answer", str(exc)), 500)

    async def login(self, request: Request) -> Response:
        """GET: the sign-in form. POST: check the token and set the session cookie, or say it was wrong."""
        if request.method == "GET":
            return self._page(request, "Sign in", page.login_page())
        fields = await _form(request)
        offered = fields.get("token", "")
        target = fields.get("next", "/")
        target = target if target in PAGE_PATHS else "/"
        if self.token is None:
            return RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)
        if not hmac.compare_digest(offered.encode(), self.token.encode()):
            return self._page(request, "Sign in", page.login_page("That is not this server's token."), 401)
        response = RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)
        response.set_cookie(COOKIE, session_value(self.token), httponly=True, samesite="strict", path="/",
                            secure=request.url.scheme == "https")
        return response

    def logout(self, request: Request) -> Response:
        """Forget the session cookie."""
        response = RedirectResponse("/login", status_code=303, headers=SECURITY_HEADERS)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    def static(self, request: Request) -> Response:
        """The packaged stylesheet and script (query/serve/static/), nothing else."""
        name = request.path_params.get("name", "")
        if name not in STATIC:
            return Response("not found", status_code=404, media_type="text/plain")
        data = resources.files("query.serve").joinpath("static", name).read_bytes()
        headers = {**SECURITY_HEADERS, "Cache-Control": "max-age=300"}
        return Response(data, media_type=STATIC[name], headers=headers)


def form_state(request: Request) -> tuple[page.FormState, str | None]:
    """The search form's values from the query string, and a note when one is unusable."""
    params = request.query_params
    state = page.FormState(
        q=scrub(params.get("q", "")),
        mode=params.get("mode", "search") if params.get("mode") in page.MODES else "search",
        filters={spec.name: scrub(params.get(spec.name, "")) for spec in page.FILTER_FIELDS},
        toggles={t.name: params.get(t.name, "") in ("1", "on", "true") for t in page.TOGGLES},
    )
    raw = params.get("top_k", "").strip()
    if raw:
        if not raw.isdigit():
            return state, f"Results must be a whole number, got {raw!r}"
        state.top_k = min(int(raw), MAX_TOP_K if state.mode == "search" else 10_000) or None
    return state, None


def shown_ref(request: Request) -> str:
    """The ref after /show/, decoded from the raw path (bytes that are not UTF-8 kept as the index keeps them)."""
    raw = request.scope.get("raw_path")
    if isinstance(raw, bytes) and raw.startswith(SHOW_PREFIX.encode()):
        return unquote_to_bytes(raw[len(SHOW_PREFIX):]).decode("utf-8", "surrogateescape")
    return str(request.path_params.get("ref", ""))


async def _form(request: Request) -> dict[str, str]:
    """An urlencoded form body (at most MAX_FORM_BYTES), first value of each field."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return {}
    pairs = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in pairs.items()}


def _with_filter(keywords: dict[str, Any]) -> dict[str, Any]:
    """The form's keywords with its path, root and where fields as one Filter (query/filters.py)."""
    parts = {name: keywords.pop(name) for name in ("path", "root", "where") if name in keywords}
    if parts:
        keywords["filters"] = Filter.of(parts.get("path"), parts.get("root"), parts.get("where"))
    return keywords
