"""`knowledge serve`'s app in a process of its own with the `mcp` SDK's import held back: what answers without it.

Run by tests/query/test_serve_start.py as `python -m tests.query.mcp_held STORE_BASE`. The fault injected is an
SDK slow to import: the first import of `mcp` waits until released. The server (build_app and serve's uvicorn
configuration) starts; once its MCP build has reached the held import, /healthz and /v1/search are asked, then
an MCP initialize and a tools/call are sent, and the import is released once the first of them is inside the
app. Prints one JSON object: what was answered and whether the SDK was imported at each step.
"""

from __future__ import annotations

import importlib.abc
import json
import sys
import threading
import time
from collections.abc import Sequence
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import uvicorn

from query.serve.http_api import build_app, server_config
from tests.query.stores import free_port, store_settings

WAIT_S = 60.0
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class HeldImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Holds the import of the `mcp` package until released, before the package is made (so it is not in
    sys.modules meanwhile); the package is then found and loaded as it would have been.

    The wait is in create_module, where only the package's own import lock is held: a finder's find_spec runs
    under the interpreter's global import lock, and waiting there would hold every other import too.
    """

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.released = threading.Event()
        self.loader: importlib.abc.Loader | None = None

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname != "mcp" or self.loader is not None:
            return None
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        self.loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        assert self.loader is not None
        self.asked.set()
        self.released.wait(WAIT_S)
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        assert self.loader is not None
        self.loader.exec_module(module)


def rpc(method: str, params: dict[str, Any], ident: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}


def main(base: Path) -> dict[str, Any]:
    held = HeldImport()
    sys.meta_path.insert(0, held)
    settings = store_settings(base, expose={"mcp": {"builtins": ["knowledge_search", "knowledge_enumerate"]}})
    app = build_app(settings, "127.0.0.1", None, warn=lambda m: None)
    seen: dict[str, Any] = {"sdk_after_build": "mcp" in sys.modules}
    port = free_port()
    server = uvicorn.Server(server_config(app, settings, "127.0.0.1", port))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + WAIT_S
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
            time.sleep(0.02)
        seen["build_started"] = held.asked.wait(WAIT_S)  # the MCP endpoint's build is at the held import
        seen["healthz"] = httpx.get(f"{url}/healthz", timeout=WAIT_S).status_code
        search = httpx.get(f"{url}/v1/search", params={"q": "retention"}, timeout=WAIT_S)
        seen["search"] = [search.status_code, len(search.json()["results"])]
        seen["sdk_after_search"] = "mcp" in sys.modules
        answers: list[httpx.Response] = []

        def ask_mcp() -> None:
            with httpx.Client(base_url=url, headers=MCP_HEADERS, timeout=WAIT_S) as http:
                answers.append(http.post("/mcp", json=rpc("initialize", {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "test", "version": "0"}}, 1)))
                answers.append(http.post("/mcp", json=rpc("tools/call", {
                    "name": "knowledge_search", "arguments": {"query": "retention"}}, 2)))

        asking = threading.Thread(target=ask_mcp)
        asking.start()
        deadline = time.monotonic() + WAIT_S
        while not server.server_state.tasks:  # the initialize is inside the app, waiting for the build
            assert time.monotonic() < deadline and asking.is_alive(), "the MCP request never reached the app"
            time.sleep(0.01)
        seen["sdk_while_waiting"] = "mcp" in sys.modules
        held.released.set()
        asking.join(WAIT_S)
        seen["mcp"] = [[a.status_code, a.json()] for a in answers]
    finally:
        held.released.set()
        server.should_exit = True
        thread.join(WAIT_S)
    return seen


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
