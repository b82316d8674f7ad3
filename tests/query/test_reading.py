"""Reading around a hit through the real store: neighbours, section expansion, budget and statuses,
and the knowledge_read tool over HTTP and MCP (stdio) only when it is allowlisted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from config.settings import Settings
from query.reader import Reader
from query.requests import MAX_AROUND
from query.serve.http_api import build_app
from query.service import read_around
from query.tools import TOOLS, exposure, knowledge_read
from tests.query.stores import build_store, store_settings
from tests.query.test_http_api import AUTH, TOKEN, Running
from tests.query.test_mcp import over_stdio, payload, write_config

STEPS = "\n\n".join(f"Install step {i}: " + "unpack the archive and check it " * 9 for i in range(8))
GUIDE = f"# Guide\n\nWhat this is.\n\n## Install\n\n{STEPS}\n\n## Use\n\nUse it well.\n\n## Remove\n\nRemove it.\n"
DOCS = {"docs/guide.md": GUIDE, "docs/other.md": "# Other\n\nSomething else.\n"}


def build(base: Path, **block: Any) -> Settings:
    return build_store(store_settings(base, **block), DOCS)


def ordinals(settings: Settings) -> dict[str, list[int]]:
    """The guide's chunk ordinals by heading path."""
    with Reader(settings) as reader:
        chunks = reader.document("docs/guide.md")
    by_section: dict[str, list[int]] = {}
    for chunk in chunks:
        by_section.setdefault(chunk.section, []).append(chunk.ordinal)
    return by_section


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return build(tmp_path_factory.mktemp("reading"))


def test_the_store_has_a_section_of_several_chunks(store: Settings) -> None:
    assert len(ordinals(store)["Guide > Install"]) >= 3


def test_neighbours_come_in_document_order_in_the_hit_shape(store: Settings) -> None:
    use = ordinals(store)["Guide > Use"][0]
    answer = read_around(store, f"docs/guide.md#{use}", before=1, after=5)
    assert answer["status"] == "ok" and answer["note"] is None and not answer["trimmed"]
    refs = [r["index_ref"] for r in answer["results"]]
    assert refs == [f"docs/guide.md#{n}" for n in range(use - 1, use + 2)]
    assert (answer["before"], answer["after"]) == (1, 1)  # the document ends after Remove
    first = answer["results"][0]
    assert list(first) == ["citation", "index_ref", "ref", "path", "section", "content", "score"]
    assert first["score"] is None and first["path"] == "docs/guide.md"


def test_expand_grows_the_hit_to_its_whole_section_keeping_the_citation(store: Settings) -> None:
    install = ordinals(store)["Guide > Install"]
    middle = install[1]
    answer = read_around(store, f"docs/guide.md#{middle}", expand=True)
    [hit] = answer["results"]
    assert hit["index_ref"] == f"docs/guide.md#{middle}" and hit["citation"] == hit["index_ref"]
    assert hit["span"] == answer["span"] == f"docs/guide.md#{install[0]}..#{install[-1]}"
    assert "Install step 0" in hit["content"] and "Install step 7" in hit["content"]
    assert "Use it well" not in hit["content"] and not answer["trimmed"]
    around = read_around(store, f"docs/guide.md#{middle}", before=1, after=1, expand=True)
    assert [r["section"] for r in around["results"]] == ["Guide", "Guide > Install", "Guide > Use"]


def test_the_budget_keeps_the_cited_section_and_says_it_trimmed(tmp_path: Path) -> None:
    settings = build(tmp_path, max_injected_tokens=1)
    install = ordinals(settings)["Guide > Install"]
    answer = read_around(settings, f"docs/guide.md#{install[1]}", before=3, after=3, expand=True)
    assert answer["status"] == "ok" and answer["trimmed"] and "trimmed to the text budget" in answer["note"]
    [hit] = answer["results"]
    assert hit["index_ref"] == f"docs/guide.md#{install[1]}"
    assert hit["span"] == f"docs/guide.md#{install[1]}..#{install[1]}"


