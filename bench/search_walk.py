"""The walk of one search from the HTTP route to SQL and back: the project's functions it crosses, and their files.

```
.venv/bin/python -m bench.search_walk [--query "how are deletions reconciled"] [--json]
```

Indexes this repository's docs/ into a temporary store, builds `knowledge serve`'s app (query/serve/http_api.py)
and asks GET /v1/search twice through httpx's ASGITransport, each on a fresh event loop: the first request warms
the process (imports, the kept Reader), the second is traced with sys.setprofile and threading.setprofile. A
stop is one distinct (file, function) of the five packages that the request called (comprehensions and lambdas
count as the function holding them); a return is a call into a file already left earlier in the same request
(the reader's jumps back). Prints the stops, files and returns, then the walk itself (first call order) unless
--json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("config", "pipeline", "workers", "query", "cli")


class Walk:
    """The project functions called while tracing, in first-call order, and the file-to-file moves."""

    def __init__(self) -> None:
        self.stops: dict[tuple[str, str], None] = {}
        self.files: dict[str, None] = {}
        self.calls = 0
        self.returns = 0
        self._last_file: str | None = None
        self._lock = threading.Lock()

    def profile(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        path = Path(frame.f_code.co_filename)
        try:
            relative = path.resolve().relative_to(ROOT)
        except ValueError:
            return
        if relative.parts[0] not in PACKAGES or "<" in frame.f_code.co_qualname:
            return  # comprehensions, generator expressions and lambdas are part of the function that holds them
        name = str(relative)
        with self._lock:
            self.calls += 1
            self.stops.setdefault((name, frame.f_code.co_qualname), None)
            if name != self._last_file:
                if name in self.files:
                    self.returns += 1
                self.files.setdefault(name, None)
                self._last_file = name


def ask(app: Any, query: str) -> int:
    """GET /v1/search?q=query through the ASGI app on a fresh event loop (so on fresh worker threads)."""
    import httpx

    async def get() -> int:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return (await client.get("/v1/search", params={"q": query})).status_code

    return asyncio.run(get())


def measure(query: str) -> dict[str, Any]:
    """Index docs/ into a temporary store and trace one warm GET /v1/search of query."""
    from cli import main
    from config.loader import settings_from_mapping
    from query.serve.http_api import build_app

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        os.chdir(tmp)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                main(["--store-dir", str(store), "index", str(ROOT / "docs")])
        except SystemExit as exc:  # main() ends with sys.exit
            if exc.code:
                raise
        settings = settings_from_mapping({"expose": {"mcp": {"builtins": ["knowledge_search"]}}},
                                          store_base=store.resolve())
        app = build_app(settings, "127.0.0.1")
        assert ask(app, query) == 200
        walk = Walk()
        threading.setprofile(walk.profile)  # a new event loop's worker threads (the sync route runs on one)
        sys.setprofile(walk.profile)
        try:
            code = ask(app, query)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
        assert code == 200
    return {"query": query, "stops": len(walk.stops), "files": len(walk.files), "returns": walk.returns,
            "calls": walk.calls, "walk": [f"{file}:{function}" for file, function in walk.stops]}


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", default="how are deletions reconciled")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found = measure(args.query)
    if args.json:
        print(json.dumps(found, indent=2))
        return
    print(f"{found['stops']} stops in {found['files']} files, {found['returns']} returns to a file already left "
          f"({found['calls']} calls)")
    for stop in found["walk"]:
        print(f"  {stop}")


if __name__ == "__main__":
    main_()
