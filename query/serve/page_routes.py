"""The search page's routes on `knowledge serve`: GET /, /show/<ref>, /sources, /stats, sign-in, /static.

Each handler asks the same query service as the JSON API (query/service.py) and renders its answers'
JSON (search_results gets `search --json`'s shape, match_results `match --json`'s), as
server-rendered HTML (query/serve/page.py) under a
Content-Security-Policy that allows only this server's own stylesheet and script. With a token
configured the Guard lets a page through on the bearer header or on the session cookie the sign-in
form sets (HttpOnly, SameSite=Strict, a random session of its own with an expiry, revoked on the
server by Sign out: query/serve/page_sessions.py); the token never travels in a URL, and the form's
guesses are rate limited per client address (429 with Retry-After).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote_to_bytes

from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from config.errors import KnowledgeError, QueryError
from config.settings import MAX_TOP_K, Settings
from query.enumerate import DEFAULT_LIMIT
from query.highlight import excerpt, marks
from query.match_query import scrub
from query.rank.parsed import parse_query
from query.requests import MatchRequest, SearchRequest, ShowRequest, SourcesRequest
from query.serve import page
from query.serve.page_sessions import LoginLimiter, Sessions, same
from query.service import QueryService
from query.status import Status
from query.terminal import FORMATTING_TAGS, preview_text

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


class RefConvertor(Convertor[str]):
    """The ref after /show/: anything, newlines included (starlette's `path` stops at a newline, so a file
    name holding one was a bare 404); shown_ref() reads it from the raw path."""

    regex = "(?s:.+)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("ref", RefConvertor())


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


class Site:
    """The page's handlers over one query service; `served` gates search and match exactly as on /v1."""

    def __init__(self, settings: Settings, served: tuple[str, ...], token: str | None = None,
                 service: QueryService | None = None, sessions: Sessions | None = None,
                 generation: Callable[[], int | None] | None = None) -> None:
        self.settings = settings
        self.generation = generation  # a replica's answered_from: the footer names the generation read
        self.served = served
        self.token = token
        self.service = service or QueryService(settings)
        self.sessions = sessions or Sessions(settings.expose.mcp.session_lifetime)
        self.limiter = LoginLimiter()

    def routes(self) -> list[tuple[str, list[str], Callable[[Request], Any]]]:
        """(path, methods, handler) for each page route."""
        return [
            ("/", ["GET"], self.home),
            ("/show/{ref:ref}", ["GET"], self.show),
            ("/sources", ["GET"], self.sources),
            ("/stats", ["GET"], self.stats),
            ("/login", ["GET", "POST"], self.login),
            ("/logout", ["POST"], self.logout),
            ("/static/{name}", ["GET"], self.static),
        ]

    def _signed_in(self, request: Request) -> bool:
        return self.token is not None and self.sessions.valid(request.cookies.get(COOKIE))

    def _page(self, request: Request, title: str, body: str, code: int = 200, current: str = "") -> HTMLResponse:
        footer = page.generation_footer(self.generation()) if self.generation is not None else ""
        return html(page.layout(title, body, self._signed_in(request), current, footer), code)

    def _begin(self) -> None:
        if self.generation is not None:
            self.generation()  # forget what an earlier request on this thread read

    def home(self, request: Request) -> Response:
        """The search form, and with ?q= the results of the chosen mode."""
        self._begin()
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
            if state.mode == "search":
                status, said, results = self._search(state)
            else:
                status, said, results = self._match(state)
        except QueryError as exc:
            return self._page(request, state.q, form + page.message_page("The query was refused", str(exc)), 400, "/")
        except KnowledgeError as exc:
            return self._page(request, state.q, form + page.message_page("The store could not answer", str(exc)), 500)
        if status == Status.INDEX_NOT_BUILT:
            return self._page(request, state.q, form + page.message_page("The index is not built", said or ""),
                              current="/")
        return self._page(request, state.q, "<h1>Search</h1>" + form + results, current="/")

    def _search(self, state: page.FormState) -> tuple[Status, str | None, str]:
        keywords = state.keywords()
        answer = self.service.search(SearchRequest(
            state.q, state.top_k, _one(keywords.get("path")), _one(keywords.get("root")),
            _one(keywords.get("where")), bool(keywords.get("explain")), keywords.get("lang")))
        query = (answer.response.query or parse_query(state.q)).lexical  # the query as search read it
        # no mkdocs markup nor formatting tags; another tag (<script>) is shown as text, escaped
        snippets = [excerpt(preview_text(h.content, FORMATTING_TAGS), query) for h in answer.hits]
        trails = [marks(h.section, query) for h in answer.hits]
        return answer.status, answer.response.note, page.search_results(state.q, answer.to_json(), snippets, trails)

    def _match(self, state: page.FormState) -> tuple[Status, str | None, str]:
        keywords = state.keywords()
        answer = self.service.enumerate(MatchRequest(
            state.q, state.top_k or DEFAULT_LIMIT, path=_one(keywords.get("path")), root=_one(keywords.get("root")),
            where=_one(keywords.get("where")), lang=keywords.get("lang")))
        sections = {f"{d.path}#{d.ordinal}": d.section for d in answer.result.documents}
        return answer.status, answer.result.note, page.match_results(state.q, answer.to_json(), sections)

    def show(self, request: Request) -> Response:
        """One section with links to its neighbours, or every section of a document path."""
        self._begin()
        ref = shown_ref(request)
        try:
            answer = self.service.show(ShowRequest(ref, neighbours=True))
        except KnowledgeError as exc:
            return self._page(request, "Error", page.message_page("The store could not answer", str(exc)), 500)
        if answer.status == Status.INDEX_NOT_BUILT:
            return self._page(request, "Not built", page.message_page("The index is not built", answer.note or ""))
        if answer.status == Status.NOT_FOUND:
            note = f"no section or document {ref} in the index; Sources lists the documents"
            return self._page(request, "Not found", page.message_page("Not found", note), 404)
        if answer.status == Status.QUERY_ERROR:  # a short ref several sections share
            return self._page(request, "Ambiguous", page.message_page("Ambiguous ref", answer.note or ""), 400)
        if answer.cited:
            hit = answer.hits[0]
            body = page.section_page(answer.results()[0], answer.previous, answer.following)
            return self._page(request, hit.section or hit.path, body)
        return self._page(request, ref, page.document_page(ref, answer.results()))

    def sources(self, request: Request) -> Response:
        """A page of the `sources` answer as a table (?path= a prefix or glob, ?offset= where the page starts)."""
        path = scrub(request.query_params.get("path", "")).strip()
        raw = request.query_params.get("offset", "").strip()
        wanted = SourcesRequest(page.SOURCES_PAGE, int(raw) if raw.isdigit() else 0, [path] if path else None)
        return self._listing(request, "Sources", "/sources", lambda: self.service.sources(wanted).to_json(),
                             lambda data: page.sources_page(data, path))

    def stats(self, request: Request) -> Response:
        """The `stats` answer as a table."""
        return self._listing(request, "Stats", "/stats", lambda: self.service.stats().to_json(), page.stats_page)

    def _listing(self, request: Request, title: str, current: str, answer: Callable[[], dict[str, Any]],
                 render: Callable[[dict[str, Any]], str]) -> Response:
        self._begin()
        try:
            data = answer()
        except QueryError as exc:  # a path glob past its bounds
            return self._page(request, title, page.message_page("The path was refused", str(exc)), 400, current)
        except KnowledgeError as exc:
            return self._page(request, title, page.message_page("The store could not answer", str(exc)), 500)
        if data["status"] == Status.INDEX_NOT_BUILT:
            return self._page(request, title, page.message_page("The index is not built", data["note"]),
                              current=current)
        return self._page(request, title, render(data), current=current)

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
        client = request.client.host if request.client else ""
        wait = self.limiter.wait(client)
        if wait > 0:
            note = f"Too many wrong tokens from this address; try again in {math.ceil(wait)} s."
            refused = self._page(request, "Sign in", page.login_page(note), 429)
            refused.headers["Retry-After"] = str(math.ceil(wait))
            return refused
        if not same(offered, self.token):
            self.limiter.failed(client)
            return self._page(request, "Sign in", page.login_page("That is not this server's token."), 401)
        self.limiter.succeeded(client)
        lifetime = self.sessions.lifetime
        response = RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)
        response.set_cookie(COOKIE, self.sessions.open(), max_age=int(lifetime), httponly=True, samesite="strict",
                            path="/", secure=request.url.scheme == "https")
        return response

    def logout(self, request: Request) -> Response:
        """End the session on the server (its cookie no longer works anywhere) and forget the cookie."""
        self.sessions.revoke(request.cookies.get(COOKIE))
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


def _one(value: object) -> list[str] | None:
    """A form field's text as the one-item list a request takes (None when empty)."""
    return [str(value)] if value else None
