"""A replica names the generation it answered from in its MCP tools' answers and on the search page's footer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pipeline import publish as pub
from query.replica import SnapshotIndex
from query.serve.http_api import build_app
from tests.query.stores import DOCS, build_store, store_settings
from tests.query.test_http_api import Running

TIMEOUT = 60


@pytest.fixture
def replica(tmp_path: Path) -> Iterator[tuple[str, SnapshotIndex, Path]]:
    """(URL, its SnapshotIndex, the primary's store) of a replica app over one published generation."""
    settings = build_store(store_settings(tmp_path, expose={"mcp": {"builtins": ["knowledge_search"]}}), DOCS)
    pub.publish(settings.db_path, settings.publish_dir)
    index = SnapshotIndex(settings, settings.publish_dir)
    index.poll()
    try:
        with Running(build_app(settings, "127.0.0.1", None, warn=lambda m: None, replica=index)) as url:
            yield url, index, settings.db_path
    finally:
        index.close()


def _tool_answer(url: str) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        with anyio.fail_after(TIMEOUT):
            async with httpx2.AsyncClient() as http:
                async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                    result = await client.call_tool("knowledge_search", {"query": "deprecated"})
        text = result.content[0]
        answer: dict[str, Any] = json.loads(getattr(text, "text", "{}"))
        return answer

    return anyio.run(main)


def test_a_replicas_mcp_answers_carry_the_generation_they_read(replica: tuple[str, SnapshotIndex, Path]) -> None:
    url, index, store = replica
    first = _tool_answer(url)
    assert first["status"] == "ok" and first["results"] and first["generation"] == 1
    pub.publish(store, store.parent / "published")
    assert index.poll() == 2
    assert _tool_answer(url)["generation"] == 2


def test_the_search_page_footer_names_the_generation_on_a_replica_only(
        replica: tuple[str, SnapshotIndex, Path], tmp_path: Path) -> None:
    url, index, store = replica
    page = httpx.get(f"{url}/", params={"q": "deprecated"}, timeout=10)
    assert page.status_code == 200 and "Answered from published generation 1." in page.text
    assert "<footer" in httpx.get(f"{url}/sources", timeout=10).text
    pub.publish(store, store.parent / "published")
    index.poll()
    assert "Answered from published generation 2." in httpx.get(f"{url}/stats", timeout=10).text
    plain = build_store(store_settings(tmp_path / "plain"), DOCS)
    with Running(build_app(plain, "127.0.0.1", None, warn=lambda m: None)) as own:
        assert "<footer" not in httpx.get(f"{own}/", params={"q": "deprecated"}, timeout=10).text
