"""The quantised companions of chunks_vec: int8 codes filed under their list, kept in step with chunks.

A vector's list is the nearest fine centroid of its nearest coarse cell, whether a build filed it
(numpy) or the writer did with its document (SQL).
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline import db, schema, vector_codes, vectors
from pipeline.chunker import chunk_text
from pipeline.models import Document
from pipeline.store import Store

IDENTITY = vectors.VectorIdentity("hashed-bow", 4)


def _doc(path: str, sections: int, seed: int = 0) -> Document:
    text = "# T\n\nintro\n" + "".join(f"\n## S{i}\n\nbody {i} of {path}\n" for i in range(1, sections))
    chunked = chunk_text(text)
    doc = Document(path, "docs", "0" * 64, len(text), 1, chunked.title, chunked.chunks)
    rng = random.Random(f"{path}/{seed}")
    doc.vectors = {c.ordinal: vectors.to_blob([rng.uniform(-0.6, 0.6) for _ in range(4)]) for c in doc.chunks}
    return doc


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "store" / "knowledge.db")
    with opened.transaction() as conn:
        vectors.install(conn, IDENTITY)
    opened.vector_hook = vectors.VectorWriter(reuse=True)
    yield opened
    opened.close()


def _ids(store: Store, table: str) -> list[int]:
    return sorted(r[0] for r in store.conn.execute(f"SELECT chunk_id FROM {table}"))


def _chunk_ids(store: Store) -> list[int]:
    return sorted(r[0] for r in store.conn.execute("SELECT id FROM chunks"))


def _nearest(store: Store, blob: bytes) -> int:
    """The list of the vector blob: the nearest fine centroid of the nearest coarse cell (0 when untrained)."""
    by = "ORDER BY vec_distance_l2(centroid, ?) LIMIT 1"
    cell = store.conn.execute(f"SELECT id FROM {schema.COARSE} {by}", (blob,)).fetchone()
    if cell is None:
        return 0
    span = vector_codes.FINE_SPAN
    fine = [(int(i), bytes(c)) for i, c in store.conn.execute(f"SELECT id, centroid FROM {schema.CENTROIDS}")
            if i // span == cell[0]]
    assert fine and all(i % span for i, _ in fine)  # a cell's fine ids follow cell * FINE_SPAN
    return min(fine, key=lambda row: store.conn.execute("SELECT vec_distance_l2(?, ?)", (row[1], blob)).fetchone())[0]


def _assert_in_step(store: Store) -> None:
    chunks = _chunk_ids(store)
    assert _ids(store, schema.VECTORS) == chunks
    codes = vector_codes.filed(store.conn)  # the lists' entries and the delta rows, as a reader sees them
    assert sorted(codes) == chunks
    assert all(key % vector_codes.LIST_SPAN == cid for key, cid in store.conn.execute(
        f"SELECT key, chunk_id FROM {schema.CODES}"))
    factor = vector_codes.state(store.conn).factor
    for cid, blob in store.conn.execute(f"SELECT chunk_id, embedding FROM {schema.VECTORS}"):
        want = store.conn.execute(f"SELECT {vector_codes.code_sql('?1', factor)}", (blob,)).fetchone()[0]
        assert codes[cid] == (_nearest(store, blob), want)


def test_a_code_is_the_int8_vector_scaled_by_a_power_of_two() -> None:
    conn = db.memory_connection()
    blob = vectors.to_blob([0.1, -0.2, 0.3, -0.45])
    one = bytes(conn.execute(f"SELECT {vector_codes.code_sql('?1', 1)}", (blob,)).fetchone()[0])
    two = bytes(conn.execute(f"SELECT {vector_codes.code_sql('?1', 2)}", (blob,)).fetchone()[0])
    assert list(array("b", one)) == [12, -26, 37, -57]  # (x + 1) * 255/2 - 128, truncated
    assert list(array("b", two)) == [24, -51, 75, -115]  # twice the resolution (float32 rounding)
    assert vector_codes.default_factor(384) == 2 and vector_codes.default_factor(4) == 1
    assert vector_codes.clusters_for(10_000_000) == vector_codes.MAX_CLUSTERS
    assert vector_codes.clusters_for(100_000) == 100_000 // vector_codes.LIST_SIZE
    assert vector_codes.clusters_for(vector_codes.LIST_SIZE - 1) == 0


def test_training_files_each_vector_under_its_nearest_centroid(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(8):
        store.apply(_doc(f"docs/{n}.md", 10))
    monkeypatch.setattr(vector_codes, "LIST_SIZE", 10)
    with store.transaction() as conn:
        assert vector_codes.install(conn, 4) == 80
    built = vector_codes.state(store.conn)
    assert (built.trained, built.clusters, built.filed) == (80, 8, 80)
    assert store.conn.execute(f"SELECT count(*) FROM {schema.CENTROIDS}").fetchone()[0] == 8
    assert store.conn.execute(f"SELECT count(*) FROM {schema.COARSE}").fetchone()[0] == 3  # about sqrt(8)
    _assert_in_step(store)
    store.apply(_doc("docs/new.md", 6))  # later writes join their nearest list
    _assert_in_step(store)
    lists = [lst for lst, _ in vector_codes.filed(store.conn).values()]
    assert len(set(lists)) > 1 and 0 not in lists


def test_a_store_that_outgrew_its_centroids_is_trained_again(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_codes, "LIST_SIZE", 4)
    store.apply(_doc("docs/a.md", 20))
    with store.transaction() as conn:
        assert vector_codes.refresh(conn, 4) == 20  # was untrained: 5 lists
        assert vector_codes.refresh(conn, 4) is None  # in step
    for n in range(3):
        store.apply(_doc(f"docs/{n}.md", 20))
    with store.transaction() as conn:
        assert vector_codes.refresh(conn, 4) is None  # 80 vectors: not more than four times the 20 trained on
    store.apply(_doc("docs/last.md", 20))
    with store.transaction() as conn:
        assert vector_codes.refresh(conn, 4) == 100
    assert vector_codes.state(store.conn).clusters == 25
    _assert_in_step(store)


def test_installing_creates_the_companions_and_every_write_fills_them(store: Store) -> None:
    assert vector_codes.ready(store.conn)
    store.apply(_doc("docs/a.md", 5))
    store.apply(_doc("docs/b.md", 20))
    assert len(_chunk_ids(store)) == 25
    _assert_in_step(store)


def test_updated_and_removed_documents_leave_no_orphan_codes_or_copies(store: Store) -> None:
    store.apply(_doc("docs/a.md", 6))
    store.apply(_doc("docs/b.md", 3))
    store.apply(_doc("docs/a.md", 2, seed=1))  # shrinks: four chunks go, two new ones come
    _assert_in_step(store)
    assert len(_chunk_ids(store)) == 5
    store.remove(["docs/a.md"])
    _assert_in_step(store)
    store.remove(["docs/b.md"])
    assert vector_codes.filed(store.conn) == {} and _ids(store, schema.CODES) == []


def test_a_failed_document_writes_no_code_either(store: Store) -> None:
    store.apply(_doc("docs/a.md", 2))
    broken = _doc("docs/a.md", 3, seed=2)
    broken.vectors.pop(2)
    with pytest.raises(Exception, match="no vector for section 2"):
        store.apply(broken)
    _assert_in_step(store)
    assert len(_chunk_ids(store)) == 2


def test_a_store_written_before_the_companions_gets_them_filled_by_the_next_install(store: Store) -> None:
    with store.transaction() as conn:
        schema.drop_vector_codes(conn)  # the shape of a store written by an earlier knowledge
    store.apply(_doc("docs/a.md", 4))
    assert not vector_codes.ready(store.conn)
    assert _ids(store, schema.VECTORS) == _chunk_ids(store)
    with store.transaction() as conn:
        assert vectors.install(conn, IDENTITY) is False  # the vectors stay, the companions are built
    assert vector_codes.ready(store.conn)
    _assert_in_step(store)


def test_companions_of_another_encoding_are_rebuilt_not_written_to(store: Store) -> None:
    store.apply(_doc("docs/a.md", 3))
    with store.transaction() as conn:
        conn.execute("UPDATE meta SET value = 'thermometer-4-step0.5-partitions16' WHERE key = ?",
                     (schema.VECTOR_CODES_KEY,))
    assert not vector_codes.ready(store.conn)
    store.apply(_doc("docs/b.md", 2))  # written to chunks_vec only
    assert len(vector_codes.filed(store.conn)) == 3
    with store.transaction() as conn:
        vectors.install(conn, IDENTITY)
    assert vector_codes.ready(store.conn)
    _assert_in_step(store)


def test_another_identity_recreates_the_companions_empty_at_its_dimension(store: Store) -> None:
    store.apply(_doc("docs/a.md", 3))
    other = vectors.VectorIdentity("other-model", 6)
    with store.transaction() as conn:
        assert vectors.install(conn, other) is True
    assert vector_codes.ready(store.conn)
    assert vector_codes.filed(store.conn) == {}


def test_lists_are_trained_once_vectors_exist_even_when_the_chunks_came_first(
    store: Store, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vector_codes, "LIST_SIZE", 4)
    store.vector_hook = None  # a lexical store: chunks, no vectors
    store.apply(_doc("docs/a.md", 20))
    with store.transaction() as conn:
        vector_codes.install(conn, 4)  # embeddings turned on: nothing to train on yet
    assert vector_codes.state(store.conn).clusters == 0 and vector_codes.state(store.conn).trained == 0
    store.vector_hook = vectors.VectorWriter(reuse=False)
    store.apply(_doc("docs/a.md", 20, seed=1))
    with store.transaction() as conn:
        assert vector_codes.refresh(conn, 4) == 20
    assert vector_codes.state(store.conn).clusters == 5
    _assert_in_step(store)


def test_writes_after_training_wait_in_the_delta_until_the_run_end_compacts_them_into_their_lists(
    store: Store, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vector_codes, "LIST_SIZE", 10)
    for n in range(8):
        store.apply(_doc(f"docs/{n}.md", 10))
    with store.transaction() as conn:
        vector_codes.install(conn, 4)
    build = vector_codes.state(store.conn).build
    store.apply(_doc("docs/new.md", 6))  # six new codes: delta rows
    store.apply(_doc("docs/3.md", 4, seed=1))  # ten chunks go (their list entries stay, dead), four come
    store.remove(["docs/5.md"])
    assert len(_ids(store, schema.CODES)) == 10
    assert vector_codes.stale(store.conn) == 20
    _assert_in_step(store)  # a reader's view: no dead entry, every live chunk once
    with store.transaction() as conn:
        assert vector_codes.refresh(conn, 4) is None  # not grown fourfold: compacted, not trained again
    assert _ids(store, schema.CODES) == [] and vector_codes.stale(store.conn) == 0
    after = vector_codes.state(store.conn)
    assert after.build == build + 1 and after.filed == len(_chunk_ids(store)) == 70
    _assert_in_step(store)
    with store.transaction() as conn:
        assert vector_codes.refresh(conn, 4) is None
    assert vector_codes.state(store.conn).build == build + 1  # nothing to compact: the lists stay as they are


def test_a_format_6_store_of_one_row_per_code_is_regrouped_into_the_same_lists_and_codes(
    store: Store, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.pipeline.test_migrations import as_code_rows

    monkeypatch.setattr(vector_codes, "LIST_SIZE", 10)
    for n in range(6):
        store.apply(_doc(f"docs/{n}.md", 10))
    with store.transaction() as conn:
        vector_codes.install(conn, 4)
    before = vector_codes.filed(store.conn)
    with store.transaction() as conn:
        as_code_rows(conn)
    assert not vector_codes.ready(store.conn) and len(_ids(store, schema.CODES)) == 60
    with store.transaction() as conn:
        assert vector_codes.regroup(conn) == 60
    assert vector_codes.ready(store.conn) and vector_codes.filed(store.conn) == before
    assert _ids(store, schema.CODES) == []
    _assert_in_step(store)
