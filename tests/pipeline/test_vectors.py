"""The vector tier's store side: pinned identity, the vec0 table and its trigger, per-document writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from config.errors import EmbeddingUnavailable, VectorIdentityMismatch
from config.loader import settings_from_mapping
from config.settings import EmbeddingsSettings
from pipeline import vectors
from pipeline.chunker import chunk_text
from pipeline.models import Document
from pipeline.store import Store
from tests.embedserver import EmbedServer

IDENTITY = vectors.VectorIdentity("hashed-bow", 4, "q: ", "d: {title} | ")


def _doc(path: str, text: str, vecs: dict[int, list[float]] | None = None) -> Document:
    chunked = chunk_text(text)
    doc = Document(path, "docs", "0" * 64, len(text), 1, chunked.title, chunked.chunks)
    chosen = vecs if vecs is not None else {c.ordinal: [1.0, float(c.ordinal), 0.0, 0.0] for c in doc.chunks}
    doc.vectors = {ordinal: vectors.to_blob(v) for ordinal, v in chosen.items()}
    return doc


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "store" / "knowledge.db")
    yield opened
    opened.close()


def _vector_rows(store: Store) -> dict[int, list[float]]:
    rows = store.conn.execute("SELECT chunk_id, embedding FROM chunks_vec").fetchall()
    return {cid: vectors.from_blob(blob) for cid, blob in rows}


def _install(store: Store, identity: vectors.VectorIdentity = IDENTITY, reuse: bool = True) -> None:
    with store.transaction() as conn:
        vectors.install(conn, identity)
    store.vector_hook = vectors.VectorWriter(reuse)


def test_a_lexical_store_has_no_vector_table(store: Store) -> None:
    store.apply(_doc("docs/a.md", "# A\n\ntext\n", {}))
    assert not vectors.has_table(store.conn)
    assert vectors.pinned_identity(dict(store.conn.execute("SELECT key, value FROM meta"))) is None


def test_installing_pins_the_identity_and_is_idempotent(store: Store) -> None:
    _install(store)
    meta = dict(store.conn.execute("SELECT key, value FROM meta"))
    assert vectors.pinned_identity(meta) == IDENTITY
    assert meta["normalized"] == "true" and meta["dimension"] == "4"
    store.apply(_doc("docs/a.md", "# A\n\ntext\n"))
    with store.transaction() as conn:
        assert vectors.install(conn, IDENTITY) is False
    assert len(_vector_rows(store)) == 1


def test_another_identity_recreates_the_table_empty(store: Store) -> None:
    _install(store)
    store.apply(_doc("docs/a.md", "# A\n\ntext\n"))
    other = vectors.VectorIdentity("other-model", 3)
    with store.transaction() as conn:
        assert vectors.install(conn, other) is True
    assert _vector_rows(store) == {}
    assert vectors.pinned_identity(dict(store.conn.execute("SELECT key, value FROM meta"))) == other


def test_every_chunk_gets_its_own_vector_in_the_documents_transaction(store: Store) -> None:
    _install(store)
    store.apply(_doc("docs/a.md", "# A\n\none\n\n## B\n\ntwo\n"))
    ids = dict(store.conn.execute("SELECT ordinal, id FROM chunks"))
    rows = _vector_rows(store)
    assert rows == {ids[0]: [1.0, 0.0, 0.0, 0.0], ids[1]: [1.0, 1.0, 0.0, 0.0]}


def test_a_document_missing_a_vector_is_not_written_at_all(store: Store) -> None:
    _install(store)
    store.apply(_doc("docs/a.md", "# A\n\none\n"))
    before = store.conn.execute("SELECT body FROM chunks").fetchall()
    with pytest.raises(Exception, match="no vector for section 1"):
        store.apply(_doc("docs/a.md", "# A\n\nnew one\n\n## B\n\nnew two\n", {0: [0.0, 0.0, 1.0, 0.0]}))
    assert store.conn.execute("SELECT body FROM chunks").fetchall() == before
    assert len(_vector_rows(store)) == 1


def test_a_group_writes_every_documents_vectors_and_one_missing_vector_writes_none(store: Store) -> None:
    _install(store)
    store.apply(_doc("docs/a.md", "# A\n\none\n"))
    kept = _vector_rows(store)
    with pytest.raises(Exception, match="no vector for section 0"):
        store.apply_group([_doc("docs/b.md", "# B\n\nbee\n"), _doc("docs/c.md", "# C\n\nsea\n", {})])
    assert store.document_count() == 1 and _vector_rows(store) == kept
    # an update between two added documents: every chunk of the three gets its own vector (the
    # unchanged section of a.md keeps its stored one)
    assert store.apply_group([_doc("docs/b.md", "# B\n\nbee\n"), _doc("docs/a.md", "# A\n\none\n\n## Two\n\ntwo\n",
                                                                        {1: [0.0, 1.0, 1.0, 0.0]}),
                              _doc("docs/c.md", "# C\n\nsea\n")]) == ["added", "updated", "added"]
    ids = {(path, ordinal): cid for cid, path, ordinal in store.conn.execute(
        "SELECT c.id, d.path, c.ordinal FROM chunks c JOIN documents d ON d.id = c.document_id")}
    rows = _vector_rows(store)
    assert set(rows) == set(ids.values())
    assert rows[ids["docs/a.md", 0]] == [1.0, 0.0, 0.0, 0.0] and rows[ids["docs/a.md", 1]] == [0.0, 1.0, 1.0, 0.0]


def test_deleting_chunks_or_documents_deletes_their_vectors(store: Store) -> None:
    _install(store)
    store.apply(_doc("docs/a.md", "# A\n\none\n\n## B\n\ntwo\n"))
    store.apply(_doc("docs/b.md", "# B\n\nthree\n"))
    store.apply(_doc("docs/a.md", "# A\n\none\n"))  # shrinking file
    assert len(_vector_rows(store)) == 2
    store.remove(["docs/a.md", "docs/b.md"])
    assert _vector_rows(store) == {}


def test_an_unchanged_chunk_keeps_its_stored_vector(store: Store) -> None:
    _install(store)
    store.apply(_doc("docs/a.md", "# A\n\none\n\n## B\n\ntwo\n", {0: [1, 0, 0, 0], 1: [0, 1, 0, 0]}))
    kept_hashes = vectors.reusable_hashes(store.conn, "docs/a.md")
    edited = _doc("docs/a.md", "# A\n\none\n\n## B\n\nthree\n", {1: [0, 0, 1, 0]})
    assert edited.chunks[0].text_hash in kept_hashes and edited.chunks[1].text_hash not in kept_hashes
    store.apply(edited)
    by_ordinal = {o: v for o, v in store.conn.execute(
        "SELECT c.ordinal, v.embedding FROM chunks c JOIN chunks_vec v ON v.chunk_id = c.id")}
    assert vectors.from_blob(by_ordinal[0]) == [1, 0, 0, 0]
    assert vectors.from_blob(by_ordinal[1]) == [0, 0, 1, 0]


def test_without_reuse_a_stored_vector_is_never_kept(store: Store) -> None:
    _install(store, reuse=False)
    store.apply(_doc("docs/a.md", "# A\n\none\n"))
    with pytest.raises(Exception, match="no vector"):
        store.apply(_doc("docs/a.md", "# A\n\none\n", {}))


def test_missing_vector_paths_lists_documents_with_a_chunk_lacking_one(store: Store) -> None:
    store.apply(_doc("docs/lexical.md", "# L\n\nwritten before embeddings\n", {}))
    _install(store)
    store.apply(_doc("docs/a.md", "# A\n\none\n"))
    assert vectors.missing_vector_paths(store.conn) == ["docs/lexical.md"]


def _settings(tmp_path: Path, server: EmbedServer, **emb: object):
    block = {"embeddings": {"base_url": server.base_url, "model": "hashed-bow", **emb}}
    return settings_from_mapping(block, store_base=tmp_path)


def test_planning_against_a_dead_server_is_a_loud_error(tmp_path: Path) -> None:
    server = EmbedServer(dim=8).start()
    settings = _settings(tmp_path, server, timeout=1)
    server.stop()
    with pytest.raises(EmbeddingUnavailable, match="nothing was written"):
        vectors.plan(settings, reindex=False)
    assert not settings.db_path.exists()


def test_planning_reconciles_with_the_pinned_identity(tmp_path: Path) -> None:
    with EmbedServer(dim=8) as server:
        settings = _settings(tmp_path, server, document_prefix="doc: ")
        first = vectors.plan(settings, reindex=False)
        assert first is not None and first.identity.dimension == 8 and not first.reuse
        store = Store(settings.db_path)
        try:
            with store.transaction() as conn:
                vectors.install(conn, first.identity)
        finally:
            store.close()
        again = vectors.plan(settings, reindex=False)
        assert again is not None and again.reuse
        rebuilt = vectors.plan(settings, reindex=True)
        assert rebuilt is not None and not rebuilt.reuse  # --reindex rebuilds the vectors
        changed = _settings(tmp_path, server, document_prefix="passage: ")
        with pytest.raises(VectorIdentityMismatch, match="knowledge index --reindex") as caught:
            vectors.plan(changed, reindex=False)
        assert "document_prefix" in str(caught.value)
        switched = vectors.plan(changed, reindex=True)
        assert switched is not None and switched.reuse is False
        server.dim = 12
        with pytest.raises(VectorIdentityMismatch, match="dimension: index has 8, configured 12"):
            vectors.plan(settings, reindex=False)


def test_no_embeddings_means_no_plan(tmp_path: Path) -> None:
    assert vectors.plan(settings_from_mapping({}, store_base=tmp_path), reindex=False) is None


def test_the_probe_sees_the_configured_model_not_the_served_name() -> None:
    with EmbedServer(dim=8) as server:
        server.faults.model = "/models/hashed-bow.gguf"
        probe = vectors.probe_server(EmbeddingsSettings(base_url=server.base_url, model="hashed-bow"))
    assert (probe.model, probe.served_model, probe.dimension) == ("hashed-bow", "/models/hashed-bow.gguf", 8)
