"""Quantised companions of chunks_vec: int8 codes in inverted lists, for KNN that reads a fraction of the store.

Brute-force KNN over chunks_vec costs ~45 ms per 100k chunks (sqlite-vec without SIMD), so large
stores search in two steps. Every vector gets an int8 code (sqlite-vec's `vec_quantize_int8`,
after scaling by a power of two so the store's coordinates fill the int8 range) filed under a
list: chunks_vec_i8 is keyed by list * LIST_SPAN + chunk id (its rowid, so codes written in key
order fill their pages), so one list is a contiguous run of pages. A query ranks the lists'
centroids, scans the int8 codes of the nearest lists (query.vector.probes: a few percent of a
large store) and re-scores the best of them exactly from chunks_vec. Codes are 384 bytes for 384
dimensions, a quarter of the float vector, and nothing else is copied.

The lists are small (about LIST_SIZE vectors each, at most MAX_CLUSTERS of them), because at a
given share of the store scanned, recall grows with the number of lists. They are trained in two
levels (pipeline/kmeans.py, numpy, imported only here and only when training): about sqrt(lists)
coarse centroids (chunks_vec_coarse), then fine centroids inside each coarse cell
(chunks_vec_centroids; the fine lists of coarse cell c have the ids c * FINE_SPAN + 1 ...). A
vector is filed under the nearest fine centroid of its nearest coarse cell: ~2 sqrt(lists)
distances, in numpy when a build files the whole store, in SQL (insert()) when the writer files a
new vector in its document's transaction. A store with too few vectors has no centroid: all its
codes sit in list 0 and a query scans them all. refresh() (every vector run, before its first
write and when it finishes) trains again when the store has grown past four times the size the
centroids were trained on. `SCHEME`, pinned in meta, names the encoding (a store built with
another is rebuilt from chunks_vec by the next vector run, nothing embedded again); the training
state (vectors trained on, lists, scale) is a JSON meta value. Names and DDL are
pipeline/schema.py's.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline import schema
from pipeline.db import Connection

if TYPE_CHECKING:
    from pipeline import kmeans

SCHEME = "int8-ivf-2"  # int8-ivf-1: one level of at most 128 lists
LIST_SIZE = 256  # vectors a list holds when the centroids are trained
MAX_CLUSTERS = 4096  # lists at most (a million vectors: ~244 a list)
FINE_SPAN = 256  # fine list ids of coarse cell c: c * FINE_SPAN + 1 ... c * FINE_SPAN + FINE_SPAN - 1
# A code's key is list * LIST_SPAN + chunk id (chunk ids stay far below 2^32). Keys under 2^48 take 7 bytes
# as SQLite varints, in the codes table and in its chunk id index alike (larger ones took 2 more: 2 MB at 1M).
LIST_SPAN = 1 << 32
GROWTH = 4  # train again once the store holds this many times the vectors the centroids saw
SAMPLE_PER_CLUSTER = 32  # sample vectors per list k-means trains on
MAX_SAMPLE = 131_072  # at most (~200 MB of float32 in the writer while it trains)
MAX_FACTOR = 8
_BATCH = 4096


@dataclass(frozen=True)
class CodeState:
    """How the codes were built: vectors the centroids were trained on, centroids, the scale factor."""

    trained: int
    clusters: int
    factor: int

    def to_meta(self) -> str:
        """The JSON meta value."""
        return json.dumps({"trained": self.trained, "clusters": self.clusters, "factor": self.factor})


def ready(conn: Connection) -> bool:
    """True when the companion tables exist and were built with this SCHEME."""
    return schema.has_vector_codes(conn) and schema.meta_value(conn, schema.VECTOR_CODES_KEY) == SCHEME


def state(conn: Connection) -> CodeState:
    """The pinned training state (call only when ready())."""
    data = json.loads(schema.meta_value(conn, schema.VECTOR_CODES_STATE_KEY) or "{}")
    return CodeState(int(data.get("trained", 0)), int(data.get("clusters", 0)), int(data.get("factor", 1)))


def clusters_for(vectors: int) -> int:
    """How many lists a store of `vectors` vectors is trained into (0: too few, one untrained list)."""
    return min(MAX_CLUSTERS, vectors // LIST_SIZE)


def coarse_for(lists: int) -> int:
    """Coarse cells over `lists` fine lists: about their square root."""
    return max(1, min(lists, round(math.sqrt(lists))))


def default_factor(dimension: int) -> int:
    """The scale before any training: coordinates up to about 8/sqrt(dimension) keep their resolution."""
    return _power_of_two(math.sqrt(max(1, dimension)) / 8)


def scaled(expr: str, factor: int) -> str:
    """SQL for the float vector `expr` multiplied by a power of two (exact in float32), by vec_add doubling."""
    for _ in range(max(0, int(math.log2(max(1, factor))))):
        expr = f"vec_add({expr}, {expr})"
    return expr


def code_sql(expr: str, factor: int) -> str:
    """SQL for the int8 code of the float vector `expr`."""
    return f"vec_quantize_int8({scaled(expr, factor)}, 'unit')"


def refresh(conn: Connection, dimension: int) -> int | None:
    """Create the companions if missing or of another scheme, train them when the store outgrew them.

    Returns the vectors filed when it (re)built, None when they were already in step. Call inside
    a transaction, after chunks_vec exists.
    """
    if ready(conn):
        have = state(conn)
        total = _count(conn)
        if clusters_for(total) <= have.clusters or total <= GROWTH * max(have.trained, LIST_SIZE):
            return None
    return install(conn, dimension)


def install(conn: Connection, dimension: int) -> int:
    """(Re)create the companions from chunks_vec, training centroids when the store is large enough.

    Call inside a transaction, after chunks_vec exists. Returns the vectors filed. Training and the
    bulk filing use numpy (pipeline/kmeans.py), imported here only: the read side never loads it.
    """
    from pipeline import kmeans

    schema.drop_vector_codes(conn)
    schema.create_vector_codes(conn)
    total = _count(conn)
    clusters = clusters_for(total)
    sample = _sample(conn, min(total, min(MAX_SAMPLE, clusters * SAMPLE_PER_CLUSTER)), seed=total) \
        if clusters else None
    factor = default_factor(dimension)
    trained: kmeans.Lists | None = None
    if sample is not None and len(sample):
        peak = float(abs(sample).max())
        factor = _power_of_two(1 / peak) if peak > 0 else factor
        trained = kmeans.train(sample, clusters, coarse_for(clusters), seed=total, per_cell=FINE_SPAN - 1)
        conn.executemany(f"INSERT INTO {schema.COARSE}(id, centroid) VALUES (?, ?)",
                         [(c + 1, row.tobytes()) for c, row in enumerate(trained.coarse)])
        conn.executemany(f"INSERT INTO {schema.CENTROIDS}(id, centroid) VALUES (?, ?)",
                         [(list_id(c, j), row.tobytes()) for c, cell in enumerate(trained.fine)
                          for j, row in enumerate(cell)])
    # Untrained (no vector yet, e.g. a lexical store turning embeddings on) counts as trained on none, so the
    # next refresh trains as soon as the store is large enough.
    done = CodeState(total if trained else 0, trained.count if trained else 0, factor)
    schema.write_meta(conn, {schema.VECTOR_CODES_KEY: SCHEME, schema.VECTOR_CODES_STATE_KEY: done.to_meta()})
    return _fill(conn, factor, trained)


def insert(conn: Connection, rows: Iterable[tuple[int, bytes]]) -> None:
    """File the code of each (chunk id, float32 blob) under its list, in SQL (call only when ready()).

    The list is the nearest fine centroid of the nearest coarse cell (pipeline/kmeans.py's rule),
    about 2 * sqrt(lists) distances a vector; list 0 while the store is untrained.
    """
    cell = f"(SELECT id FROM {schema.COARSE} ORDER BY vec_distance_l2(centroid, ?1) LIMIT 1)"
    span = FINE_SPAN
    nearest = (f"(SELECT id FROM {schema.CENTROIDS} WHERE id > {cell} * {span} AND id < {cell} * {span} + {span}"
               " ORDER BY vec_distance_l2(centroid, ?1) LIMIT 1)")
    conn.executemany(f"INSERT INTO {schema.CODES}(key, chunk_id, code) VALUES (coalesce({nearest}, 0) * {LIST_SPAN}"
                     f" + ?2, ?2, {code_sql('?1', state(conn).factor)})", [(blob, cid) for cid, blob in rows])


def list_id(cell: int, fine: int) -> int:
    """The list of the fine-th fine centroid of the cell-th coarse cell (both from 0)."""
    return (cell + 1) * FINE_SPAN + fine + 1


def _fill(conn: Connection, factor: int, trained: kmeans.Lists | None) -> int:
    """File every vector of chunks_vec, staged in a temp table so the lists are written in key order."""
    from pipeline import kmeans

    schema.create_code_staging(conn)
    statement = (f"INSERT INTO {schema.CODE_STAGING}(key, chunk_id, code) VALUES (?1 * {LIST_SPAN} + ?2, ?2,"
                 f" {code_sql('?3', factor)})")
    filled = 0
    cursor = conn.execute(f"SELECT chunk_id, embedding FROM {schema.VECTORS}")  # other tables may be written meanwhile
    while rows := cursor.fetchmany(_BATCH):
        blobs = [bytes(blob) for _, blob in rows]
        lists = [0] * len(rows)
        if trained:
            cells, fine = kmeans.assign(trained, _matrix(blobs))
            lists = [list_id(c, j) for c, j in zip(cells.tolist(), fine.tolist())]
        conn.executemany(statement, [(lst, int(cid), blob) for lst, (cid, _), blob in zip(lists, rows, blobs)])
        filled += len(rows)
    conn.execute(f"INSERT INTO {schema.CODES}(key, chunk_id, code) SELECT key, chunk_id, code"
                 f" FROM {schema.CODE_STAGING} ORDER BY key")
    schema.drop_code_staging(conn)
    schema.index_vector_codes(conn)
    return filled


def _count(conn: Connection) -> int:
    """The store's size in vectors, counted by its chunks (every chunk of a vector store has one; counting
    vec0 rows reads all of chunks_vec, ~1 s at 1M, which every vector run would pay)."""
    return int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])


def _sample(conn: Connection, n: int, seed: int) -> kmeans.Matrix:
    """n stored vectors picked at random (seeded by the store size, so a rebuild is repeatable), one row each."""
    import numpy as np

    ids = [int(r[0]) for r in conn.execute("SELECT id FROM chunks")]
    picked = sorted(random.Random(seed).sample(ids, min(n, len(ids))))
    out: kmeans.Matrix | None = None
    filled = 0
    for i in range(0, len(picked), _BATCH):
        rows = conn.execute(f"SELECT v.embedding FROM json_each(?) AS j CROSS JOIN {schema.VECTORS} AS v"
                            " ON v.chunk_id = j.value", (json.dumps(picked[i : i + _BATCH]),))  # point reads
        batch = _matrix([bytes(blob) for (blob,) in rows])
        if not len(batch):  # chunks without a vector (yet)
            continue
        if out is None:
            out = np.empty((len(picked), batch.shape[1]), dtype=np.float32)
        out[filled : filled + len(batch)] = batch
        filled += len(batch)
    return out[:filled] if out is not None else _matrix([])


def _matrix(blobs: list[bytes]) -> kmeans.Matrix:
    """float32 blobs as the rows of a matrix."""
    import numpy as np

    width = len(blobs[0]) // 4 if blobs else 0
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), width)


def _power_of_two(limit: float) -> int:
    """The largest power of two <= limit, between 1 and MAX_FACTOR."""
    factor = 1
    while factor * 2 <= min(limit, MAX_FACTOR):
        factor *= 2
    return factor
