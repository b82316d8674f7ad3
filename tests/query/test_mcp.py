"""The MCP server through the SDK's real client: `knowledge mcp` over stdio, `knowledge serve` over HTTP."""

from __future__ import annotations

import hashlib
import json
import os
import select
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
import yaml
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.query.serving import serving
from tests.query.stores import DOCS, build_store, free_port, store_settings

KNOWLEDGE = str(Path(sys.executable).with_name("knowledge"))
BOTH = ["knowledge_search", "knowledge_enumerate"]
TIMEOUT = 60


def write_config(base: Path, store: Path, **block: Any) -> Path:
    """A knowledge.yaml pointing at an absolute store directory."""
    path = base / "knowledge.yaml"
    path.write_text(yaml.safe_dump({"knowledge": {"directory": str(store), **block}}))
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("mcp")
    settings = build_store(store_settings(base), DOCS)
    return settings.store_dir


def digest(store_dir: Path) -> str:
    return hashlib.sha256((store_dir / "knowledge.db").read_bytes()).hexdigest()


def over_stdio(config: Path, body: Callable[[Client], Awaitable[Any]], errlog: Path) -> Any:
    """Spawn `knowledge mcp`, run body with a connected client, return its result."""
    params = StdioServerParameters(command=KNOWLEDGE, args=["--config", str(config), "mcp"], cwd=str(config.parent))

    async def main() -> Any:
        with anyio.fail_after(TIMEOUT), errlog.open("w") as err:
            async with Client(stdio_client(params, errlog=err)) as client:
                return await body(client)

    return anyio.run(main)


def first_text(result: Any) -> str:
    """The text of a tool result's first content block."""
    return str(result.content[0].text)


def payload(result: Any) -> dict[str, Any]:
    data = json.loads(result.content[0].text)
    assert result.structured_content == data
    return data


def test_stdio_serves_both_read_only_tools_with_statuses_notes_and_framing(tmp_path: Path, store: Path) -> None:
    config = write_config(tmp_path, store, expose={"mcp": {"builtins": BOTH}})
    before = digest(store)

    async def body(client: Client) -> dict[str, Any]:
        listed = (await client.list_tools()).tools
        out: dict[str, Any] = {"tools": {t.name: t for t in listed}}
        out["search"] = payload(await client.call_tool("knowledge_search", {"query": "retention policy", "top_k": 3}))
        out["enumerate"] = payload(await client.call_tool("knowledge_enumerate", {"query": "retention -notes"}))
        bad = await client.call_tool("knowledge_enumerate", {"query": "retention OR policy"})
        out["bad"] = (bad.is_error, payload(bad))
        for name in ("knowledge_index", "knowledge_reset", "index"):
            refused = await client.call_tool(name, {"query": "x"})
            out.setdefault("refused", []).append((refused.is_error, first_text(refused)))
        return out

    out = over_stdio(config, body, tmp_path / "stderr.txt")
    assert sorted(out["tools"]) == sorted(BOTH)
    for tool in out["tools"].values():
        assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False
        assert "verbatim" in tool.description
    search = out["search"]
    assert search["status"] == "ok" and search["note"] and search["framing"].startswith("Untrusted")
    assert search["returned"] == 3
    assert {"citation", "index_ref", "ref", "path", "section", "content", "score", "lang",
            "translations"} == set(search["results"][0])
    enum = out["enumerate"]
    assert (enum["status"], enum["matched"]) == ("ok", 2) and "complete" in enum["note"]
    assert out["bad"][0] is True and out["bad"][1]["status"] == "query_error"
    assert all(is_error and "Unknown tool" in text for is_error, text in out["refused"])
    assert digest(store) == before


def test_an_unlisted_tool_is_not_served_and_the_loss_is_warned_on_stderr(tmp_path: Path, store: Path) -> None:
    config = write_config(tmp_path, store, expose={"mcp": {"builtins": ["knowledge_search"]}})

    async def body(client: Client) -> tuple[list[str], Any]:
        names = [t.name for t in (await client.list_tools()).tools]
        return names, await client.call_tool("knowledge_enumerate", {"query": "retention"})

    names, refused = over_stdio(config, body, tmp_path / "stderr.txt")
    assert names == ["knowledge_search"]
    assert refused.is_error and "Unknown tool" in refused.content[0].text
    assert "cannot check completeness" in (tmp_path / "stderr.txt").read_text()


def test_a_missing_index_never_stops_the_server(tmp_path: Path) -> None:
    config = write_config(tmp_path, tmp_path / "no-store", expose={"mcp": {"builtins": BOTH}})

    async def body(client: Client) -> list[dict[str, Any]]:
        return [
            payload(await client.call_tool("knowledge_search", {"query": "retention"})),
            payload(await client.call_tool("knowledge_enumerate", {"query": "retention"})),
        ]

    for data in over_stdio(config, body, tmp_path / "stderr.txt"):
        assert data["status"] == "index_not_built" and "run `knowledge index`" in data["note"]


