"""The agent tools: reference JSON shapes, statuses and notes, citations, exposure gates."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from config.errors import ConfigError
from pipeline.store import Store
from query import tools
from query.tools import ToolSpec, exposure, knowledge_enumerate, knowledge_search
from tests.query.stores import DOCS, build_store, store_settings

RULES = [{"pattern": r"^docs/(.+)\.md$", "replace": "https://docs.example.net/$1/#${anchor}"}]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    return build_store(store_settings(tmp_path_factory.mktemp("tools"), citations=RULES), DOCS)


def test_search_results_carry_the_mapped_citation_the_raw_index_ref_and_the_path(built) -> None:
    data = knowledge_search(built, "retention policy")
    assert data["status"] == "ok" and data["note"] and data["framing"].startswith("Untrusted reference data")
    by_ref = {r["index_ref"]: r for r in data["results"]}
    shape = ["citation", "index_ref", "ref", "path", "section", "content", "score", "lang", "translations"]
    assert all(list(r) == shape for r in data["results"])
    section = by_ref["docs/retention.md#1"]
    assert section["citation"] == "https://docs.example.net/retention/#exceptions"
    assert (section["path"], section["section"]) == ("docs/retention.md", "Retention policy > Exceptions")
    assert by_ref["docs/retention.md#0"]["citation"] == "https://docs.example.net/retention/#retention-policy"
    unmapped = next(r for r in data["results"] if r["path"] == "notes.md")
    assert unmapped["citation"] == unmapped["index_ref"] == "notes.md#0"


def test_enumerate_documents_carry_a_document_citation_the_first_sections_index_ref_and_path(built) -> None:
    data = knowledge_enumerate(built, "retention -notes")
    assert data["status"] == "ok" and data["matched"] == 2 and not data["trimmed"]
    doc = next(d for d in data["documents"] if d["path"] == "docs/retention.md")
    assert doc["citation"] == "https://docs.example.net/retention/"  # the document matched, not one section
    assert doc["index_ref"] == "docs/retention.md#0"
    assert data["terms"][0]["documents_any_form"] == 3 and data["terms"][1]["excluded"]
    assert f"all 2 matching documents of {data['indexed_documents']}" in data["note"]
    assert "never ranked" in data["note"]


def test_every_status_comes_with_a_note(built, tmp_path: Path) -> None:
    unbuilt = store_settings(tmp_path / "none")
    for data in (knowledge_search(unbuilt, "x y"), knowledge_enumerate(unbuilt, "retention")):
        assert data["status"] == "index_not_built" and "knowledge index" in data["note"]
    empty = store_settings(tmp_path / "empty")
    Store(empty.db_path).close()
    assert knowledge_search(empty, "retention")["status"] == "index_empty"
    data = knowledge_enumerate(empty, "retention")
    assert data["status"] == "corpus_empty" and data["note"]
    data = knowledge_enumerate(built, "a b")
    assert data["status"] == "query_empty" and "dropped terms under two characters: a, b" in data["note"]
    data = knowledge_enumerate(built, "retention OR policy")
    assert data["status"] == "query_error" and "OR is not supported" in data["note"]
    data = knowledge_search(built, "zzzunknownword")
    assert data["status"] == "ok" and data["results"] == [] and data["note"]
    data = knowledge_search(built, "?")
    assert data["status"] == "ok" and "no searchable terms" in data["note"]
    for data in (knowledge_search(built, "retention"), knowledge_enumerate(built, "retention")):
        assert data["note"] and data["framing"]


def test_top_k_above_20_is_clamped_with_a_note_and_0_means_the_configured_count(tmp_path: Path) -> None:
    docs = {f"d/{i:02}.md": f"# Doc {i}\n\ncommon word\n" for i in range(30)}
    settings = build_store(store_settings(tmp_path, max_injected_tokens=100_000), docs)
    clamped = knowledge_search(settings, "common", top_k=500)
    assert clamped["returned"] == 20 and "top_k 500 is above the cap of 20" in clamped["note"]
    assert knowledge_search(settings, "common", top_k=0)["returned"] == 5
    assert knowledge_search(settings, "common")["returned"] == 5
    refused = knowledge_search(settings, "common", top_k=-3)
    assert refused["status"] == "query_error" and "top_k must be 0" in refused["note"]


def test_descriptions_tell_the_model_how_to_cite_and_what_to_keep_off_the_page() -> None:
    for spec in tools.TOOLS.values():
        assert "`citation`" in spec.description and "verbatim" in spec.description
        assert "`index_ref`" in spec.description and "index key" in spec.description
        assert "`path`" in spec.description and "off the page" in spec.description
        assert "untrusted" in spec.description.lower() or "complete" in spec.description


def settings_with(*builtins: str):
    return store_settings(Path("/nonexistent"), expose={"mcp": {"builtins": list(builtins)}})


def test_the_allowlist_selects_which_servable_tools_are_served() -> None:
    both = exposure(settings_with("knowledge_search", "knowledge_enumerate"))
    assert both.names == ("knowledge_search", "knowledge_enumerate") and both.warnings == ()
    assert exposure(settings_with()).names == ()
    assert "no tool is served" in exposure(settings_with()).warnings[0]


def test_serving_one_tool_warns_what_the_caller_loses() -> None:
    only_search = exposure(settings_with("knowledge_search"))
    assert only_search.names == ("knowledge_search",)
    assert "cannot check completeness" in only_search.warnings[0]
    only_enum = exposure(settings_with("knowledge_enumerate"))
    assert "no way to read the text" in only_enum.warnings[0]


def test_the_allowlist_never_widens_past_tools_that_declare_themselves_servable() -> None:
    registry = dict(tools.TOOLS)
    registry["knowledge_index"] = ToolSpec(
        "knowledge_index", "writes", read_only=False, servable=True, call=lambda *a: {}
    )
    registry["knowledge_show"] = ToolSpec("knowledge_show", "reads", read_only=True, servable=False, call=lambda *a: {})
    # The CLI refuses names outside tools.servable(); exposure() still guards settings built otherwise.
    base = settings_with()
    unchecked = dataclasses.replace(base, expose=dataclasses.replace(base.expose, mcp=dataclasses.replace(
        base.expose.mcp, builtins=("knowledge_index", "knowledge_show", "knowledge_search", "nonsense"))))
    chosen = exposure(unchecked, registry)
    assert chosen.names == ("knowledge_search",)
    text = " ".join(chosen.warnings)
    assert "knowledge_index does not declare MCP exposure" in text
    assert "knowledge_show does not declare MCP exposure" in text
    assert "'nonsense', which is not a servable tool" in text


def test_the_names_the_allowlist_accepts_are_exactly_the_servable_tools() -> None:
    servable = tuple(name for name, spec in tools.TOOLS.items() if spec.servable and spec.read_only)
    assert servable == tools.servable() == ("knowledge_search", "knowledge_enumerate", "knowledge_read")
    tools.check_allowlist(settings_with(*servable))
    with pytest.raises(ConfigError, match="'knowledge_serch', which is not a tool knowledge serves"):
        tools.check_allowlist(settings_with("knowledge_search", "knowledge_serch"))
