"""`knowledge serve`'s MCP endpoint, built off the start's path: the port answers /healthz, /v1 and the search
page before the `mcp` SDK is imported (most of a start's time, the more so on a loaded machine: bench/RESULTS.md,
"Serve start").

The server's lifespan starts the build on a thread of its own (import the SDK, register the exposed tools, make its
streamable HTTP app) as the server starts, right after the socket listens, then keeps the app's session manager
running until the server stops. A request to the endpoint that arrives meanwhile waits for the build, so an MCP
client sees what it saw when the build came first, only sooner; it is never refused for it. A build that
failed answers each such request 500 with the reason (also said on stderr).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from query.status import Status

# The SDK's app and the lifetime of what it needs while serving (its session manager's run()).
Built = tuple[ASGIApp, Callable[[], AbstractAsyncContextManager[Any]]]


class LazyMcp:
    """An ASGI app standing for the MCP endpoint: the one build makes answers every request, once it is done."""

    def __init__(self, build: Callable[[], Built], warn: Callable[[str], None]) -> None:
        self.build = build
        self.warn = warn
        self.app: ASGIApp | None = None
        self.failure: str | None = None
        self.ready: anyio.Event | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """For the server's lifespan: the build under way on its thread from entry, its app served until exit."""
        self.ready = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(self._run)
            try:
                yield
            finally:
                group.cancel_scope.cancel()

    async def _run(self) -> None:
        assert self.ready is not None
        built, token = anyio.Event(), anyio.lowlevel.current_token()
        outcome: list[Built | Exception] = []

        def build() -> None:
            try:
                outcome.append(self.build())
            except Exception as exc:  # noqa: BLE001 - the SDK missing or a tool it refuses: /v1 still serves
                outcome.append(exc)
            with suppress(RuntimeError):  # the server stopped meanwhile: its loop is gone
                anyio.from_thread.run_sync(built.set, token=token)

        # a daemon thread: a server stopped during the build exits without waiting for the SDK's import
        threading.Thread(target=build, name="knowledge-mcp-build", daemon=True).start()
        await built.wait()
        if isinstance(outcome[0], Exception):
            self.failure = f"the MCP endpoint could not be built: {type(outcome[0]).__name__}: {outcome[0]}"
            self.warn(self.failure)
            self.ready.set()
            return
        app, lifetime = outcome[0]
        async with lifetime():
            self.app = app
            self.ready.set()
            await anyio.sleep_forever()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.ready is None:
            raise RuntimeError("the MCP endpoint is served only inside its server's lifespan (LazyMcp.running)")
        await self.ready.wait()
        if self.app is None:
            await JSONResponse({"status": Status.ERROR, "note": self.failure}, status_code=500)(scope, receive, send)
            return
        await self.app(scope, receive, send)
