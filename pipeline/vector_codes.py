"""Quantised companions of chunks_vec: int8 codes in inverted lists, for KNN that reads a fraction of the store.

Brute-force KNN over chunks_vec costs ~45 ms per 100k chunks (sqlite-vec without SIMD), so large
stores search in two steps. Every vector gets an int8 code (sqlite-vec's `vec_quantize_int8`,
after scaling by a power of two so the store's coordinates fill the int8 range) filed under its
nearest centroid: chunks_vec_i8 is keyed by list * LIST_SPAN + chunk id (its rowid, so codes
written in key order fill their pages), so one list is a contiguous run of pages. A query ranks
the centroids, scans the int8 codes of the nearest lists (query.vector.probes: about PROBE_ROWS
codes, however large the store) and re-scores the best of them exactly from chunks_vec. Codes are
384 bytes for 384 dimensions, a quarter of the float vector, and nothing else is copied.

Centroids (chunks_vec_centroids, unit float32 vectors) come from a few rounds of spherical k-means
over a sample of the store's vectors, one list per about LIST_SIZE vectors (at most MAX_CLUSTERS).
A store with too few vectors has no centroid: all its codes sit in list 0 and a query scans them
all. refresh() (every vector run, before its first write and when it finishes) trains again when
the store has grown past four times the size the centroids were trained on; in between, each new
vector joins its nearest list in the document's transaction. `SCHEME`, pinned in meta, names the
encoding (a store built with another is rebuilt); the training state (vectors trained on, lists,
scale) is a JSON meta value. Names and DDL are pipeline/schema.py's.
"""

from __future__ import annotations

import json
import math
import random
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pipeline import schema
from pipeline.db import Connection

SCHEME = "int8-ivf-1"
LIST_SIZE = 4096  # vectors a list holds when the centroids are trained
MAX_CLUSTERS = 128  # ranking the centroids and filing a vector cost one distance per centroid
LIST_SPAN = 1 << 40  # a code's key is list * LIST_SPAN + chunk id
GROWTH = 4  # train again once the store holds this many times the vectors the centroids saw
SAMPLE_PER_CLUSTER = 64
ROUNDS = 5  # k-means rounds over the sample
MAX_FACTOR = 8
_BATCH = 2000


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

    Call inside a transaction, after chunks_vec exists. Returns the vectors filed.
    """
    schema.drop_vector_codes(conn)
    schema.create_vector_codes(conn)
    total = _count(conn)
    clusters = clusters_for(total)
    sample = _sample(conn, min(total, clusters * SAMPLE_PER_CLUSTER), seed=total) if clusters else []
    factor = default_factor(dimension)
    if sample:
        peak = max(max(abs(x) for x in v) for v in sample)
        factor = _power_of_two(1 / peak) if peak > 0 else factor
        centroids = _kmeans(conn, sample, clusters)
        conn.executemany(f"INSERT INTO {schema.CENTROIDS}(id, centroid) VALUES (?, ?)",
                         [(i + 1, array("f", c).tobytes()) for i, c in enumerate(centroids)])
    # Untrained (no vector yet, e.g. a lexical store turning embeddings on) counts as trained on none, so the
    # next refresh trains as soon as the store is large enough.
    done = CodeState(total if sample else 0, clusters if sample else 0, factor)
    schema.write_meta(conn, {schema.VECTOR_CODES_KEY: SCHEME, schema.VECTOR_CODES_STATE_KEY: done.to_meta()})
    return _fill(conn, factor)


def insert(conn: Connection, rows: Iterable[tuple[int, bytes]]) -> None:
    """File the code of each (chunk id, float32 blob) under its nearest list (call only when ready())."""
    conn.executemany(_insert_sql(f"{schema.CODES}", state(conn).factor), [(blob, cid) for cid, blob in rows])


def _insert_sql(table: str, factor: int) -> str:
    return (f"INSERT INTO {table}(key, chunk_id, code) VALUES (coalesce((SELECT id FROM {schema.CENTROIDS}"
            f" ORDER BY vec_distance_l2(centroid, ?1) LIMIT 1), 0) * {LIST_SPAN} + ?2, ?2, {code_sql('?1', factor)})")


def _fill(conn: Connection, factor: int) -> int:
    """File every vector of chunks_vec, staged in a temp table so the lists are written in key order."""
    schema.create_code_staging(conn)
    statement = _insert_sql(schema.CODE_STAGING, factor)
    filled = 0
    cursor = conn.execute(f"SELECT chunk_id, embedding FROM {schema.VECTORS}")  # other tables may be written meanwhile
    while rows := cursor.fetchmany(_BATCH):
        conn.executemany(statement, [(bytes(blob), int(cid)) for cid, blob in rows])
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


def _sample(conn: Connection, n: int, seed: int) -> list[list[float]]:
    """n stored vectors picked at random (seeded by the store size, so a rebuild is repeatable)."""
    ids = [int(r[0]) for r in conn.execute("SELECT id FROM chunks")]
    picked = sorted(random.Random(seed).sample(ids, min(n, len(ids))))
    out: list[list[float]] = []
    for i in range(0, len(picked), _BATCH):
        rows = conn.execute(f"SELECT v.embedding FROM json_each(?) AS j CROSS JOIN {schema.VECTORS} AS v"
                            " ON v.chunk_id = j.value", (json.dumps(picked[i : i + _BATCH]),))  # point reads
        out += [array("f", bytes(blob)).tolist() for (blob,) in rows]
    return out


def _kmeans(conn: Connection, sample: list[list[float]], clusters: int) -> list[list[float]]:
    """Spherical k-means: unit centroids, each the normalised mean of the sample vectors nearest it.

    Distances run in SQLite (vec_distance_l2 against a temp table of the current centroids).
    """
    rng = random.Random(len(sample))
    centroids = [_unit(v) for v in rng.sample(sample, clusters)]
    blobs = [array("f", v).tobytes() for v in sample]
    schema.create_centroid_scratch(conn)
    try:
        for _ in range(ROUNDS):
            conn.execute(f"DELETE FROM {schema.CENTROID_SCRATCH}")
            conn.executemany(f"INSERT INTO {schema.CENTROID_SCRATCH}(id, centroid) VALUES (?, ?)",
                             [(i, array("f", c).tobytes()) for i, c in enumerate(centroids)])
            nearest = _nearest_each(conn, blobs)
            sums = [[0.0] * len(sample[0]) for _ in range(clusters)]
            counts = [0] * clusters
            for vector, c in zip(sample, nearest):
                counts[c] += 1
                sums[c] = [a + b for a, b in zip(sums[c], vector)]
            centroids = [_unit(s) if n else _unit(rng.choice(sample)) for s, n in zip(sums, counts)]
    finally:
        schema.drop_centroid_scratch(conn)
    return centroids


def _nearest_each(conn: Connection, blobs: list[bytes]) -> list[int]:
    sql = f"SELECT id FROM {schema.CENTROID_SCRATCH} ORDER BY vec_distance_l2(centroid, ?) LIMIT 1"
    return [int(conn.execute(sql, (b,)).fetchone()[0]) for b in blobs]


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else list(vector)


def _power_of_two(limit: float) -> int:
    """The largest power of two <= limit, between 1 and MAX_FACTOR."""
    factor = 1
    while factor * 2 <= min(limit, MAX_FACTOR):
        factor *= 2
    return factor
