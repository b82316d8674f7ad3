"""Quantised companions of chunks_vec: int8 codes in inverted lists, for KNN that reads a fraction of the store.

Brute-force KNN over chunks_vec costs ~45 ms per 100k chunks (sqlite-vec without SIMD), so large
stores search in two steps. Every vector gets an int8 code (sqlite-vec's `vec_quantize_int8`,
after scaling by a power of two so the store's coordinates fill the int8 range) filed under a
list. A list is one row of chunks_vec_lists: its chunk ids (int64) and its codes, each one
contiguous blob, so a query reads a probed list with one row read and scores its codes with numpy
(query/list_scan.py). A query ranks the lists' centroids, scans the codes of the nearest lists and
re-scores the best of them exactly from chunks_vec. Codes are 384 bytes for 384 dimensions, a
quarter of the float vector, and nothing else is copied.

Writes go through a delta: the writer files a new vector's code, in SQL and in its document's
transaction, as a row of chunks_vec_i8 keyed list * LIST_SPAN + chunk id (a list's delta is one key
range), and a trigger deletes that row with its chunk. A deleted chunk's entry in a list blob stays
until the lists are compacted: readers re-score every candidate from chunks_vec, where it is gone,
and a delta row supersedes a list entry of the same chunk id. refresh() (every vector run, before
its first write and when it finishes) compacts: it rewrites the lists that hold dead or superseded
entries or have delta rows, and empties the delta.

The lists are small (about LIST_SIZE vectors each, at most MAX_CLUSTERS of them), because at a
given share of the store scanned, recall grows with the number of lists. They are trained in two
levels (pipeline/kmeans.py, numpy): about sqrt(lists) coarse centroids (chunks_vec_coarse), then
fine centroids inside each coarse cell (chunks_vec_centroids; the fine lists of coarse cell c have
the ids c * FINE_SPAN + 1 ...). A vector is filed under the nearest fine centroid of its nearest
coarse cell: ~2 sqrt(lists) distances, in numpy when a build files the whole store, in SQL
(insert()) when the writer files a new vector. A store with too few vectors has no centroid: all
its codes sit in list 0. refresh() trains again when the store has grown past four times the size
the centroids were trained on. `SCHEME`, pinned in meta, names the encoding (a store built with
another is rebuilt from chunks_vec by the next vector run, nothing embedded again; format 7's
one-row-per-code `int8-ivf-2` is regrouped by its migration); the training state (vectors trained
on, lists, scale, a build number readers key their centroid cache by, entries filed in the lists)
is a JSON meta value. Names and DDL are pipeline/schema.py's.
"""

from __future__ import annotations

import json
import math
import random
import sys
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pipeline import schema
from pipeline.db import Connection

if TYPE_CHECKING:
    from pipeline import kmeans

SCHEME = "int8-ivf-3"  # int8-ivf-2: one row per code (formats 6 and 7); int8-ivf-1: one level of at most 128 lists
ROW_SCHEME = "int8-ivf-2"
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
    """How the codes were built: vectors the centroids were trained on, centroids, the scale factor, the build
    (a number that changes whenever the centroids or the list rows are rewritten) and the entries the lists hold."""

    trained: int
    clusters: int
    factor: int
    build: int = 0
    filed: int = 0

    def to_meta(self) -> str:
        """The JSON meta value."""
        return json.dumps({"trained": self.trained, "clusters": self.clusters, "factor": self.factor,
                           "build": self.build, "filed": self.filed})


def ready(conn: Connection) -> bool:
    """True when the companion tables exist and were built with this SCHEME."""
    return schema.has_vector_codes(conn) and schema.meta_value(conn, schema.VECTOR_CODES_KEY) == SCHEME