def test_budget_trimming_reaches_the_client(tmp_path: Path) -> None:
    docs = {f"docs/{i:02}.md": f"# Part {i}\n\n" + "budget words " * 60 + "\n" for i in range(12)}
    settings = build_store(store_settings(tmp_path / "b"), docs)
    config = write_config(tmp_path, settings.store_dir, max_injected_tokens=400, expose={"mcp": {"builtins": BOTH}})

    async def body(client: Client) -> list[dict[str, Any]]:
        return [
            payload(await client.call_tool("knowledge_search", {"query": "budget", "top_k": 10})),
            payload(await client.call_tool("knowledge_enumerate", {"query": "budget"})),
        ]

    search, enum = over_stdio(config, body, tmp_path / "stderr.txt")
    assert search["trimmed"] and search["returned"] == 2 and "trimmed to the text budget" in search["note"]
    assert enum["trimmed"] and enum["matched"] == 12 and 1 <= enum["returned"] < 12
    assert "trimmed to the text budget" in enum["note"]


@pytest.fixture
def http_server(tmp_path: Path, store: Path) -> Iterator[tuple[str, str]]:
    """`knowledge serve` on a free loopback port with a bearer token; yields (base url, token)."""
    port = free_port()
    token = "t0k3n-for-tests"
    expose = {"mcp": {"builtins": ["knowledge_search"], "token_env": "KQ_TEST_TOKEN"}}
    config = write_config(tmp_path, store, expose=expose)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")} | {"KQ_TEST_TOKEN": token}
    with serving(KNOWLEDGE, config, port, tmp_path, env) as base:
        yield base, token


def test_streamable_http_serves_the_allowlisted_tool_behind_the_token(
    http_server: tuple[str, str], tmp_path: Path
) -> None:
    base, token = http_server

    async def main() -> tuple[list[str], dict[str, Any], Any]:
        with anyio.fail_after(TIMEOUT):
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
                async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
                    names = [t.name for t in (await client.list_tools()).tools]
                    found = payload(await client.call_tool("knowledge_search", {"query": "deprecated"}))
                    refused = await client.call_tool("knowledge_enumerate", {"query": "deprecated"})
                    return names, found, refused

    names, found, refused = anyio.run(main)
    assert names == ["knowledge_search"]
    assert found["status"] == "ok" and found["results"][0]["path"] == "docs/api.md"
    assert refused.is_error
    assert "cannot check completeness" in (tmp_path / "serve.err").read_text()
    assert httpx.post(f"{base}/mcp", json={}, timeout=5).status_code == 401
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{base}/v1/match", params={"q": "x"}, headers=headers, timeout=5).status_code == 404
    assert httpx.post(f"{base}/v1/index", headers=headers, timeout=5).status_code in (404, 405)


def test_stdio_answers_an_unreadable_line_with_a_json_rpc_error_and_keeps_serving(tmp_path: Path, store: Path
                                                                                   ) -> None:
    config = write_config(tmp_path, store, expose={"mcp": {"builtins": BOTH}})
    proc = subprocess.Popen([KNOWLEDGE, "--config", str(config), "mcp"], cwd=tmp_path, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        lines = [b"this is {not json", b"", b'{"neither": "json-rpc"}', json.dumps(initialize).encode()]
        proc.stdin.write(b"\n".join(lines) + b"\n")
        answers = [_line(proc.stdout) for _ in range(3)]
    finally:
        proc.kill()
        proc.wait(timeout=10)
    errors = [a for a in answers if "error" in a]
    assert [(e["id"], e["error"]["code"]) for e in errors] == [(None, -32700), (None, -32600)], answers
    assert [a["id"] for a in answers if "result" in a] == [1], answers  # the server still serves


def _line(stream: Any) -> dict[str, Any]:
    """The next JSON line of a process's (unbuffered) stdout, within TIMEOUT s."""
    ready, _, _ = select.select([stream], [], [], TIMEOUT)
    assert ready, "no answer"
    return dict(json.loads(stream.readline()))


def test_the_server_names_its_package_version_on_initialize(tmp_path: Path, store: Path) -> None:
    from importlib.metadata import version

    config = write_config(tmp_path, store, expose={"mcp": {"builtins": BOTH}})
    proc = subprocess.Popen([KNOWLEDGE, "--config", str(config), "mcp"], cwd=tmp_path, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        proc.stdin.write(json.dumps(initialize).encode() + b"\n")
        answer = _line(proc.stdout)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    info = answer["result"]["serverInfo"]
    assert (info["name"], info["version"]) == ("knowledge", version("knowledge-pipeline")), answer
    assert info["version"]
