"""The embed step end to end: embedded runs against the real loopback embeddings server."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import workers.actors
import workers.embed
import workers.ingest
import workers.queues
from config.errors import EmbeddingUnavailable, VectorIdentityMismatch
from config.settings import Settings
from pipeline import db, vectors
from pipeline.embedding_input import document_text
from tests.conftest import write_tree
from tests.embedserver import EmbedServer, hashed_vector
from tests.workers.conftest import EMBED_DIM as DIM  # the `server` fixture's dimension
from tests.workers.helpers import index
from workers.engine import InProcessEngine
from workers.run import RunRequest


def _pinned_model(conn: db.Connection) -> str:
    """The embedding model the store's meta pins."""
    identity = vectors.pinned_identity(dict(conn.execute("SELECT key, value FROM meta")))
    assert identity is not None
    return identity.model


@pytest.fixture
def vector_settings(make_settings: Callable[..., Settings], server: EmbedServer) -> Callable[..., Settings]:
    def build(**emb: Any) -> Settings:
        block = {"base_url": server.base_url, "model": "hashed-bow", "timeout": 2, **emb}
        return make_settings(paths=["docs"], embeddings=block)

    return build


def small_files(workdir: Path, count: int) -> None:
    write_tree(workdir, {f"docs/n{i:04d}.md": f"# Note {i}\n\nnote {i} about topic{i % 13}\n" for i in range(count)})


def stored(settings: Settings) -> dict[tuple[str, int], list[float]]:
    """Every stored vector by (path, ordinal)."""
    conn = db.connect_readonly(settings.db_path)
    try:
        rows = conn.execute(
            "SELECT d.path, c.ordinal, v.embedding FROM chunks c JOIN documents d ON d.id = c.document_id"
            " JOIN chunks_vec v ON v.chunk_id = c.id"
        ).fetchall()
        return {(p, o): vectors.from_blob(b) for p, o, b in rows}
    finally:
        conn.close()


def chunk_rows(settings: Settings) -> list[tuple[str, int, str, str]]:
    conn = db.connect_readonly(settings.db_path)
    try:
        return conn.execute(
            "SELECT d.path, c.ordinal, c.heading_path, c.body FROM chunks c JOIN documents d ON d.id = c.document_id"
            " ORDER BY d.path, c.ordinal"
        ).fetchall()
    finally:
        conn.close()


def expected_vector(text: str) -> list[float]:
    raw = hashed_vector(text, DIM)
    norm = math.sqrt(sum(x * x for x in raw))
    return [x / norm for x in raw]


def assert_every_chunk_has_its_own_vector(settings: Settings, prefix: str = "") -> None:
    rows = chunk_rows(settings)
    vecs = stored(settings)
    assert len(vecs) == len(rows)
    for path, ordinal, heading, body in rows:
        want = expected_vector(document_text(body, heading, prefix))
        assert all(abs(a - b) < 1e-5 for a, b in zip(vecs[(path, ordinal)], want)), (path, ordinal)


def embed_requests(server: EmbedServer) -> list[list[str]]:
    """Requests other than the planner's one-input probe."""
    return [r for r in server.requests if r != ["knowledge embeddings probe"]]


def test_small_files_are_embedded_in_full_batches_across_documents(workdir: Path, server: EmbedServer,
                                                                   vector_settings) -> None:
    small_files(workdir, 64 * 20 + 9)
    settings = vector_settings()
    summary = index(settings)
    assert summary.counts["added"] == 64 * 20 + 9 and summary.counts["failed"] == 0
    sizes = [len(r) for r in embed_requests(server)]
    assert sum(sizes) == 64 * 20 + 9  # every chunk sent exactly once
    full = sum(1 for s in sizes if s == 64)
    assert full / len(sizes) >= 0.95 and sorted(sizes)[0] == 9  # only the flushed tail is short
    assert_every_chunk_has_its_own_vector(settings)


def test_a_poisoned_input_is_isolated_by_halving_and_everything_else_lands(workdir: Path, server: EmbedServer,
                                                                         vector_settings) -> None:
    small_files(workdir, 100)
    write_tree(workdir, {"docs/n0042.md": "# Note 42\n\nthis one says POISON and crashes the model\n"})
    server.faults.poison = "POISON"
    settings = vector_settings()
    summary = index(settings)
    assert summary.counts["added"] == 99 and summary.counts["failed"] == 1
    (failure,) = summary.failures
    assert failure["path"] == "docs/n0042.md" and "embedding section 0 failed" in failure["reason"]
    assert {p for p, _ in stored(settings)} == {f"docs/n{i:04d}.md" for i in range(100) if i != 42}
    assert_every_chunk_has_its_own_vector(settings)
    assert [len(r) for r in embed_requests(server)].count(1) >= 1  # halved down to the single input