def state(conn: Connection) -> CodeState:
    """The pinned training state (call only when ready())."""
    data = json.loads(schema.meta_value(conn, schema.VECTOR_CODES_STATE_KEY) or "{}")
    return CodeState(int(data.get("trained", 0)), int(data.get("clusters", 0)), int(data.get("factor", 1)),
                     int(data.get("build", 0)), int(data.get("filed", 0)))


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

    Otherwise compacts the lists when they hold dead or superseded entries or the delta has rows.
    Returns the vectors filed when it (re)built, None when it only compacted or they were in step.
    Call inside a transaction, after chunks_vec exists.
    """
    if ready(conn):
        have = state(conn)
        total = _count(conn)
        if clusters_for(total) <= have.clusters or total <= GROWTH * max(have.trained, LIST_SIZE):
            if _delta_size(conn) or have.filed > total:
                compact(conn)
            return None
    return install(conn, dimension)


def install(conn: Connection, dimension: int) -> int:
    """(Re)create the companions from chunks_vec, training centroids when the store is large enough.

    Call inside a transaction, after chunks_vec exists. Returns the vectors filed. Training and the
    bulk filing use numpy (pipeline/kmeans.py), imported here only: the read side never loads it.
    """
    from pipeline import kmeans

    build = state(conn).build + 1 if schema.meta_value(conn, schema.VECTOR_CODES_STATE_KEY) else 1
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
    filled = _fill(conn, factor, trained)
    done = CodeState(total if trained else 0, trained.count if trained else 0, factor, build, filled)
    schema.write_meta(conn, {schema.VECTOR_CODES_KEY: SCHEME, schema.VECTOR_CODES_STATE_KEY: done.to_meta()})
    return filled


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
    """File every vector of chunks_vec into the list blobs, staged in a temp table so each list is written once."""
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
    _write_lists(conn, conn.execute(f"SELECT key, chunk_id, code FROM {schema.CODE_STAGING} ORDER BY key"))
    schema.drop_code_staging(conn)
    schema.index_vector_codes(conn)
    return filled


def _write_lists(conn: Connection, rows: Iterable[tuple[int, int, bytes]]) -> None:
    """Write (key, chunk id, code) rows, in key order, as one list row per list (replacing what it held)."""
    current, ids, codes = -1, array("q"), bytearray()
    for key, cid, code in rows:
        lst = int(key) // LIST_SPAN
        if lst != current:
            _put_list(conn, current, ids, codes)
            current, ids, codes = lst, array("q"), bytearray()
        ids.append(int(cid))
        codes += code
    _put_list(conn, current, ids, codes)


def _put_list(conn: Connection, lst: int, ids: array[int], codes: bytes | bytearray) -> None:
    if lst < 0:
        return
    if not ids:
        conn.execute(f"DELETE FROM {schema.LISTS} WHERE id = ?", (lst,))
        return
    conn.execute(f"INSERT OR REPLACE INTO {schema.LISTS}(id, ids, codes) VALUES (?, ?, ?)",
                 (lst, _little_endian(ids), bytes(codes)))


def _little_endian(ids: array[int]) -> bytes:
    if sys.byteorder != "little":
        ids = array("q", ids)
        ids.byteswap()
    return ids.tobytes()


def _ids_of(blob: bytes) -> array[int]:
    """A list's chunk ids from its blob."""
    ids = array("q")
    ids.frombytes(blob)
    if sys.byteorder != "little":
        ids.byteswap()
    return ids