def test_neighbours_are_added_nearest_first_alternating_until_the_budget_is_spent(
        store: Settings, tmp_path: Path) -> None:
    install = ordinals(store)["Guide > Install"]
    cited = install[1]
    with Reader(store) as reader:
        sizes = {c.ordinal: len(c.section) + len(c.content) for c in reader.document("docs/guide.md")}
    room = sizes[cited - 1] + sizes[cited] + sizes[cited + 1]  # the cited chunk and its two nearest
    settings = build(tmp_path, max_injected_tokens=room // 4 + 1)
    answer = read_around(settings, f"docs/guide.md#{cited}", before=2, after=2)
    refs = [r["index_ref"] for r in answer["results"]]
    assert answer["trimmed"] and "trimmed to the text budget" in answer["note"]
    assert refs == [f"docs/guide.md#{n}" for n in (cited - 1, cited, cited + 1)]
    assert (answer["before"], answer["after"]) == (1, 1)


def test_statuses_for_bad_unknown_and_unbuilt(store: Settings, tmp_path: Path) -> None:
    for citation, before in (("docs/guide.md", 0), ("docs/guide.md#x", 0), ("docs/guide.md#0", -1)):
        assert read_around(store, citation, before=before)["status"] == "query_error"
    missing = read_around(store, "docs/guide.md#999")
    assert missing["status"] == "not_found" and "knowledge sources" in missing["note"]
    assert read_around(store, "docs/nope.md#0")["status"] == "not_found"
    unbuilt = read_around(store_settings(tmp_path / "none"), "docs/guide.md#0")
    assert unbuilt["status"] == "index_not_built" and "knowledge index" in unbuilt["note"]


def test_before_and_after_are_capped_with_a_note(store: Settings) -> None:
    answer = read_around(store, "docs/guide.md#0", before=0, after=MAX_AROUND + 5)
    assert answer["status"] == "ok" and f"after={MAX_AROUND + 5} capped at {MAX_AROUND}" in answer["note"]


def test_the_tool_frames_its_answer_and_says_when_to_use_it(store: Settings) -> None:
    answer = knowledge_read(store, "docs/guide.md#0", after=1)
    assert answer["framing"].startswith("Untrusted") and answer["status"] == "ok" and answer["returned"] == 2
    description = TOOLS["knowledge_read"].description
    assert "Use it when" in description and "untrusted" in description and "expand" in description


def test_read_alone_is_served_with_a_warning(tmp_path: Path) -> None:
    alone = exposure(store_settings(tmp_path, expose={"mcp": {"builtins": ["knowledge_read"]}}))
    assert alone.names == ("knowledge_read",) and "no way to find one" in alone.warnings[0]
    pair = ["knowledge_search", "knowledge_read"]
    with_search = exposure(store_settings(tmp_path, expose={"mcp": {"builtins": pair}}))
    assert "cannot check completeness" in with_search.warnings[0]


def test_v1_read_answers_only_when_allowlisted(tmp_path: Path) -> None:
    served = build(tmp_path / "on", expose={"mcp": {"builtins": ["knowledge_search", "knowledge_read"]}})
    with Running(build_app(served, "127.0.0.1", TOKEN, warn=lambda m: None)) as url:
        def read(**params: Any) -> httpx.Response:
            return httpx.get(url + "/v1/read", headers=AUTH, params=params, timeout=10)

        ok = read(citation="docs/guide.md#0", after=2, expand="true")
        assert ok.status_code == 200 and ok.json()["status"] == "ok" and ok.json()["returned"] >= 2
        assert ok.json()["results"][0]["span"] == "docs/guide.md#0..#0"
        assert read(citation="docs/guide.md#999").status_code == 404
        assert read(citation="docs/guide.md#0", before="x").status_code == 400
        assert read(citation="guide").json()["status"] == "query_error"
        assert httpx.get(url + "/v1/read", headers=AUTH, params={"citation": "docs/guide.md#0"},
                         timeout=10).status_code == 200
    hidden = build(tmp_path / "off", expose={"mcp": {"builtins": ["knowledge_search"]}})
    with Running(build_app(hidden, "127.0.0.1", TOKEN, warn=lambda m: None)) as url:
        refused = httpx.get(url + "/v1/read", headers=AUTH, params={"citation": "docs/guide.md#0"}, timeout=10)
        assert refused.status_code == 404 and refused.json()["status"] == "not_served"


def test_knowledge_read_over_stdio_mcp(tmp_path: Path, store: Settings) -> None:
    names = ["knowledge_search", "knowledge_enumerate", "knowledge_read"]
    config = write_config(tmp_path, store.store_dir, expose={"mcp": {"builtins": names}})
    install = ordinals(store)["Guide > Install"]

    async def body(client: Any) -> dict[str, Any]:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        read = payload(await client.call_tool("knowledge_read", {
            "citation": f"docs/guide.md#{install[0]}", "before": 1, "expand": True}))
        bad = await client.call_tool("knowledge_read", {"citation": "guide"})
        return {"tools": tools, "read": read, "bad": (bad.is_error, payload(bad))}

    out = over_stdio(config, body, tmp_path / "stderr.txt")
    schema = out["tools"]["knowledge_read"].input_schema["properties"]
    assert {"citation", "before", "after", "expand"} <= set(schema)
    assert out["tools"]["knowledge_read"].annotations.read_only_hint is True
    read = out["read"]
    assert read["status"] == "ok" and read["framing"].startswith("Untrusted")
    assert [r["section"] for r in read["results"]] == ["Guide", "Guide > Install"]
    assert read["span"] == f"docs/guide.md#{install[0]}..#{install[-1]}"
    assert out["bad"][0] is True and out["bad"][1]["status"] == "query_error"
