"""A tool is declared once: one request type and one function make it served over MCP and /v1, with no other edit."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from config.errors import ConfigError
from query import tools
from query.requests import doc
from query.serve.http_api import build_app
from query.service import QueryService
from query.status import Status
from tests.query.stores import DOCS, build_store, store_settings
from tests.query.test_http_api import AUTH, TOKEN, Running
from tests.query.test_mcp import payload

TIMEOUT = 30


@dataclass(frozen=True)
class EchoRequest:
    """A throwaway tool's request: a word, how often, and a filter of the usual list kind."""

    word: str = field(metadata=doc("The word to say back.", alias="w", example="hello"))
    times: int = field(default=1, metadata=doc("How often to say it (1 to 3).", minimum=1, maximum=3))
    shout: bool = field(default=False, metadata=doc("Say it in capitals."))
    path: list[str] | None = field(default=None, metadata=doc("Paths to name beside it."))


@pytest.fixture
def echo_tool() -> Iterator[str]:
    """Declare knowledge_echo the way every tool is declared, and forget it afterwards."""

    @tools.tool("knowledge_echo", "Say a word back, with the indexed document count (a test tool).", EchoRequest,
                route="/v1/echo", codes={Status.QUERY_ERROR: 400})
    def echo(service: QueryService, request: EchoRequest) -> dict[str, Any]:
        word = request.word.upper() if request.shout else request.word
        if request.times > 3:
            return {"status": Status.QUERY_ERROR, "note": "times is at most 3"}
        stats = service.stats().to_json()
        return {"status": Status.OK, "note": None, "said": [word] * request.times,
                "documents": stats["documents"], "paths": request.path or []}

    try:
        yield "knowledge_echo"
    finally:
        tools.TOOLS.pop("knowledge_echo", None)


def test_a_tool_declared_once_is_served_over_mcp_and_v1(echo_tool: str, tmp_path: Path) -> None:
    names = ["knowledge_search", "knowledge_enumerate", echo_tool]
    settings = build_store(store_settings(tmp_path, expose={"mcp": {"builtins": names}}), DOCS)
    tools.check_allowlist(settings)  # the allowlist accepts the new name with no edit of config/

    with Running(build_app(settings, "127.0.0.1", TOKEN, warn=lambda m: None)) as url:
        def get(**params: Any) -> httpx.Response:
            return httpx.get(url + "/v1/echo", headers=AUTH, params=params, timeout=10)

        said = get(w="hello", times=2, path=["a.md", "b.md"])
        assert said.status_code == 200
        body = said.json()
        assert body["framing"].startswith("Untrusted") and body["status"] == "ok"
        assert body["said"] == ["hello", "hello"] and body["documents"] == len(DOCS)
        assert body["paths"] == ["a.md", "b.md"]
        assert get(w="hey", shout="true").json()["said"] == ["HEY"]
        missing = get()
        assert missing.status_code == 400 and missing.json()["note"] == "pass the word as ?w=hello"
        assert get(w="x", times="many").status_code == 400
        assert get(w="x", times=5).status_code == 400  # the tool's own status, mapped by its declaration

        async def main() -> tuple[dict[str, Any], dict[str, Any]]:
            with anyio.fail_after(TIMEOUT):
                async with httpx2.AsyncClient(headers=AUTH) as http:
                    async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                        listed = {t.name: t for t in (await client.list_tools()).tools}
                        answer = payload(await client.call_tool(echo_tool, {"word": "hi", "times": 3}))
                        return listed[echo_tool].model_dump(), answer

        listed, answer = anyio.run(main)
    schema = listed["input_schema"]
    assert schema["required"] == ["word"]
    assert schema["properties"]["word"]["description"] == "The word to say back."
    assert (schema["properties"]["times"]["minimum"], schema["properties"]["times"]["maximum"]) == (1, 3)
    assert listed["description"].startswith("Say a word back")
    assert listed["annotations"]["read_only_hint"] is True
    assert answer["status"] == "ok" and answer["said"] == ["hi"] * 3 and answer["framing"].startswith("Untrusted")


def test_an_undeclared_tool_is_refused_by_the_allowlist(tmp_path: Path) -> None:
    settings = store_settings(tmp_path, expose={"mcp": {"builtins": ["knowledge_echo"]}})
    with pytest.raises(ConfigError, match="'knowledge_echo', which is not a tool knowledge serves"):
        tools.check_allowlist(settings)