def compact(conn: Connection) -> int:
    """Rewrite the lists that hold entries of deleted chunks, entries a delta row supersedes, or delta rows;
    empty the delta. Returns the lists rewritten. Call inside a transaction (refresh() calls it)."""
    delta: dict[int, dict[int, bytes]] = {}
    for key, cid, code in conn.execute(f"SELECT key, chunk_id, code FROM {schema.CODES}"):
        delta.setdefault(int(key) // LIST_SPAN, {})[int(cid)] = bytes(code)
    moved = {cid for rows in delta.values() for cid in rows}
    live = {int(r[0]) for r in conn.execute("SELECT id FROM chunks")}
    rewritten, filed = 0, 0
    for lst, ids_blob in conn.execute(f"SELECT id, ids FROM {schema.LISTS}").fetchall():  # ids only: no codes read
        ids = _ids_of(bytes(ids_blob))
        keep = [i for i, cid in enumerate(ids) if cid in live and cid not in moved]
        added = delta.pop(int(lst), {})
        if len(keep) == len(ids) and not added:
            filed += len(ids)
            continue
        codes = bytes(conn.execute(f"SELECT codes FROM {schema.LISTS} WHERE id = ?", (lst,)).fetchone()[0])
        width = len(codes) // max(1, len(ids))
        rows = [(ids[i], codes[i * width : (i + 1) * width]) for i in keep] + sorted(added.items())
        _put_list(conn, int(lst), array("q", [cid for cid, _ in rows]), b"".join(code for _, code in rows))
        rewritten, filed = rewritten + 1, filed + len(rows)
    for lst, added in sorted(delta.items()):  # lists that held nothing yet
        rows = sorted(added.items())
        _put_list(conn, lst, array("q", [cid for cid, _ in rows]), b"".join(code for _, code in rows))
        rewritten, filed = rewritten + 1, filed + len(rows)
    conn.execute(f"DELETE FROM {schema.CODES}")
    had = state(conn)
    done = replace(had, build=had.build + 1, filed=filed)
    schema.write_meta(conn, {schema.VECTOR_CODES_STATE_KEY: done.to_meta()})
    return rewritten


def regroup(conn: Connection) -> int:
    """Turn format 7's one row per code (`int8-ivf-2`) into list rows (same centroids, nothing re-filed); the count.

    Does nothing (0) on a store without those companions. Call inside a transaction.
    """
    if schema.meta_value(conn, schema.VECTOR_CODES_KEY) != ROW_SCHEME or not schema.exists(conn, schema.CODES):
        return 0
    schema.create_code_lists(conn)
    _write_lists(conn, conn.execute(f"SELECT key, chunk_id, code FROM {schema.CODES} ORDER BY key"))
    filed = int(conn.execute(f"SELECT count(*) FROM {schema.CODES}").fetchone()[0])
    conn.execute(f"DELETE FROM {schema.CODES}")
    had = state(conn)
    done = replace(had, build=had.build + 1, filed=filed)
    schema.write_meta(conn, {schema.VECTOR_CODES_KEY: SCHEME, schema.VECTOR_CODES_STATE_KEY: done.to_meta()})
    return filed


def filed(conn: Connection) -> dict[int, tuple[int, bytes]]:
    """{chunk id: (list, code)} of every live chunk's code as a reader sees it: a delta row over a list entry,
    entries of deleted chunks left out."""
    live = {int(r[0]) for r in conn.execute("SELECT id FROM chunks")}
    out: dict[int, tuple[int, bytes]] = {}
    for lst, ids_blob, codes in conn.execute(f"SELECT id, ids, codes FROM {schema.LISTS}"):
        ids = _ids_of(bytes(ids_blob))
        width = len(codes) // max(1, len(ids))
        for i, cid in enumerate(ids):
            if cid in live:
                out[cid] = (int(lst), bytes(codes[i * width : (i + 1) * width]))
    for key, cid, code in conn.execute(f"SELECT key, chunk_id, code FROM {schema.CODES}"):
        out[int(cid)] = (int(key) // LIST_SPAN, bytes(code))
    return out


def filed_ids(conn: Connection) -> set[int]:
    """The live chunk ids that have a code (in a list or the delta): filed() without reading the codes."""
    live = {int(r[0]) for r in conn.execute("SELECT id FROM chunks")}
    out = {int(cid) for (cid,) in conn.execute(f"SELECT chunk_id FROM {schema.CODES}")}
    for (ids_blob,) in conn.execute(f"SELECT ids FROM {schema.LISTS}"):
        out.update(_ids_of(bytes(ids_blob)))
    return out & live


def out_of_step(conn: Connection) -> tuple[int, int]:
    """(codes of chunks without a vector, vectors without a code) of a store with the companions."""
    codes = filed_ids(conn)
    vectors = {int(cid) for (cid,) in conn.execute(f"SELECT chunk_id FROM {schema.VECTORS}")}
    return len(codes - vectors), len(vectors - codes)


def stale(conn: Connection) -> int:
    """List entries a reader skips (their chunk deleted, or a delta row supersedes them): compaction drops them."""
    return state(conn).filed + _delta_size(conn) - len(filed(conn))


def _delta_size(conn: Connection) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {schema.CODES}").fetchone()[0])


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
