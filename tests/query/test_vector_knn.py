"""Vector KNN: exact brute force, int8 codes of the nearest lists re-scored exactly, and which one answers when."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline import db, schema, vector_codes, vectors
from pipeline.chunker import chunk_text
from pipeline.models import Document
from pipeline.store import Store
from query import list_scan, vector
from query.vector import MIN_PROBES, knn, knn_exact, knn_quantised, knn_within, probes

DIM = 16
IDENTITY = vectors.VectorIdentity("seeded", DIM)


def _unit(values: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in values))
    return [x / norm for x in values]


def _random_unit(rng: random.Random) -> list[float]:
    return _unit([rng.gauss(0, 1) for _ in range(DIM)])


QUERY = _random_unit(random.Random(99))


def _doc(path: str, vecs: list[list[float]]) -> Document:
    text = "# T\n\nintro\n" + "".join(f"\n## S{i}\n\nsection {i}\n" for i in range(1, len(vecs)))
    chunked = chunk_text(text)
    assert len(chunked.chunks) == len(vecs)
    doc = Document(path, "docs", "0" * 64, len(text), 1, chunked.title, chunked.chunks)
    doc.vectors = {i: vectors.to_blob(v) for i, v in enumerate(vecs)}
    return doc


def vector_store(path: Path) -> Store:
    """A new store at path with the test identity pinned and a vector writer that embeds nothing."""
    store = Store(path)
    with store.transaction() as conn:
        vectors.install(conn, IDENTITY)
    store.vector_hook = vectors.VectorWriter(reuse=False)
    return store


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """300 chunks: random unit vectors, a cluster of 10 close to QUERY, and a few exact duplicates."""
    rng = random.Random(7)
    path = tmp_path / "store" / "knowledge.db"
    store = vector_store(path)
    try:
        for d in range(20):
            vecs = [_random_unit(rng) for _ in range(15)]
            if d == 7:
                vecs[3:13] = [_unit([q + rng.gauss(0, 0.02) for q in QUERY]) for _ in range(10)]
            if d in (2, 11):
                vecs[5] = vecs[6] = vecs[7]  # equal distances: ties go to the smaller id
            store.apply(_doc(f"docs/{d:02}.md", vecs))
        with store.transaction() as conn, pytest.MonkeyPatch.context() as patch:
            patch.setattr(vector_codes, "LIST_SIZE", 20)  # 15 lists of about 20 chunks
            vector_codes.install(conn, DIM)
    finally:
        store.close()
    return path


@pytest.fixture
def reader(store_path: Path) -> Iterator[Any]:
    conn = db.connect_readonly(store_path)
    yield conn
    conn.close()


def _same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> None:
    assert [cid for cid, _ in a] == [cid for cid, _ in b]
    assert [d for _, d in a] == pytest.approx([d for _, d in b], abs=1e-6)


def test_quantised_knn_finds_the_exact_top_ten_from_a_fraction_of_the_store(reader: Any) -> None:
    exact = knn_exact(reader, QUERY, 10)
    cluster = {cid for (cid,) in reader.execute(
        "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE d.path = 'docs/07.md' AND c.ordinal BETWEEN 3 AND 12")}
    assert {cid for cid, _ in exact} == cluster
    assert vector_codes.state(reader).clusters == 15
    # the 2 lists nearest the query (a few dozen of 300 codes), the 20 best re-scored with their float vectors
    _same(knn_quantised(reader, QUERY, 10, lists=2), exact)


def test_with_every_code_a_candidate_quantised_knn_is_exactly_the_reference(reader: Any) -> None:
    rng = random.Random(5)
    for query in [QUERY, *(_random_unit(rng) for _ in range(20))]:
        _same(knn_quantised(reader, query, 50, lists=15, rescore=6), knn_exact(reader, query, 50))
    duplicate = vectors.from_blob(reader.execute(
        "SELECT v.embedding FROM chunks_vec v JOIN chunks c ON c.id = v.chunk_id JOIN documents d"
        " ON d.id = c.document_id WHERE d.path = 'docs/02.md' AND c.ordinal = 7").fetchone()[0])
    top = knn_quantised(reader, duplicate, 3)
    assert [d for _, d in top] == [0.0, 0.0, 0.0] and [c for c, _ in top] == sorted(c for c, _ in top)


def test_a_query_scans_a_share_of_the_lists_and_at_least_a_floor_of_codes() -> None:
    share = vector.PROBE_SHARE
    assert probes(4096, 1_000_000) == math.ceil(share * 4096)  # the share of a million's lists
    assert probes(390, 100_000) == max(math.ceil(share * 390), math.ceil(vector.MIN_PROBE_ROWS * 390 / 100_000))
    assert probes(39, 10_000) == 39  # every list of a store under the floor
    assert probes(4, 100_000_000) == MIN_PROBES


def test_an_untrained_store_keeps_every_code_in_list_zero_and_scans_it(
    store_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vector_codes, "LIST_SIZE", 400)
    writer = db.open_writer(store_path)
    writer.execute("BEGIN IMMEDIATE")
    vector_codes.install(writer, DIM)  # 300 vectors: too few for a list of LIST_SIZE
    writer.execute("COMMIT")
    writer.close()
    conn = db.connect_readonly(store_path)
    try:
        assert vector_codes.state(conn).clusters == 0
        assert {lst for lst, _ in vector_codes.filed(conn).values()} == {0}
        _same(knn_quantised(conn, QUERY, 10), knn_exact(conn, QUERY, 10))
        assert knn(conn, QUERY, 10, exact_below=0) == knn_exact(conn, QUERY, 10)  # untrained: knn stays exact
    finally:
        conn.close()


def test_knn_uses_the_companions_on_a_large_store_and_brute_force_on_a_small_one(store_path: Path) -> None:
    # Fault injection: one chunk's code disagrees with its vector in chunks_vec, so the two paths differ.
    writer = db.open_writer(store_path)
    nearest = knn_exact(writer, QUERY, 1)[0][0]
    far = writer.execute(f"SELECT {vector_codes.code_sql('?1', vector_codes.state(writer).factor)}",
                         (vectors.to_blob([-x for x in QUERY]),)).fetchone()[0]
    lst = vector_codes.filed(writer)[nearest][0]  # a delta row in its own list supersedes its list entry
    writer.execute(f"INSERT INTO {schema.CODES}(key, chunk_id, code) VALUES (?, ?, ?)",
                   (lst * vector_codes.LIST_SPAN + nearest, nearest, far))
    writer.commit()
    writer.close()
    conn = db.connect_readonly(store_path)
    try:
        assert knn(conn, QUERY, 5)[0][0] == nearest  # 300 chunks: under EXACT_BELOW, brute force
        assert knn(conn, QUERY, 5, exact_below=0)[0][0] != nearest  # the quantised path answered
        assert knn(conn, QUERY, 5, exact_below=0) == knn_quantised(conn, QUERY, 5)
    finally:
        conn.close()


def test_a_store_without_the_companions_falls_back_to_exact_knn(store_path: Path) -> None:
    writer = db.open_writer(store_path)
    writer.execute("BEGIN IMMEDIATE")
    schema.drop_vector_codes(writer)
    writer.execute("COMMIT")
    writer.close()
    conn = db.connect_readonly(store_path)
    try:
        assert not vector_codes.ready(conn)
        _same(knn(conn, QUERY, 20, exact_below=0), knn_exact(conn, QUERY, 20))
    finally:
        conn.close()


def test_a_lexical_search_loads_no_numpy_and_a_quantised_knn_caches_the_centroids_per_build(
    store_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    code = (  # a fresh process: importing the vector tier loads no numpy; only the quantised scan does
        "import sys\n"
        "from pathlib import Path\n"
        "from pipeline import db\n"
        "from query import search, vector\n"
        f"conn = db.connect_readonly(Path({str(store_path)!r}))\n"
        "before = 'numpy' in sys.modules\n"
        f"hits = vector.knn(conn, {QUERY!r}, 10, exact_below=0)\n"
        "print(before, 'numpy' in sys.modules, len(hits))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True", "10"]
    conn = db.connect_readonly(store_path)
    try:
        _same(knn_quantised(conn, QUERY, 10, lists=15, rescore=6), knn_exact(conn, QUERY, 10))
        writer = db.open_writer(store_path)  # trained again, into other lists: the cached centroids are stale
        writer.execute("BEGIN IMMEDIATE")
        monkeypatch.setattr(vector_codes, "LIST_SIZE", 30)
        vector_codes.install(writer, DIM)
        writer.execute("COMMIT")
        writer.close()
        assert vector_codes.state(conn).clusters == 10
        assert len(list_scan.centroids(conn, vector._state_text(conn), list_scan.VectorLists()).ids) == 10
        _same(knn_quantised(conn, QUERY, 10, lists=10, rescore=6), knn_exact(conn, QUERY, 10))
    finally:
        conn.close()


def test_many_small_lists_still_give_the_exact_top_k_for_vectors_on_list_boundaries(tmp_path: Path) -> None:
    # 40 tight clusters of 8 vectors, trained into ~80 lists of 4 (each cluster spread over a few lists); then
    # vectors placed half way between two neighbouring fine centroids are written (filed in SQL, one list each).
    rng = random.Random(3)
    centres = [_random_unit(rng) for _ in range(40)]
    path = tmp_path / "store" / "knowledge.db"
    store = vector_store(path)
    try:
        for d, centre in enumerate(centres):
            store.apply(_doc(f"docs/{d:02}.md", [_unit([x + rng.gauss(0, 0.08) for x in centre]) for _ in range(8)]))
        with store.transaction() as conn, pytest.MonkeyPatch.context() as patch:
            patch.setattr(vector_codes, "LIST_SIZE", 4)
            vector_codes.install(conn, DIM)
        fine = {int(i): vectors.from_blob(bytes(c)) for i, c in store.conn.execute(
            f"SELECT id, centroid FROM {schema.CENTROIDS}")}
        boundary = []
        for i, centroid in fine.items():  # each list's nearest other list: the midpoint of the two centroids
            j = min((j for j in fine if j != i), key=lambda j: sum((a - b) ** 2 for a, b in zip(centroid, fine[j])))
            boundary.append(_unit([a + b for a, b in zip(centroid, fine[j])]))
        store.apply(_doc("docs/boundary.md", boundary))
    finally:
        store.close()
    conn = db.connect_readonly(path)
    try:
        state = vector_codes.state(conn)
        assert state.clusters == 80 and conn.execute(f"SELECT count(*) FROM {schema.COARSE}").fetchone()[0] == 9
        lists = {lst for lst, _ in vector_codes.filed(conn).values()}
        assert len(lists) > 60 and 0 not in lists
        for query in boundary:
            _same(knn_quantised(conn, query, 10, lists=12), knn_exact(conn, query, 10))  # 12 of 80 lists scanned
    finally:
        conn.close()


def _clustered_store(path: Path, count: int, dimension: int) -> Any:
    """A store of `count` one-section documents whose vectors are bench/lib/clustered.py's (seeded), trained."""
    from bench.lib.clustered import Clustered

    mixture = Clustered(count, dimension, seed=4)
    rows = np.concatenate(list(mixture.batches(count)))
    store = Store(path)
    store.close()
    writer = db.open_writer(path)
    try:
        writer.execute("BEGIN IMMEDIATE")
        vectors.install(writer, vectors.VectorIdentity("clustered", dimension))
        for d in range(count):
            doc = writer.execute("INSERT INTO documents(path, root, title, sha256, size, mtime_ns, chunk_count,"
                                 " indexed_at, indexed_ns) VALUES (?, 'v', 't', '', 0, 0, 1, '', 0)",
                                 (f"v/{d}.md",)).lastrowid
            cid = writer.execute("INSERT INTO chunks(document_id, ordinal, heading_path, body, text_hash)"
                                 " VALUES (?, 0, '', 'vector', '')", (doc,)).lastrowid
            writer.execute(f"INSERT INTO {schema.VECTORS}(chunk_id, embedding) VALUES (?, ?)", (cid, rows[d].tobytes()))
        vector_codes.install(writer, dimension)
        writer.execute("COMMIT")
    finally:
        writer.close()
    return mixture.queries(24)