def test_a_shuffled_response_still_puts_every_vector_on_its_own_chunk(workdir: Path, server: EmbedServer,
                                                                       vector_settings) -> None:
    small_files(workdir, 70)
    server.faults.shuffle = True
    settings = vector_settings()
    assert index(settings).counts["added"] == 70
    assert_every_chunk_has_its_own_vector(settings)


def test_a_duplicated_index_fails_the_batch_and_halving_places_every_vector_right(
        workdir: Path, server: EmbedServer, vector_settings) -> None:
    small_files(workdir, 8)
    settings = vector_settings()
    with InProcessEngine(settings) as engine:  # the probe ran; now the server misbehaves
        engine.start()  # the lock taken, the server probed, the actors started
        server.faults.duplicate_index = True
        summary = engine.run(RunRequest())
    assert summary.counts["added"] == 8
    assert_every_chunk_has_its_own_vector(settings)
    assert sorted(len(r) for r in embed_requests(server))[:8] == [1] * 8


MALFORMED = ["drop_item", "out_of_range", "empty_vector", "wrong_dim", "non_numeric", "nan_value",
             "zero_vector", "error_in_body"]


@pytest.mark.parametrize("fault", MALFORMED)
def test_a_malformed_response_fails_its_batch_without_placing_a_vector(
        workdir: Path, server: EmbedServer, vector_settings, fault: str) -> None:
    small_files(workdir, 3)
    settings = vector_settings()
    index(settings)
    before = stored(settings)
    write_tree(workdir, {f"docs/n{i:04d}.md": f"# Note {i}\n\nrewritten {i}\n" for i in range(3)})
    with InProcessEngine(settings) as engine:
        engine.start()  # the lock taken, the server probed, the actors started
        setattr(server.faults, fault, True)
        summary = engine.run(RunRequest())
    assert summary.counts["failed"] == 3 and summary.counts["updated"] == 0
    assert stored(settings) == before  # not one vector placed; the previous version stands
    assert all("rewritten" not in body for *_, body in chunk_rows(settings))


def test_an_index_run_against_a_dead_server_leaves_the_previous_index_intact(
        workdir: Path, server: EmbedServer, vector_settings) -> None:
    small_files(workdir, 5)
    settings = vector_settings(timeout=0.5)
    index(settings)
    before_rows, before_vectors = chunk_rows(settings), stored(settings)
    write_tree(workdir, {"docs/n0001.md": "# Changed\n\nnew text\n", "docs/new.md": "# New\n\nfresh\n"})
    server.stop()
    with pytest.raises(EmbeddingUnavailable, match="nothing was written"):
        index(settings)
    assert chunk_rows(settings) == before_rows and stored(settings) == before_vectors


def test_a_first_run_against_a_dead_server_creates_no_store(workdir: Path, server: EmbedServer,
                                                            vector_settings) -> None:
    small_files(workdir, 2)
    settings = vector_settings(timeout=0.5)
    server.stop()
    with pytest.raises(EmbeddingUnavailable):
        index(settings)
    assert not settings.db_path.exists()


def test_editing_one_section_of_a_twenty_chunk_file_sends_only_that_chunk(workdir: Path, server: EmbedServer,
                                                                         vector_settings) -> None:
    sections = [f"## Part {i}\n\nparagraph {i} of the long guide" for i in range(20)]
    write_tree(workdir, {"docs/long.md": "\n\n".join(sections) + "\n"})
    settings = vector_settings(document_prefix="title: {title} | ")
    index(settings)
    assert len(stored(settings)) == 20
    before = {o: v for (_, o), v in stored(settings).items()}
    server.reset()
    sections[7] = "## Part 7\n\nparagraph 7, now rewritten"
    write_tree(workdir, {"docs/long.md": "\n\n".join(sections) + "\n"})
    summary = index(settings)
    assert summary.counts["updated"] == 1
    assert embed_requests(server) == [["title: Part 7 | paragraph 7, now rewritten"]]
    after = {o: v for (_, o), v in stored(settings).items()}
    assert all(after[o] == before[o] for o in range(20) if o != 7) and after[7] != before[7]
    assert_every_chunk_has_its_own_vector(settings, "title: {title} | ")


def test_reindex_rebuilds_every_vector(workdir: Path, server: EmbedServer, vector_settings) -> None:
    small_files(workdir, 10)
    settings = vector_settings()
    index(settings)
    server.reset()
    summary = index(settings, reindex=True)
    assert summary.counts["updated"] == 10
    assert sum(len(r) for r in embed_requests(server)) == 10


