"""`knowledge serve`: MCP over streamable HTTP, a small JSON API and the search page on one port.

Routes: /mcp (the MCP endpoint, built as the server starts: mcp_endpoint.py), GET /v1/search, /v1/match,
/v1/read, /v1/sources, /v1/stats, /healthz, /v1/snapshots/latest and /v1/snapshots/<N>/knowledge.db (the
generations replicas pull: snapshots_route.py), /metrics (this process's metrics in the Prometheus text
format; guarded like /v1, token included) and the search page's routes (query/serve/page_routes.py: /,
/show/..., /sources, /stats, /login, /logout, /static/...). Every request passes the Guard first: its Host
must be a loopback name, the bound address or one of expose.mcp.allowed_hosts (a DNS-rebinding defence); an
Origin header, when a browser sends one, must be listed in expose.mcp.allowed_origins (none by default) or be
this very server (the Host it asked for: the page's own form posts); and with a token configured every route
but /healthz, the sign-in form and the page's static files needs `Authorization: Bearer <token>`, which on the
page's routes a live session cookie of the sign-in form stands in for. /v1/search, /v1/match and /v1/read (and
the page's two modes) answer only when their tool (knowledge_search, knowledge_enumerate, knowledge_read) is
exposed, exactly as over MCP.
"""

from __future__ import annotations

import hmac
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request, cookie_parser
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from config.errors import KnowledgeError, QueryError
from config.observability import prometheus_text
from config.settings import Settings
from query import tools
from query.replica import SnapshotIndex
from query.requests import MatchRequest, SourcesRequest, from_query
from query.serve import page_routes as site
from query.serve.mcp_endpoint import Built, LazyMcp
from query.serve.page_sessions import Sessions
from query.serve.snapshots_route import SnapshotRoutes
from query.service import QueryService
from query.status import Status, http_code

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
OPEN_PATHS = frozenset({"/healthz"})
MCP_PATH = "/mcp"


def host_name(header: str) -> str:
    """The host part of a Host header value, lowercased, without port or IPv6 brackets.

    A bracketed address followed by anything but `:port` (`[::1]evil.example`), or without its
    closing bracket, is returned whole, so it matches no allowed name.
    """
    value = header.strip().lower()
    if value.startswith("["):
        close = value.find("]")
        rest = value[close + 1:] if close > 0 else None
        if rest is not None and (rest == "" or (rest[0] == ":" and rest[1:].isdigit()) or rest == ":"):
            return value[1:close]
        return value
    name, sep, port = value.rpartition(":")
    return name if sep and port.isdigit() and ":" not in name else value


class Guard:
    """ASGI middleware: Host and Origin checks on every request, then the bearer token."""

    def __init__(
        self,
        app: ASGIApp,
        bind_host: str,
        allowed_hosts: tuple[str, ...] = (),
        allowed_origins: tuple[str, ...] = (),
        token: str | None = None,
        sessions: Sessions | None = None,
    ) -> None:
        self.app = app
        self.hosts = set(LOOPBACK_NAMES) | {h.lower() for h in allowed_hosts}
        if bind_host.lower() not in WILDCARD_HOSTS:
            self.hosts.add(host_name(bind_host))
        self.origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.token = token
        self.sessions = sessions

    def host_allowed(self, header: str | None) -> bool:
        """Whether a Host header names this server."""
        if not header:
            return False
        value = header.strip().lower()
        return value in self.hosts or host_name(value) in self.hosts

    def origin_allowed(self, header: str | None, host: str | None = None) -> bool:
        """Whether a request's Origin (absent for non-browser clients) is allowed: listed, or this server itself.

        "This server" is an Origin whose host and port are the Host the request names (already checked).
        """
        if header is None or header.rstrip("/").lower() in self.origins:
            return True
        try:
            own = urlsplit(header.strip().lower())
        except ValueError:
            return False
        return bool(host) and own.scheme in ("http", "https") and own.netloc == (host or "").strip().lower()

    def token_ok(self, header: str | None, cookie: str | None = None) -> bool:
        """Whether the Authorization header carries the configured bearer token (or the cookie its session)."""
        if self.token is None:
            return True
        if cookie is not None and self.sessions is not None and self.sessions.valid(cookie):
            return True
        scheme, _, value = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), self.token.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        path = str(scope.get("path", ""))
        page = site.owns(path)
        cookie = cookie_parser(headers.get("cookie", "")).get(site.COOKIE) if page else None
        refusal: Response | None = None
        if not self.host_allowed(headers.get("host")):
            refusal = _refuse(421, "host_refused", "the Host header names no address this server answers to; "
                                                    "add it to knowledge.expose.mcp.allowed_hosts")
        elif not self.origin_allowed(headers.get("origin"), headers.get("host")):
            refusal = _refuse(403, "origin_refused",
                              "browser origins are refused unless listed in knowledge.expose.mcp.allowed_origins")
        elif (path not in OPEN_PATHS and not (page and site.open_path(path))
              and not self.token_ok(headers.get("authorization"), cookie)):
            refusal = site.sign_in_refusal(path) if page else _refuse(
                401, "unauthorized", "this server requires `Authorization: Bearer <token>`")
            refusal.headers["WWW-Authenticate"] = "Bearer"
        if refusal is not None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _refuse(code: int, status: str, note: str) -> JSONResponse:
    return JSONResponse({"status": status, "note": note}, status_code=code)