def test_on_clustered_vectors_the_shipped_share_of_the_lists_finds_95_percent_of_the_exact_top_50(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "store" / "knowledge.db"
    queries = _clustered_store(path, 20_000, 384)
    monkeypatch.setattr(vector, "MIN_PROBE_ROWS", 0)  # the share alone: 12 of the 78 lists
    conn = db.connect_readonly(path)
    try:
        state = vector_codes.state(conn)
        assert state.clusters == 78 and probes(state.clusters, 20_000) == math.ceil(vector.PROBE_SHARE * 78) < 20
        found = 0
        for q in queries:
            query = [float(x) for x in q]
            exact = knn_exact(conn, query, 50)
            bound = exact[-1][1] + 1e-5
            shipped = knn(conn, query, 50, exact_below=0)
            assert [d for _, d in shipped] == sorted(d for _, d in shipped)
            assert all(abs(d - dict(exact).get(cid, d)) < 1e-5 for cid, d in shipped)  # re-scored exactly
            found += sum(1 for _, d in shipped if d <= bound)
        assert found / (50 * len(queries)) >= 0.95
    finally:
        conn.close()


def test_a_filter_leaving_many_chunks_ranks_them_by_their_codes_and_one_leaving_few_exactly(
    store_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    writer = db.open_writer(store_path)
    allowed = [int(r[0]) for r in writer.execute("SELECT id FROM documents WHERE path < 'docs/10.md'")]
    inside = {int(r[0]) for r in writer.execute(
        f"SELECT id FROM chunks WHERE document_id IN ({','.join('?' * len(allowed))})", allowed)}
    want = [(cid, d) for cid, d in knn_exact(writer, QUERY, 300) if cid in inside][:10]
    nearest = want[0][0]  # fault injection: the nearest allowed chunk's code points away from the query
    far = writer.execute(f"SELECT {vector_codes.code_sql('?1', vector_codes.state(writer).factor)}",
                         (vectors.to_blob([-x for x in QUERY]),)).fetchone()[0]
    lst = vector_codes.filed(writer)[nearest][0]
    writer.execute(f"INSERT INTO {schema.CODES}(key, chunk_id, code) VALUES (?, ?, ?)",
                   (lst * vector_codes.LIST_SPAN + nearest, nearest, far))
    writer.commit()
    writer.close()
    conn = db.connect_readonly(store_path)
    try:
        _same(knn_within(conn, QUERY, json.dumps(allowed), 10), want)  # 150 chunks: under EXACT_ALLOWED, exact
        monkeypatch.setattr(vector, "EXACT_ALLOWED", 10)
        by_codes = knn_within(conn, QUERY, json.dumps(allowed), 10)  # ranked by codes, the best then exactly
        assert nearest not in dict(by_codes) and {cid for cid, _ in by_codes} <= inside
        _same(by_codes, [(cid, d) for cid, d in want if cid != nearest] + by_codes[9:])
    finally:
        conn.close()
