"""The quantised companions of chunks_vec: thermometer codes and float copies, kept in step with chunks."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline import schema, vector_codes, vectors
from pipeline.chunker import chunk_text
from pipeline.models import Document
from pipeline.store import Store

IDENTITY = vectors.VectorIdentity("hashed-bow", 4)


def _doc(path: str, sections: int, seed: int = 0) -> Document:
    text = "# T\n\nintro\n" + "".join(f"\n## S{i}\n\nbody {i} of {path}\n" for i in range(1, sections))
    chunked = chunk_text(text)
    doc = Document(path, "docs", "0" * 64, len(text), 1, chunked.title, chunked.chunks)
    rng = random.Random(f"{path}/{seed}")
    doc.vectors = {c.ordinal: [rng.uniform(-0.6, 0.6) for _ in range(4)] for c in doc.chunks}
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


def _assert_in_step(store: Store) -> None:
    chunks = _chunk_ids(store)
    assert _ids(store, schema.VECTORS) == chunks
    assert _ids(store, schema.CODES) == chunks
    assert _ids(store, schema.FLOATS) == chunks
    floats = dict(store.conn.execute(f"SELECT chunk_id, embedding FROM {schema.FLOATS}"))
    for cid, blob in store.conn.execute(f"SELECT chunk_id, embedding FROM {schema.VECTORS}"):
        assert floats[cid] == blob
    for cid, part, code in store.conn.execute(f"SELECT chunk_id, part, code FROM {schema.CODES}"):
        assert part == cid % vector_codes.PARTITIONS
        assert code == vector_codes.encode(vectors.from_blob(floats[cid]))


def _levels(vector: list[float]) -> list[int]:
    code = vector_codes.encode(vector)
    nibbles = [n for byte in code for n in (byte & 0xF, byte >> 4)]
    return [bin(n).count("1") for n in nibbles][: len(vector)]


def test_a_code_gives_each_dimension_a_level_from_zero_to_four_around_zero() -> None:
    step = vector_codes.STEP / math.sqrt(4)  # 0.25 for four dimensions
    assert _levels([-1.0, -0.3, -0.1, 0.2]) == [0, 1, 2, 3]  # thresholds -0.375, -0.125, 0.125, 0.375
    assert _levels([0.4, 1.0, 0.1, -0.1]) == [4, 4, 2, 2]
    assert _levels([-1.5 * step, 1.5 * step - 1e-9, 0.0, 0.0])[:2] == [1, 3]
    assert len(vector_codes.encode([0.0] * 384)) * 8 == vector_codes.code_bits(384) == 1536
    assert len(vector_codes.encode([0.0] * 3)) * 8 == vector_codes.code_bits(3) == 16  # odd: padded


def test_the_hamming_distance_of_two_codes_is_the_l1_distance_of_their_levels() -> None:
    rng = random.Random(3)
    for _ in range(50):
        a = [rng.gauss(0, 0.1) for _ in range(16)]
        b = [rng.gauss(0, 0.1) for _ in range(16)]
        hamming = sum(bin(x ^ y).count("1") for x, y in zip(vector_codes.encode(a), vector_codes.encode(b)))
        assert hamming == sum(abs(x - y) for x, y in zip(_levels(a), _levels(b)))


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
    assert _ids(store, schema.CODES) == [] and _ids(store, schema.FLOATS) == []


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
        conn.execute("UPDATE meta SET value = 'thermometer-8-step0.25-partitions4' WHERE key = ?",
                     (schema.VECTOR_CODES_KEY,))
    assert not vector_codes.ready(store.conn)
    store.apply(_doc("docs/b.md", 2))  # written to chunks_vec only
    assert len(_ids(store, schema.CODES)) == 3
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
    assert _ids(store, schema.CODES) == [] and _ids(store, schema.FLOATS) == []
    sql = store.conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (schema.CODES,)).fetchone()[0]
    assert f"bit[{vector_codes.code_bits(6)}]" in sql
