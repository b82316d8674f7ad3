"""`knowledge vectors switch` on the distributed deployment: real writer and worker processes, real Redis,
two loopback models; searches running through the switch and an index run during it never fail or degrade."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from config.loader import settings_from_mapping
from config.settings import Settings
from pipeline import db, schema, vector_codes, vectors
from pipeline.embedding_input import document_text
from tests.conftest import write_tree
from tests.embedserver import EmbedServer, hashed_vector
from tests.searcher import Searcher
from tests.workers.cluster import Cluster, owned
from tests.workers.conftest import REDIS_URL

pytestmark = [pytest.mark.redis, pytest.mark.slow]

FILES = 120
OLD_DIM, NEW_DIM = 16, 28
QUERIES = ("note on topic3", "topic7 note", "rewritten gazette")


@pytest.fixture
def servers() -> Iterator[tuple[EmbedServer, EmbedServer]]:
    with EmbedServer(dim=OLD_DIM) as old, EmbedServer(dim=NEW_DIM) as new:
        yield old, new


def blocks(old: EmbedServer, new: EmbedServer) -> dict[str, dict[str, object]]:
    return {"embeddings": {"base_url": old.base_url, "model": "old-bow", "timeout": 5},
            "embeddings_next": {"base_url": new.base_url, "model": "new-bow", "timeout": 5, "batch_size": 16,
                                "document_prefix": "passage: "}}


@pytest.fixture
def cluster(tmp_path: Path, servers: tuple[EmbedServer, EmbedServer]) -> Iterator[Cluster]:
    """A store whose knowledge.yaml names both models; processes stopped after."""

    def prepare(made: Cluster) -> None:
        lines = ["knowledge:"]
        for name, block in blocks(*servers).items():
            lines += [f"  {name}:"] + [f"    {k}: {v if not isinstance(v, str) else repr(v)}" for k, v in block.items()]
        (made.base / "knowledge.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
        write_tree(made.base, {f"docs/n{i:04d}.md": f"# Note {i}\n\nnote {i} on topic{i % 11}\n" for i in range(FILES)})

    with owned(tmp_path / "store", prepare) as made:
        yield made


def assert_every_chunk_has_its_new_vector(settings: Settings) -> int:
    conn = db.connect_readonly(settings.db_path)
    try:
        pinned = vectors.pinned_identity(schema.read_meta(conn))
        assert pinned is not None and (pinned.model, pinned.dimension) == ("new-bow", NEW_DIM)
        assert not schema.exists(conn, schema.NEXT_VECTORS) and vector_codes.ready(conn)
        rows = conn.execute(f"SELECT c.heading_path, c.body, v.embedding FROM chunks c"
                            f" LEFT JOIN {schema.VECTORS} v ON v.chunk_id = c.id").fetchall()
    finally:
        conn.close()
    for heading, body, blob in rows:
        assert blob is not None, f"no vector for {body!r}"
        raw = hashed_vector(document_text(body, heading, "passage: "), NEW_DIM)
        norm = math.sqrt(sum(x * x for x in raw))
        assert all(abs(a - b / norm) < 1e-5 for a, b in zip(vectors.from_blob(blob), raw))
    return len(rows)


def test_a_switch_through_the_writer_keeps_searches_hybrid_and_waits_out_an_index_run(
    cluster: Cluster, servers: tuple[EmbedServer, EmbedServer]
) -> None:
    old, new = servers
    cluster.start(workers=2, threads=2)
    result = cluster.knowledge("index", "docs", timeout=120)
    assert result.returncode == 0, result.stderr + cluster.logs()
    settings = settings_from_mapping({"broker": {"url": REDIS_URL}, **blocks(old, new)}, store_base=cluster.base)
    assert settings.db_path == cluster.settings.db_path
    searcher = Searcher(settings, QUERIES)
    searcher.start()
    try:
        sliced = cluster.knowledge("vectors", "switch", "--limit", "40", timeout=120)
        assert sliced.returncode == 75, sliced.stdout + sliced.stderr + cluster.logs()
        for i in range(5):  # an index run rewrites sections while the switch goes on
            (cluster.base / "docs" / f"n{i:04d}.md").write_text(f"# Note {i}\n\nrewritten gazette {i}\n")
        run = cluster.popen("index", "docs")
        switched = cluster.knowledge("vectors", "switch", timeout=300)
        assert switched.returncode == 0, switched.stdout + switched.stderr + cluster.logs()
        assert "done; the store serves new-bow dim=28" in switched.stdout
        assert run.wait(timeout=120) == 0, cluster.logs()
        while not any(t.endswith("model=new-bow dim=28") for t in searcher.tiers):
            assert searcher.is_alive()
            threading.Event().wait(0.01)
    finally:
        searcher.stop.set()
        searcher.join()
    assert searcher.errors == [] and searcher.degraded == 0 and searcher.answers > 0
    assert {t.split(" - ")[-1] for t in searcher.tiers} == {"model=old-bow dim=16", "model=new-bow dim=28"}
    assert assert_every_chunk_has_its_new_vector(settings) == FILES
    again = cluster.knowledge("index", "docs", "--reindex", timeout=120)  # index runs now embed with new-bow
    assert again.returncode == 0, again.stderr + cluster.logs()
    assert assert_every_chunk_has_its_new_vector(settings) == FILES