def test_a_model_change_is_refused_until_reindex_rebuilds_the_vectors(workdir: Path, server: EmbedServer,
                                                                       vector_settings) -> None:
    small_files(workdir, 4)
    index(vector_settings())
    renamed = vector_settings(model="hashed-bow-v2")
    before = stored(renamed)
    with pytest.raises(VectorIdentityMismatch, match="knowledge index --reindex"):
        index(renamed)
    assert stored(renamed) == before
    assert index(renamed, reindex=True).counts["updated"] == 4
    conn = db.connect_readonly(renamed.db_path)
    try:
        assert _pinned_model(conn) == "hashed-bow-v2"
    finally:
        conn.close()
    assert_every_chunk_has_its_own_vector(renamed)


def test_turning_embeddings_on_backfills_an_unchanged_lexical_index(workdir: Path, server: EmbedServer,
                                                                     make_settings, vector_settings) -> None:
    small_files(workdir, 6)
    index(make_settings(paths=["docs"]))
    summary = index(vector_settings())
    assert summary.counts["vectors_added"] == 6 and summary.counts["updated"] == 0 and summary.counts["failed"] == 0
    assert_every_chunk_has_its_own_vector(vector_settings())


def test_a_lexical_only_run_creates_no_vector_table(workdir: Path, make_settings) -> None:
    small_files(workdir, 2)
    settings = make_settings(paths=["docs"])
    index(settings)
    conn = db.connect_readonly(settings.db_path)
    try:
        assert not vectors.has_table(conn)
    finally:
        conn.close()


def test_redelivered_ingest_and_embed_messages_repeat_harmlessly(workdir: Path, server: EmbedServer,
                                                                 vector_settings, monkeypatch) -> None:
    small_files(workdir, 150)
    crashed: set[Any] = set()
    real_ingest, real_embed = workers.ingest.ingest_batch, workers.embed.embed_batch

    def ingest_then_die(runtime: Any, run_id: str, files: list[Any], force: bool) -> str | None:
        key = real_ingest(runtime, run_id, files, force)
        if key not in crashed:  # all work done, message not acknowledged: the broker redelivers it
            crashed.add(key)
            raise RuntimeError("worker lost after ingesting")
        return key

    def embed_then_die(runtime: Any, run_id: str, index_: int) -> None:
        real_embed(runtime, run_id, index_)
        if index_ not in crashed:
            crashed.add(index_)
            raise RuntimeError("worker lost after embedding")

    monkeypatch.setattr(workers.actors, "ingest_batch", ingest_then_die)
    monkeypatch.setattr(workers.actors, "embed_batch", embed_then_die)
    settings = vector_settings()
    summary = index(settings)
    assert summary.counts["added"] == 150 and summary.counts["failed"] == 0
    assert sum(len(r) for r in embed_requests(server)) == 150  # no chunk embedded twice
    assert_every_chunk_has_its_own_vector(settings)


FAST_GIVE_UP = {"max_retries": 1, "min_backoff": 10, "max_backoff": 20, "time_limit": 60_000}


def test_a_server_lost_mid_run_fails_the_waiting_documents_and_the_run_still_ends(
        workdir: Path, server: EmbedServer, vector_settings, monkeypatch) -> None:
    monkeypatch.setattr(workers.queues, "EMBED_OPTIONS", FAST_GIVE_UP)
    small_files(workdir, 5)
    settings = vector_settings(timeout=0.5)
    index(settings)
    before = stored(settings)
    write_tree(workdir, {f"docs/n{i:04d}.md": f"# Note {i}\n\nrewritten {i}\n" for i in range(5)})
    with InProcessEngine(settings) as engine:  # probed while the server was up
        engine.start()  # the lock taken, the server probed, the actors started
        server.stop()
        summary = engine.run(RunRequest())
    assert summary.state == "complete" and summary.counts["failed"] == 5
    assert all("stayed unavailable" in f["reason"] for f in summary.failures)
    assert stored(settings) == before


def test_an_ingest_message_out_of_retries_still_lets_the_tail_batch_flush(
        workdir: Path, server: EmbedServer, make_settings, monkeypatch) -> None:
    monkeypatch.setattr(workers.queues, "INGEST_OPTIONS", FAST_GIVE_UP)
    real_ingest = workers.ingest.ingest_batch

    def broken_for_one(runtime: Any, run_id: str, files: list[Any], force: bool) -> str | None:
        if any(f[0] == "docs/n0000.md" for f in files):
            raise RuntimeError("this batch always fails")
        return real_ingest(runtime, run_id, files, force)

    monkeypatch.setattr(workers.actors, "ingest_batch", broken_for_one)
    small_files(workdir, 20)
    embeddings = {"base_url": server.base_url, "model": "hashed-bow", "timeout": 2}
    settings = make_settings(paths=["docs"], batch_files=4, embeddings=embeddings)
    summary = index(settings)
    assert summary.state == "complete"
    assert (summary.counts["added"], summary.counts["failed"]) == (16, 4)
    assert len(stored(settings)) == 16
