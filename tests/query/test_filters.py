"""Filters and explain on the hybrid tier (a real embedding server), over HTTP and over MCP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from query.filters import Filter, document_ids_json
from query.fusion import RRF_K
from query.reader import Reader
from query.search import to_json
from query.serve.http_api import build_app
from query.vector import embed_query, knn_exact, knn_within, query_identity
from tests.embedserver import EmbedServer
from tests.lent import search
from tests.query.stores import build_store, store_settings
from tests.query.test_http_api import AUTH, TOKEN, Running, get
from tests.query.test_hybrid import index_hybrid, settings_of
from tests.query.test_mcp import over_stdio, payload
from tests.query.test_mcp import write_config as write_mcp_config

BOTH = ["knowledge_search", "knowledge_enumerate"]
DOCS = {
    "docs/api/auth.md": "---\ntitle: Auth\ntags: [security, api]\n---\n# Tokens\n\nTokens expire; rotate the token.\n",
    "docs/api/limits.md": "---\ntags: api\n---\n# Limits\n\nA token bucket limits each caller.\n",
    "docs/guide/start.md": "---\ntags: security\n---\n# Start\n\nCreate a token before calling.\n",
    "docs/guide/queues.md": "# Queues\n\nMessages wait in a queue until a worker takes them.\n",
    "docs/guide/budget.md": "# Budgets\n\nLimit the cost of each run with a budget cap.\n",
}


@pytest.fixture
def hybrid(workdir: Path, server: EmbedServer, run_cli) -> Path:
    index_hybrid(workdir, server, run_cli, DOCS)
    return workdir


def test_filtered_knn_is_the_exact_ranking_restricted_to_the_allowed_documents(hybrid: Path,
                                                                               server: EmbedServer) -> None:
    settings = settings_of(hybrid, server)
    with Reader(settings) as reader:
        identity = query_identity(settings.embeddings, reader.meta, settings.db_path)
        vector = embed_query(settings.embeddings, identity, "token rotation")
        allowed = Filter.of(paths="docs/guide/**").documents(reader.conn)
        rows = reader.conn.execute("SELECT id, document_id FROM chunks").fetchall()
        chunks = {int(cid) for cid, doc in rows if doc in allowed}
        everything = knn_exact(reader.conn, vector, 100)
        within = knn_within(reader.conn, vector, document_ids_json(allowed), 100)
    assert [cid for cid, _ in within] == [cid for cid, _ in everything if cid in chunks]
    assert [d for _, d in within] == pytest.approx([d for cid, d in everything if cid in chunks])


def test_hybrid_explain_gives_ranks_distances_and_rrf_shares(hybrid: Path, server: EmbedServer) -> None:
    settings = settings_of(hybrid, server)
    plain = to_json(search(settings, "token", 5))
    explained = to_json(search(settings, "token", 5, explain=True))
    assert [{k: v for k, v in r.items() if k != "explain"} for r in explained["results"]] == plain["results"]
    for hit in explained["results"]:
        why = hit["explain"]
        assert why["ranking"] == "hybrid" and why["vector"]["distance"] >= 0
        parts = [1 / (RRF_K + why[t]["rank"]) if why[t] else 0.0 for t in ("lexical", "vector")]
        assert why["rrf"]["score"] == pytest.approx(sum(parts), abs=1e-6) == pytest.approx(hit["score"], abs=1e-6)
        assert why["rrf"]["lexical_share"] + why["rrf"]["vector_share"] == pytest.approx(1, abs=1e-3)
        if why["lexical"]:
            assert why["lexical"]["bm25"] < 0
    filtered = search(settings, "token", 5, filters=Filter.of(where=["tags=security"]), explain=True)
    assert {h.path for h in filtered.hits} == {"docs/api/auth.md", "docs/guide/start.md"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("filters")
    settings = build_store(store_settings(base, expose={"mcp": {"builtins": BOTH}}), DOCS)
    return settings.store_dir


def test_v1_search_and_match_take_filters_and_explain(store: Path) -> None:
    settings = store_settings(store.parent.parent, expose={"mcp": {"builtins": BOTH}})
    with Running(build_app(settings, "127.0.0.1", TOKEN, warn=lambda m: None)) as url:
        found = get(url, "/v1/search", AUTH, q="token", where="tags=security", explain="true").json()
        assert {r["path"] for r in found["results"]} == {"docs/api/auth.md", "docs/guide/start.md"}
        assert found["filters"] == {"path": [], "root": [], "where": ["tags=security"], "lang": []}
        assert all(r["explain"]["lexical"]["rank"] >= 1 for r in found["results"])
        plain = get(url, "/v1/search", AUTH, q="token").json()
        assert "filters" not in plain and all("explain" not in r for r in plain["results"])
        both = httpx_get(url, "/v1/search", [("q", "token"), ("path", "docs/api/**"), ("path", "docs/guide/start.md")])
        assert {r["path"] for r in both["results"]} == {"docs/api/auth.md", "docs/api/limits.md",
                                                        "docs/guide/start.md"}
        match = httpx_get(url, "/v1/match", [("q", "token"), ("path", "docs/api")])
        assert match["matched"] == 2 and "filtered to path docs/api" in match["note"]
        bad = get(url, "/v1/search", AUTH, q="token", where="tags")
        assert bad.json()["status"] == "query_error"


def httpx_get(url: str, path: str, params: list[tuple[str, str | int | float | bool | None]]) -> dict[str, Any]:
    """A GET with repeated parameters (`get` takes one value per name, and `path` names the route)."""
    return dict(httpx.get(url + path, headers=AUTH, params=params, timeout=10).json())


def test_mcp_describes_and_applies_the_filters(tmp_path: Path, store: Path) -> None:
    config = write_mcp_config(tmp_path, store, expose={"mcp": {"builtins": BOTH}})

    async def body(client: Client) -> dict[str, Any]:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        out: dict[str, Any] = {"schemas": {n: t.input_schema for n, t in tools.items()},
                               "descriptions": {n: t.description for n, t in tools.items()}}
        out["search"] = payload(await client.call_tool(
            "knowledge_search", {"query": "token", "where": {"tags": "api"}, "explain": True}))
        out["enumerate"] = payload(await client.call_tool(
            "knowledge_enumerate", {"query": "token", "path": ["docs/guide/**"]}))
        return out

    out = over_stdio(config, body, tmp_path / "err.log")
    search_schema = out["schemas"]["knowledge_search"]["properties"]
    assert {"path", "root", "where", "explain"} <= set(search_schema)
    assert "glob" in json.dumps(search_schema["path"]) and "tags=security" in json.dumps(search_schema["where"])
    assert {"path", "root", "where"} <= set(out["schemas"]["knowledge_enumerate"]["properties"])
    assert "where" in out["descriptions"]["knowledge_search"] and "explain" in out["descriptions"]["knowledge_search"]
    assert {r["path"] for r in out["search"]["results"]} == {"docs/api/auth.md", "docs/api/limits.md"}
    assert all("explain" in r for r in out["search"]["results"])
    assert [d["path"] for d in out["enumerate"]["documents"]] == ["docs/guide/start.md"]


def test_cjk_queries_are_filtered_too(tmp_path: Path) -> None:
    docs = {f"{area}/{i}.md": f"# 文档 {i}\n\n数据库的备份策略 {area} {i}。缓存\n"
            for area in ("zh", "other") for i in range(3)}
    settings = build_store(store_settings(tmp_path), docs)
    for text in ("备份策略", "缓存"):  # a trigram run, and a run under three characters
        found = search(settings, text, 10, filters=Filter.of(roots="zh"))
        assert {h.path for h in found.hits} == {f"zh/{i}.md" for i in range(3)}, text
        assert len(search(settings, text, 10).hits) == 6


@pytest.mark.timeout(60)
def test_a_hostile_path_glob_over_http_answers_at_once_and_one_past_the_bounds_is_a_query_error(store: Path) -> None:
    settings = store_settings(store.parent.parent, expose={"mcp": {"builtins": BOTH}})
    hostile = "**/*a*a*/**/*a*a*/**/*a*a*/**/*a*a*/**/*a*a*/**/*a*a*/b"  # hours as a backtracking regex
    with Running(build_app(settings, "127.0.0.1", TOKEN, warn=lambda m: None)) as url:
        for _ in range(3):
            found = httpx_get(url, "/v1/search", [("q", "token"), ("path", hostile)])
            assert found["status"] == "ok" and found["results"] == []
        matched = httpx_get(url, "/v1/match", [("q", "token"), ("path", hostile)])
        assert matched["matched"] == 0
        too_long = httpx_get(url, "/v1/search", [("q", "token"), ("path", "docs/" + "*" * 600)])
        assert too_long["status"] == "query_error" and "at most 512 characters" in too_long["note"]
        assert get(url, "/healthz", AUTH).status_code == 200