def _json(data: dict[str, Any], code: int = 200) -> Response:
    return Response(json.dumps(data, ensure_ascii=False), status_code=code, media_type="application/json")


class JsonApi:
    """The GET /v1 handlers: each parses its request type from the query string, asks the query service and
    prints the answer's JSON."""

    def __init__(self, settings: Settings, served: tuple[str, ...], service: QueryService | None = None,
                 replica: SnapshotIndex | None = None) -> None:
        self.settings = settings
        self.served = served
        self.service = service or QueryService(settings)
        self.replica = replica  # serve --snapshots: every answer names the generation it read

    def _begin(self) -> None:
        if self.replica is not None:
            self.replica.answered_from()  # forget what an earlier request of this thread read

    def _stamped(self, data: dict[str, Any]) -> dict[str, Any]:
        if self.replica is not None:
            data["generation"] = self.replica.answered_from()
        return data

    def health(self, request: Request) -> Response:
        """Liveness: the server answers (the index may still be unbuilt); a replica adds its generation."""
        extra = self.replica.health() if self.replica is not None else {}
        return _json({"status": Status.OK, "tools": list(self.served), **extra})

    def tool(self, spec: tools.ToolSpec) -> Callable[[Request], Response]:
        """The handler of a tool's /v1 route: its request from the query string (400 when malformed), its
        answer as over MCP, the HTTP status its answer's status maps to."""
        request_type = spec.request
        assert request_type is not None

        def handle(request: Request) -> Response:
            self._begin()
            if spec.name not in self.served:
                return _json(self._stamped(_not_served(spec.name)), 404)
            try:
                parsed = from_query(request_type, request.query_params)
            except QueryError as exc:
                return _json(self._stamped({"status": Status.QUERY_ERROR, "note": str(exc)}), 400)
            answer = self._stamped(spec.answer(self.service, parsed))
            return _json(answer, spec.http_code(answer))

        handle.__doc__ = f"{spec.name} over HTTP: GET {spec.route} with its parameters in the query string."
        return handle

    def match(self, request: Request) -> Response:
        """match over HTTP, the `match --json` shape: ?q=...&limit=...&sort=matches|path&all=1, and the
        filters of /v1/search (path, root, where)."""
        self._begin()
        if "knowledge_enumerate" not in self.served:
            return _json(self._stamped(_not_served("knowledge_enumerate")), 404)
        try:
            answer = self.service.enumerate(from_query(MatchRequest, request.query_params))
        except QueryError as exc:
            return _json(self._stamped({"status": Status.QUERY_ERROR, "note": str(exc)}), 400)
        except KnowledgeError as exc:
            return _json({"status": Status.ERROR, "note": str(exc)}, 500)
        data = self._stamped(answer.to_json())
        return _json(data, http_code(data))

    def sources(self, request: Request) -> Response:
        """A page of the indexed documents (?limit=&offset=&path=; every one by default), with their mapped
        citations when rules exist."""
        return self._listing(lambda: self.service.sources(from_query(SourcesRequest, request.query_params)).to_json())

    def stats(self, request: Request) -> Response:
        """Counts and facts about the index, and the tier line."""
        return self._listing(lambda: self.service.stats().to_json())

    def metrics(self, request: Request) -> Response:
        """This process's metrics (search and enumerate latency by tier, degraded searches) for Prometheus."""
        body, content_type = prometheus_text()
        return Response(body, media_type=content_type)

    def _listing(self, answer: Callable[[], dict[str, Any]]) -> Response:
        self._begin()
        try:
            data = self._stamped(answer())
            return _json(data, http_code(data))
        except QueryError as exc:  # a path glob past its bounds
            return _json(self._stamped({"status": Status.QUERY_ERROR, "note": str(exc)}), 400)
        except KnowledgeError as exc:
            return _json({"status": Status.ERROR, "note": str(exc)}, 500)


def _not_served(tool: str) -> dict[str, str]:
    return {"status": Status.NOT_SERVED,
            "note": f"{tool} is not exposed; name it under knowledge.expose.mcp.builtins"}


