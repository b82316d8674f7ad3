"""The vector tier in the distributed shape: real `knowledge worker`/`writer` processes, real Redis,
the loopback embeddings server; a worker killed with -9 while it embeds loses no vector."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from config.loader import settings_from_mapping
from pipeline import db, vectors
from pipeline.embedding_input import document_text
from tests.conftest import write_tree
from tests.embedserver import EmbedServer, hashed_vector
from tests.workers.cluster import Cluster, owned

pytestmark = [pytest.mark.redis, pytest.mark.slow]

DIM = 16
FILES = 64 * 8 + 20


@pytest.fixture
def server() -> Iterator[EmbedServer]:
    with EmbedServer(dim=DIM) as running:
        yield running


@pytest.fixture
def cluster(tmp_path: Path, server: EmbedServer) -> Iterator[Cluster]:
    """A store of its own with an embeddings block in its knowledge.yaml; processes stopped after."""

    def prepare(made: Cluster) -> None:
        (made.base / "knowledge.yaml").write_text(
            f"knowledge:\n  embeddings:\n    base_url: {server.base_url}\n    model: hashed-bow\n    timeout: 5\n",
            encoding="utf-8")
        write_tree(made.base, {f"docs/n{i:04d}.md": f"# Note {i}\n\nnote {i} on topic{i % 11}\n" for i in range(FILES)})

    with owned(tmp_path / "store", prepare) as made:
        yield made


def assert_every_chunk_has_its_own_vector(base: Path) -> int:
    settings = settings_from_mapping({}, store_base=base)
    conn = db.connect_readonly(settings.db_path)
    try:
        rows = conn.execute(
            "SELECT c.heading_path, c.body, v.embedding FROM chunks c LEFT JOIN chunks_vec v ON v.chunk_id = c.id"
        ).fetchall()
    finally:
        conn.close()
    for heading, body, blob in rows:
        assert blob is not None, f"no vector for {body!r}"
        raw = hashed_vector(document_text(body, heading), DIM)  # the breadcrumb recipe
        norm = math.sqrt(sum(x * x for x in raw))
        assert all(abs(a - b / norm) < 1e-5 for a, b in zip(vectors.from_blob(blob), raw))
    return len(rows)


def test_a_distributed_vector_run_embeds_full_batches_across_documents(cluster: Cluster, server: EmbedServer) -> None:
    cluster.start(workers=2, threads=2)
    result = cluster.knowledge("index", "docs", "--json", timeout=120)
    assert result.returncode == 0, result.stderr + cluster.logs()
    summary = json.loads(result.stdout)
    assert (summary["added"], summary["failed"]) == (FILES, 0)
    sizes = [len(r) for r in server.requests if r != ["knowledge embeddings probe"]]
    assert sum(sizes) == FILES and sizes.count(64) == FILES // 64
    assert assert_every_chunk_has_its_own_vector(cluster.base) == FILES


def test_a_worker_killed_during_embedding_still_converges_with_every_vector(cluster: Cluster,
                                                                            server: EmbedServer) -> None:
    server.faults.slow = 0.4  # every request takes a while: a worker is caught holding one
    cluster.start(workers=2, threads=2)
    before = cluster.worker_children()

    broker_ids = cluster.workers_ready(before)
    index = cluster.popen("index", "docs", "--json")
    cluster.kill_worker_holding("embed", broker_ids, 60)
    out, err = index.communicate(timeout=150)
    assert index.returncode == 0, err + cluster.logs()
    summary = json.loads(out)
    assert summary["failed"] == 0 and summary["added"] + summary["updated"] == FILES
    assert assert_every_chunk_has_its_own_vector(cluster.base) == FILES


def test_a_distributed_vector_run_holds_ingest_at_the_pending_limit(cluster: Cluster, server: EmbedServer) -> None:
    limit = 128  # one-chunk files, 32 per ingest message
    config = cluster.base / "knowledge.yaml"
    config.write_text(config.read_text(encoding="utf-8") + f"    max_pending: {limit}\n", encoding="utf-8")
    server.faults.slow = 0.5  # 4 threads: ~510 chunks/s, far below ingest
    cluster.start(workers=2, threads=2)
    ledger = cluster.ledger()
    index = cluster.popen("index", "docs", "--json")
    run_id, peak, samples = None, 0, 0
    deadline = time.monotonic() + 120
    while index.poll() is None and time.monotonic() < deadline:
        if run_id is None:
            recent = ledger.recent(1)
            run_id = recent[0].run_id if recent and recent[0].state == "running" else None
        else:
            peak = max(peak, ledger.backlog.backlog_state(run_id, "").pending)
            samples += 1
        time.sleep(0.005)
    out, err = index.communicate(timeout=30)
    assert index.returncode == 0, err + cluster.logs()
    summary = json.loads(out)
    assert (summary["added"], summary["failed"]) == (FILES, 0)
    assert samples > 20 and limit // 2 < peak <= limit + 32
    sizes = [len(r) for r in server.requests if r != ["knowledge embeddings probe"]]
    assert sum(sizes) == FILES and sizes.count(64) == FILES // 64
    assert assert_every_chunk_has_its_own_vector(cluster.base) == FILES
    ledger.client.close()
