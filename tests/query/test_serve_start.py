"""`knowledge serve` answers before the `mcp` SDK is imported, and its MCP endpoint still answers the first request.

The SDK is most of a start's imports (bench/RESULTS.md, "Serve start"); the MCP endpoint is built on a thread once
the server starts (query/serve/mcp_endpoint.py). tests/query/mcp_held.py runs the app with the SDK's import held.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from query.serve.mcp_endpoint import Built, LazyMcp
from tests.query.stores import DOCS, build_store, store_settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def held(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the server answered with the SDK's import held until an MCP request waited for it."""
    base = tmp_path_factory.mktemp("start")
    build_store(store_settings(base), DOCS)
    proc = subprocess.run([sys.executable, "-m", "tests.query.mcp_held", str(base)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def test_building_the_app_imports_no_mcp_sdk(held: dict[str, Any]) -> None:
    assert held["sdk_after_build"] is False


def test_healthz_and_v1_search_answer_while_the_sdk_is_not_imported(held: dict[str, Any]) -> None:
    assert held["build_started"] is True  # the MCP endpoint's build began by itself, without a request
    assert held["healthz"] == 200
    status, results = held["search"]
    assert status == 200 and results >= 1
    assert held["sdk_after_search"] is False


def test_the_first_mcp_request_waits_for_the_sdk_and_is_answered(held: dict[str, Any]) -> None:
    assert held["sdk_while_waiting"] is False  # it was inside the app before the import could finish
    (init_status, init), (call_status, call) = held["mcp"]
    assert init_status == 200 and init["result"]["serverInfo"]["name"] == "knowledge"
    assert call_status == 200 and not call["result"]["isError"]
    answer = call["result"]["structuredContent"]
    assert answer["status"] == "ok" and answer["results"][0]["path"] == "docs/retention.md"


def test_an_mcp_endpoint_whose_build_fails_answers_500_with_the_reason_and_the_rest_serves() -> None:
    def build() -> Built:
        raise ImportError("No module named 'mcp'")  # the fault: the SDK is not installed

    warned: list[str] = []
    endpoint = LazyMcp(build, warned.append)
    app = Starlette(routes=[Route("/mcp", endpoint=endpoint),
                            Route("/healthz", endpoint=lambda request: JSONResponse({"status": "ok"}))],
                    lifespan=lambda _app: endpoint.running())
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        answers = [client.post("/mcp", json={}) for _ in range(2)]
    assert [a.status_code for a in answers] == [500, 500]
    assert answers[0].json() == {"status": "error", "note": warned[0]}
    assert warned == ["the MCP endpoint could not be built: ImportError: No module named 'mcp'"]
