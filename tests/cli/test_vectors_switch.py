"""`knowledge vectors switch`: a model change while searches keep answering hybrid, never mixed, never lexical-only."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from config.loader import load_settings
from config.settings import Settings
from pipeline import db, schema, vector_codes
from pipeline.shadow import next_identity
from pipeline.vectors import VectorIdentity, pinned_identity
from tests.conftest import write_tree
from tests.embedserver import EmbedServer
from tests.searcher import Searcher

RunCli = Callable[..., tuple[int, str, str]]
DOCS: dict[str, str | bytes] = {
    f"docs/d{i:02}.md": f"# Doc {i}\n\nRetention policy {i} for logs.\n\n## Part\n\nQueue worker budget {i}.\n"
    for i in range(30)
}
QUERIES = ("retention policy for logs", "queue worker budget", "budget 7")


@pytest.fixture
def servers() -> Iterator[tuple[EmbedServer, EmbedServer]]:
    with EmbedServer(dim=24) as old, EmbedServer(dim=40) as new:
        yield old, new


def write_config(workdir: Path, old: EmbedServer, new: EmbedServer | None) -> None:
    lines = ["knowledge:", "  paths: [docs]",
             "  embeddings:", f"    base_url: {old.base_url}", "    model: old-bow", "    timeout: 2"]
    if new is not None:
        lines += ["  embeddings_next:", f"    base_url: {new.base_url}", "    model: new-bow", "    timeout: 2",
                  "    batch_size: 4", "    query_prefix: 'query: '"]
    (workdir / "knowledge.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class State:
    """What a store holds of the vector tier."""

    pinned: VectorIdentity | None
    next: VectorIdentity | None
    chunks: int
    vectors: int | None
    shadow: int | None
    codes: bool
    triggers: list[str]


def store_state(settings: Settings) -> State:
    conn = db.connect_readonly(settings.db_path)
    try:
        meta = schema.read_meta(conn)
        names = schema.table_names(conn)

        def count(table: str) -> int | None:
            return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]) if table in names else None

        return State(pinned_identity(meta), next_identity(meta), count("chunks") or 0, count(schema.VECTORS),
                     count(schema.NEXT_VECTORS), vector_codes.ready(conn), schema.expected_triggers(conn))
    finally:
        conn.close()


@pytest.fixture
def indexed(workdir: Path, servers: tuple[EmbedServer, EmbedServer], run_cli: RunCli) -> Settings:
    old, new = servers
    write_tree(workdir, DOCS)
    write_config(workdir, old, None)
    code, out, err = run_cli("index")
    assert code == 0, out + err
    write_config(workdir, old, new)
    return load_settings(None, None)


def test_a_switch_keeps_every_search_hybrid_resumes_after_limits_and_failures_then_swaps_in_one_step(
    indexed: Settings, servers: tuple[EmbedServer, EmbedServer], run_cli: RunCli
) -> None:
    _, new = servers
    before = store_state(indexed)
    searcher = Searcher(indexed, QUERIES)
    searcher.start()
    try:
        code, out, _ = run_cli("vectors", "switch", "--limit", "10")  # a slice: the store keeps the old model
        assert code == 75 and "sections left" in out
        state = store_state(indexed)
        assert state.pinned == before.pinned and state.shadow == 10
        assert state.next is not None and state.next.dimension == 40

        new.faults.fail_above, new.faults.fail_status = 3, 500  # the probe passes, every batch then fails
        code, _, err = run_cli("vectors", "switch")
        assert code == 1 and "Traceback" not in err
        kept = store_state(indexed)
        assert kept.pinned == before.pinned and kept.shadow == 10  # nothing lost, nothing half-written

        new.reset()
        code, out, err = run_cli("vectors", "switch")
        assert code == 0, out + err
        assert "done; the store serves new-bow dim=40" in out
        assert f"{kept.shadow + 4}/{kept.chunks}" in out  # resumed, not restarted
        while sum(1 for r in new.recorded if r.inputs and r.inputs[0].startswith("query: ")) < 3:
            assert searcher.is_alive()
            threading.Event().wait(0.01)
    finally:
        searcher.stop.set()
        searcher.join()
    assert searcher.errors == [] and searcher.degraded == 0 and searcher.empty == 0
    assert searcher.answers > 0
    after = store_state(indexed)
    pinned = after.pinned
    assert pinned is not None and (pinned.model, pinned.dimension, pinned.query_prefix) == (
        "new-bow", 40, "query: ")
    assert after.vectors == after.chunks and after.shadow is None and after.next is None
    assert after.codes and schema.NEXT_VECTORS_TRIGGER not in after.triggers
    assert {t.split(" - ")[-1] for t in searcher.tiers} >= {"model=old-bow dim=24", "model=new-bow dim=40"}


def test_after_the_switch_index_and_search_use_the_new_model_until_the_config_moves_it(
    indexed: Settings, servers: tuple[EmbedServer, EmbedServer], run_cli: RunCli, workdir: Path
) -> None:
    assert run_cli("vectors", "switch")[0] == 0
    (workdir / "docs" / "d00.md").write_text("# Doc 0\n\nA rewritten retention note.\n", encoding="utf-8")
    code, out, err = run_cli("index")
    assert code == 0, out + err
    state = store_state(indexed)
    assert state.vectors == state.chunks and state.pinned is not None and state.pinned.model == "new-bow"
    code, out, _ = run_cli("search", "rewritten retention note")
    assert code == 0 and out.splitlines()[0].endswith("model=new-bow dim=40") and "docs/d00.md" in out
    assert run_cli("vectors", "switch")[1].splitlines()[-1].startswith("switch: the store already serves")


def test_abandon_drops_the_shadow_and_leaves_the_serving_vectors(indexed: Settings, run_cli: RunCli) -> None:
    before = store_state(indexed)
    assert run_cli("vectors", "switch", "--limit", "4")[0] == 75
    assert store_state(indexed).shadow == 4
    assert run_cli("vectors", "switch", "--abandon")[0] == 0
    after = store_state(indexed)
    assert after.shadow is None and after.next is None and after.pinned == before.pinned
    assert after.vectors == before.vectors


def test_switch_without_embeddings_next_is_a_usage_error(
    workdir: Path, servers: tuple[EmbedServer, EmbedServer], run_cli: RunCli
) -> None:
    old, _ = servers
    write_tree(workdir, DOCS)
    write_config(workdir, old, None)
    assert run_cli("index")[0] == 0
    code, _, err = run_cli("vectors", "switch")
    assert code == 2 and "embeddings_next" in err


def test_a_probe_answering_another_dimension_never_drops_the_shadow_work(
    indexed: Settings, servers: tuple[EmbedServer, EmbedServer], run_cli: RunCli, workdir: Path
) -> None:
    _, new = servers
    assert run_cli("vectors", "switch", "--limit", "10")[0] == 75
    new.dim = 8  # a restarting server, or a balancer routing to another model, for every probe
    code, out, err = run_cli("vectors", "switch")
    assert code == 1 and "Traceback" not in err
    assert "answered 8-dimensional vectors for 'new-bow'" in err and "pinned 40 (10 of 60" in err
    assert "nothing was dropped" in err and "--abandon" in err
    state = store_state(indexed)
    assert state.shadow == 10 and state.next is not None and state.next.dimension == 40
    new.dim = 40
    code, out, err = run_cli("vectors", "switch", "--limit", "4")
    assert code == 75 and store_state(indexed).shadow == 14  # resumed where it was

    config = (workdir / "knowledge.yaml").read_text(encoding="utf-8").replace("model: new-bow", "model: other-bow")
    (workdir / "knowledge.yaml").write_text(config, encoding="utf-8")
    code, out, err = run_cli("vectors", "switch", "--limit", "4")  # another model: dropped, and said so
    assert code == 75 and "note: the shadow build of 'new-bow' (14 of 60 sections) is dropped" in out
    assert store_state(indexed).shadow == 4