def build_app(
    settings: Settings, host: str, token: str | None = None, warn: Callable[[str], None] | None = None,
    replica: SnapshotIndex | None = None,
) -> ASGIApp:
    """The guarded ASGI app: the MCP endpoint, the JSON API and the search page (of a replica's generations
    when replica is given)."""
    # one ReadIndex for every request: MCP, /v1 and the page
    service = QueryService.shared(settings) if replica is None else QueryService(settings, replica)
    if replica is None:
        service.warm()  # the first request finds a Reader open and its caches full; any meanwhile opens its own
    generation = replica.answered_from if replica is not None else None  # a replica's answers name their generation
    say = warn or _warn
    exposed = tools.exposure(settings)
    for message in exposed.warnings:  # said now, not when the MCP endpoint is built
        say(message)
    mcp_endpoint = LazyMcp(lambda: _mcp_app(settings, host, service, generation, exposed, say), say)
    served = tuple(tool.name for tool in exposed.served)
    api = JsonApi(settings, served, service, replica)
    routes: list[tuple[str, Callable[[Request], Response]]] = [("/healthz", api.health)]
    routes += [(spec.route, api.tool(spec)) for spec in tools.TOOLS.values() if spec.route and spec.request]
    routes += [("/v1/match", api.match), ("/v1/sources", api.sources), ("/v1/stats", api.stats),
               ("/metrics", api.metrics)]
    # the generations replicas pull: a primary's published directory, or a replica's own DIR (replicas chain)
    routes += SnapshotRoutes(replica.directory if replica is not None else settings.publish_dir).routes()
    mounted: list[BaseRoute] = [Route(MCP_PATH, endpoint=mcp_endpoint)]
    mounted += [Route(path, endpoint=handler, methods=["GET"]) for path, handler in routes]
    sessions = Sessions(settings.expose.mcp.session_lifetime)  # the page's sign-ins, checked by the Guard
    for path, methods, page_handler in site.Site(settings, served, token, service, sessions, generation).routes():
        mounted.append(Route(path, endpoint=page_handler, methods=methods))

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with mcp_endpoint.running():  # the MCP endpoint's build starts as the server does
            yield

    # The Guard below does the Host/Origin checks for every route, the MCP endpoint included.
    app = Starlette(routes=mounted, lifespan=lifespan)
    mcp = settings.expose.mcp
    return Guard(app, host, mcp.allowed_hosts, mcp.allowed_origins, token, sessions)


def _mcp_app(settings: Settings, host: str, service: QueryService, generation: Callable[[], int | None] | None,
             exposed: tools.Exposure, say: Callable[[str], None]) -> Built:
    """The MCP endpoint's app, on a thread of its own once the server starts (query/serve/mcp_endpoint.py)."""
    from query.serve.mcp_server import build_server, streamable_app  # the SDK: most of a start's imports

    def unsaid(message: str) -> None:  # the exposure's warnings were said at the start already
        if message not in exposed.warnings:
            say(message)

    server = build_server(settings, warn=unsaid, service=service, generation=generation)
    return streamable_app(server, MCP_PATH, host)


def _warn(message: str) -> None:
    print(f"knowledge: warning: {message}", file=sys.stderr, flush=True)


def serve(settings: Settings, host: str, port: int, token: str | None, replica: SnapshotIndex | None = None) -> None:
    """Run the HTTP server until interrupted (a replica's generations when replica is given); logs go to stderr."""
    import uvicorn

    if token is None and host_name(host) not in LOOPBACK_NAMES:
        _warn(f"serving on {host} without a bearer token: anyone who reaches the port reads the index; "
             "set knowledge.expose.mcp.token_env")
    from query.serve.connections import ACCEPT_BURST

    app = build_app(settings, host, token, _warn, replica)
    config = server_config(app, settings, host, port)
    listening = config.bind_socket()  # a port already taken stops here, as uvicorn says
    listening.listen(ACCEPT_BURST)  # connections queue from now on: the line below means the port answers
    shown = f"[{host}]" if ":" in host else host
    print(f"knowledge: serving http://{shown}:{port} (search page at /, MCP at {MCP_PATH}, JSON API at /v1)",
          file=sys.stderr, flush=True)  # what run-local.sh and people wait for
    uvicorn.Server(config).run(sockets=[listening])


def server_config(app: ASGIApp, settings: Settings, host: str, port: int) -> Any:
    """uvicorn's configuration: HTTP/1.1 with the header deadline and connection cap of query/serve/connections.py,
    the keep-alive timeout, and uvicorn's own concurrency limit off (the cap counts the connections)."""
    import uvicorn

    from query.serve.connections import ACCEPT_BURST, guarded_protocol

    mcp = settings.expose.mcp
    protocol = guarded_protocol(mcp.header_timeout, mcp.max_connections)
    return uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, http=protocol,
                          timeout_keep_alive=max(1, round(mcp.keepalive_timeout)), backlog=ACCEPT_BURST)
