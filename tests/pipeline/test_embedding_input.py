"""The embedded text: sections carry their breadcrumb, the recipe is pinned, queries are cut at 8,192 bytes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline import db, schema
from pipeline.embedding_input import BODY, BREADCRUMB, MAX_QUERY_BYTES, document_text, query_text, utf8_head
from tests.conftest import damage_store, write_tree
from tests.embedserver import EmbedServer

GUIDE = "# Guide\n\nAn overview of the tool.\n\n## Install\n\n### Linux\n\nRun the installer as root.\n"


@pytest.fixture
def server() -> Iterator[EmbedServer]:
    with EmbedServer(dim=24) as running:
        yield running


@pytest.fixture
def tree(workdir: Path, server: EmbedServer) -> Path:
    write_tree(workdir, {"docs/guide.md": GUIDE, "docs/plain.txt": "No headings here at all.\n"})
    (workdir / "knowledge.yaml").write_text(
        f"knowledge:\n  paths: [docs]\n  embeddings:\n    base_url: {server.base_url}\n"
        "    model: hashed-bow\n    timeout: 1\n", encoding="utf-8")
    return workdir


def embedded(server: EmbedServer) -> set[str]:
    """Every text the server was asked to embed, probes left out."""
    return {text for batch in server.requests for text in batch if text != "knowledge embeddings probe"}


def recipe_of(workdir: Path) -> str | None:
    conn = db.connect_readonly(workdir / "knowledge" / "default" / "knowledge.db")
    try:
        return schema.read_meta(conn).get(schema.DOCUMENT_RECIPE_KEY)
    finally:
        conn.close()


def test_the_breadcrumb_recipe_puts_the_breadcrumb_a_blank_line_before_the_body() -> None:
    assert document_text("Run it.", "Guide > Install") == "Guide > Install\n\nRun it."
    assert document_text("Run it.", "") == "Run it."
    assert document_text("Run it.", "Guide", "passage: ") == "passage: Guide\n\nRun it."


def test_a_prefix_holding_title_places_the_breadcrumb_once() -> None:
    assert document_text("Run it.", "Guide", "{title}. ", BREADCRUMB) == "Guide. Run it."
    assert document_text("Run it.", "", "{title}. ", BREADCRUMB) == "none. Run it."


def test_the_body_recipe_is_the_prefix_then_the_body() -> None:
    assert document_text("Run it.", "Guide", "", BODY) == "Run it."
    assert document_text("Run it.", "Guide", "d: {title} | ", BODY) == "d: Guide | Run it."
    with pytest.raises(ValueError, match="unknown embedded-text recipe"):
        document_text("Run it.", "Guide", "", "sideways")


def test_a_query_is_cut_at_8192_bytes_never_through_a_character() -> None:
    assert query_text("short", "q: ") == "q: short"
    assert utf8_head("a" * 9000, MAX_QUERY_BYTES) == "a" * MAX_QUERY_BYTES
    cut = utf8_head("a" + "é" * 5000, MAX_QUERY_BYTES)  # 1 + 2 x 5000 bytes; byte 8192 ends inside an é
    assert len(cut.encode()) == MAX_QUERY_BYTES - 1 and cut == "a" + "é" * 4095
    assert utf8_head("\ud800" * 3000, MAX_QUERY_BYTES) == "\ud800" * 2730  # lone surrogates from JSON survive


def test_the_embedding_input_carries_the_breadcrumb_and_the_store_pins_the_recipe(tree: Path, server: EmbedServer,
                                                                               run_cli) -> None:
    code, out, err = run_cli("index")
    assert code == 0, out + err
    texts = embedded(server)
    assert "Guide > Install > Linux\n\nRun the installer as root." in texts
    assert "Guide\n\nAn overview of the tool." in texts
    assert "No headings here at all." in texts  # no heading, no breadcrumb
    assert recipe_of(tree) == BREADCRUMB


def test_a_query_longer_than_8192_bytes_is_embedded_from_its_first_8192_bytes(tree: Path, server: EmbedServer,
                                                                            run_cli) -> None:
    assert run_cli("index")[0] == 0
    server.reset()
    query = "installer " * 2000  # 20,000 bytes
    code, out, _ = run_cli("search", "--json", query)
    assert code == 0 and json.loads(out)["degraded"] is None
    assert server.requests == [[query.encode()[:MAX_QUERY_BYTES].decode()]]


def test_a_store_pinned_before_the_recipe_keeps_embedding_bodies_until_reindexed(tree: Path, server: EmbedServer,
                                                                                run_cli) -> None:
    assert run_cli("index")[0] == 0
    db_path = tree / "knowledge" / "default" / "knowledge.db"
    damage_store(db_path, f"DELETE FROM meta WHERE key = '{schema.DOCUMENT_RECIPE_KEY}'")  # as older stores are
    server.reset()
    write_tree(tree, {"docs/guide.md": GUIDE.replace("as root", "as an administrator")})
    code, out, err = run_cli("index")
    assert code == 0, out + err
    assert embedded(server) == {"Run the installer as an administrator."}  # no mix of two recipes
    assert recipe_of(tree) is None
    assert "DEGRADED" not in run_cli("search", "installer")[1]  # queries are embedded alike under every recipe
    code, out, _ = run_cli("doctor", "--json")
    manifest = next(c for c in json.loads(out)["checks"] if c["name"] == "manifest")
    assert manifest["status"] == "warn" and "'body' recipe" in manifest["detail"] and "--reindex" in manifest["detail"]
    code, out, _ = run_cli("index", "--dry-run")
    assert "recipe=body" in out and "note: the vectors embed each section by the 'body' recipe" in out
    server.reset()
    assert run_cli("index", "--reindex")[0] == 0
    assert "Guide > Install > Linux\n\nRun the installer as an administrator." in embedded(server)
    assert recipe_of(tree) == BREADCRUMB
    code, out, _ = run_cli("doctor", "--json")
    assert next(c for c in json.loads(out)["checks"] if c["name"] == "manifest")["status"] == "ok"


def test_a_switch_to_the_same_model_moves_an_older_store_to_the_breadcrumb_recipe(tree: Path, server: EmbedServer,
                                                                                 run_cli) -> None:
    assert run_cli("index")[0] == 0
    damage_store(tree / "knowledge" / "default" / "knowledge.db",
                 f"DELETE FROM meta WHERE key = '{schema.DOCUMENT_RECIPE_KEY}'")
    config = tree / "knowledge.yaml"
    config.write_text(config.read_text() + f"  embeddings_next:\n    base_url: {server.base_url}\n"
                      "    model: hashed-bow\n    timeout: 1\n", encoding="utf-8")
    server.reset()
    code, out, err = run_cli("vectors", "switch")
    assert code == 0, out + err
    assert "Guide > Install > Linux\n\nRun the installer as root." in embedded(server)
    assert recipe_of(tree) == BREADCRUMB
    assert "DEGRADED" not in run_cli("search", "installer")[1]
    code, out, _ = run_cli("doctor", "--json")
    assert next(c for c in json.loads(out)["checks"] if c["name"] == "manifest")["status"] == "ok"
