"""Each kind of damage to a store with vectors, found by `knowledge check`, repaired by `knowledge rebuild`
(or, where the file itself is damaged, `knowledge reset --force` and a re-index), then the invariants."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.lib.corpus import generate
from pipeline import schema, vectors
from tests.conftest import damage_store
from tests.embedserver import EmbedServer
from tests.faults.invariants import Invariants
from tests.pipeline.test_integrity import garble
from tests.workers.conftest import EMBED_DIM, server  # noqa: F401 - the loopback embeddings server

RunCli = Callable[..., tuple[int, str, str]]
ORPHAN = vectors.to_blob([0.25] * EMBED_DIM).hex()

DAMAGE = {
    "garbage in the file": None,
    "an emptied FTS index": "INSERT INTO chunks_fts(chunks_fts) VALUES('delete-all')",
    "a dropped trigger": "DROP TRIGGER chunks_ad",
    "an orphan vector": f"INSERT INTO {schema.VECTORS}(chunk_id, embedding) VALUES (999999, X'{ORPHAN}')",
    "a missing vector": f"DELETE FROM {schema.VECTORS} WHERE chunk_id = (SELECT min(id) FROM chunks)",
}


@pytest.fixture
def indexed(workdir: Path, run_cli: RunCli, server: EmbedServer) -> Invariants:
    (workdir / "knowledge.yaml").write_text(
        f"knowledge:\n  embeddings:\n    base_url: {server.base_url}\n    model: hashed-bow\n    timeout: 5\n",
        encoding="utf-8")
    generate(workdir / "docs", 60, seed=41)
    assert run_cli("index", "docs")[0] == 0
    return Invariants(run_cli, workdir, workdir / "knowledge/default/knowledge.db", ("docs",))


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damage_is_found_repaired_and_the_store_converges(indexed: Invariants, run_cli: RunCli, kind: str) -> None:
    statement = DAMAGE[kind]
    if statement is None:
        garble(indexed.db_path)
    else:
        damage_store(indexed.db_path, statement)
    code, out, err = run_cli("check", "--json")
    report = json.loads(out)
    assert code == 1 and not report["ok"] and "Traceback" not in err, report

    if statement is None:  # the file itself: rebuild refuses, naming the way forward
        code, _, err = run_cli("rebuild")
        assert code == 1 and "knowledge reset --force" in err and "Traceback" not in err
        assert run_cli("reset", "--force")[0] == 0
    else:
        code, out, err = run_cli("rebuild", "--json")
        assert code == 0 and "Traceback" not in err, out + err
        left = [f["repair"] for f in json.loads(out)["after"]["findings"]]  # a missing vector waits for the re-run
        assert left == (["knowledge index"] if kind == "a missing vector" else [])

    indexed.assert_recovered(check_first=statement is not None and kind != "a missing vector")
