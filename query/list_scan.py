"""The quantised KNN's scan: probed lists read as blobs and scored with numpy, centroids cached per store build.

pipeline/vector_codes.py files every code in a list row (the list's chunk ids and its int8 codes,
each one contiguous blob) plus a delta of codes filed since (one row each). A query ranks every
fine centroid (one matrix-vector product), reads the probed lists' rows in groups, scores their
codes by the dot product with the query (int8 codes times an int16 query, summed in int32: the
codes are the vectors scaled and shifted by a constant, so the order is the cosine order) and
keeps the best `candidates` ids for exact re-scoring (query/vector.py).

The centroids and the lists read are kept for later queries of the same process (every Reader of a
`knowledge serve`): the caches are keyed by the file's device and inode (a replaced or copied-over
store is another file) and the code state's JSON, whose build number changes whenever the writer
rewrites centroids or lists (a training, a compaction); rows the delta holds are read per query.
A few stores' centroids are kept (KEEP, ~6 MB each at a million chunks) and at most CACHE_BYTES of
list codes, the least recently used dropped first: the whole of a store up to ~160k chunks, about
a sixth of a million's. Everything is rebuilt from the store file; a one-shot CLI keeps nothing.

numpy is imported here, when a large store's KNN first runs: a lexical read never loads it.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pipeline import schema, vector_codes
from pipeline.db import Connection

KEEP = 4  # stores whose centroids a process keeps
CACHE_BYTES = 64 << 20  # list codes a process keeps between queries (every list of a ~160k-chunk store)
GROUP = 64  # lists scored at a time (~6 MB of codes at ~250 codes a list, 384 dimensions)

Ids = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Centroids:
    """A store build's fine centroids: their list ids and unit rows."""

    ids: Ids
    matrix: npt.NDArray[np.float32]


Codes = tuple[Ids, npt.NDArray[np.int8]]


class VectorLists:
    """The centroids and lists read so far, per store file and build: kept by the ReadIndex (query/caches.py)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.centroids: OrderedDict[tuple[int, int, str], Centroids] = OrderedDict()
        self.lists: OrderedDict[tuple[int, int, str, int], Codes] = OrderedDict()
        self.held = 0  # bytes of the kept lists

    def remember(self, where: tuple[int, int], state_text: str, read: dict[int, Codes]) -> None:
        """Keep lists read for later queries, the least recently used dropped past CACHE_BYTES."""
        with self.lock:
            for lst, (ids, codes) in read.items():
                key = (*where, state_text, lst)
                if key not in self.lists:
                    self.lists[key] = ids, codes
                    self.held += ids.nbytes + codes.nbytes
            while self.held > CACHE_BYTES and self.lists:
                _, (ids, codes) = self.lists.popitem(last=False)
                self.held -= ids.nbytes + codes.nbytes

    def forget(self) -> None:
        """Drop every kept centroid and list (as a new process starts)."""
        with self.lock:
            self.centroids.clear()
            self.lists.clear()
            self.held = 0


def centroids(conn: Connection, state_text: str, kept: VectorLists) -> Centroids:
    """The store's fine centroids, from kept when this file and build were read before."""
    key = (*_file_identity(conn), state_text)
    with kept.lock:
        found = kept.centroids.get(key)
        if found is not None:
            kept.centroids.move_to_end(key)
            return found
    rows = conn.execute(f"SELECT id, centroid FROM {schema.CENTROIDS} ORDER BY id").fetchall()
    ids = np.array([int(r[0]) for r in rows], dtype=np.int64)
    matrix = np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype=np.float32).reshape(len(rows), -1) \
        if rows else np.zeros((0, 0), dtype=np.float32)
    made = Centroids(ids, matrix)
    with kept.lock:
        kept.centroids[key] = made
        while len(kept.centroids) > KEEP:
            kept.centroids.popitem(last=False)
    return made


def _file_identity(conn: Connection) -> tuple[int, int]:
    """(device, inode) of the connection's main database file ((0, 0) in memory)."""
    path = next((str(r[2]) for r in conn.execute("PRAGMA database_list") if r[1] == "main"), "")
    if not path:
        return 0, 0
    info = os.stat(path)
    return int(info.st_dev), int(info.st_ino)


def nearest_lists(found: Centroids, vector: Sequence[float], wanted: int) -> list[int]:
    """The `wanted` lists whose centroids are nearest vector, nearest first (largest dot product: unit rows)."""
    if not len(found.ids):
        return []
    scores = found.matrix @ np.asarray(vector, dtype=np.float32)
    wanted = min(wanted, len(scores))
    best = np.argpartition(-scores, wanted - 1)[:wanted] if wanted < len(scores) else np.arange(len(scores))
    order = best[np.lexsort((found.ids[best], -scores[best]))]
    return [int(i) for i in found.ids[order]]


def query_weights(vector: Sequence[float]) -> npt.NDArray[np.int16]:
    """The query as int16 weights (largest coordinate 2047): with int8 codes, a dot product that fits int32."""
    q = np.asarray(vector, dtype=np.float32)
    peak = float(np.abs(q).max()) if len(q) else 0.0
    return np.round(q * (2047 / peak if peak > 0 else 0)).astype(np.int16)


def best_codes(conn: Connection, lists: list[int], vector: Sequence[float], candidates: int, kept: VectorLists,
               allowed: Mask | None = None, state_text: str = "") -> list[int]:
    """The chunk ids of the `candidates` codes of these lists (and their delta rows) nearest vector, best first.

    With allowed (allowed_mask()) only those chunks' codes compete. A delta row supersedes a list
    entry of the same chunk; entries of deleted chunks may remain (the exact re-scoring drops them).
    The lists come from kept when this store file and build were read before.
    """
    weights = query_weights(vector)
    delta = _delta(conn, lists)
    moved = np.array(sorted(delta), dtype=np.int64)
    pool_ids: list[Ids] = []
    pool_scores: list[npt.NDArray[np.int32]] = []
    found = _lists(conn, lists, state_text, kept)
    for start in range(0, len(found), GROUP):
        group = found[start : start + GROUP]
        ids = np.concatenate([ids for ids, _ in group])
        codes = np.concatenate([codes for _, codes in group])
        _score(ids, codes, weights, candidates, _keep(ids, moved, allowed), pool_ids, pool_scores)
    if delta:
        ids = np.array(list(delta), dtype=np.int64)
        codes = np.frombuffer(b"".join(delta.values()), dtype=np.int8).reshape(len(ids), -1)
        _score(ids, codes, weights, candidates, _keep(ids, None, allowed), pool_ids, pool_scores)
    if not pool_ids:
        return []
    ids, scores = np.concatenate(pool_ids), np.concatenate(pool_scores)
    order = np.lexsort((ids, -scores.astype(np.int64)))
    return _unique(int(i) for i in ids[order])[:candidates]


def _lists(conn: Connection, lists: list[int], state_text: str, kept: VectorLists) -> list[Codes]:
    """(chunk ids, codes) of each list that has a row, in the order asked: cached ones, then the rest read."""
    where = _file_identity(conn) if state_text else (0, 0)
    out: dict[int, Codes] = {}
    with kept.lock:
        for lst in lists:
            hit = kept.lists.get((*where, state_text, lst)) if state_text else None
            if hit is not None:
                kept.lists.move_to_end((*where, state_text, lst))
                out[lst] = hit
    missing = [lst for lst in lists if lst not in out]
    if missing:
        for lst, ids_blob, codes_blob in conn.execute(
                f"SELECT l.id, l.ids, l.codes FROM json_each(?) AS j CROSS JOIN {schema.LISTS} AS l"
                " ON l.id = j.value", (json.dumps(missing),)):
            ids = np.frombuffer(bytes(ids_blob), dtype="<i8").astype(np.int64)
            out[int(lst)] = ids, np.frombuffer(bytes(codes_blob), dtype=np.int8).reshape(len(ids), -1)
        if state_text:
            kept.remember(where, state_text, {lst: out[lst] for lst in missing if lst in out})
    return [out[lst] for lst in lists if lst in out]


def _keep(ids: Ids, moved: Ids | None, allowed: Mask | None) -> Mask | None:
    """Which entries compete: not superseded by a delta row, and allowed (None: all)."""
    mask: Mask | None = None
    if moved is not None and len(moved):
        mask = ~np.isin(ids, moved)
    if allowed is not None:
        inside = (ids < len(allowed)) & allowed[np.minimum(ids, len(allowed) - 1)]
        mask = inside if mask is None else mask & inside
    return mask


def _score(ids: Ids, codes: npt.NDArray[np.int8], weights: npt.NDArray[np.int16], candidates: int,
           mask: Mask | None, pool_ids: list[Ids], pool_scores: list[npt.NDArray[np.int32]]) -> None:
    """Score one group's codes and add its best `candidates` to the pool."""
    if mask is not None:
        ids, codes = ids[mask], codes[mask]
    if not len(ids):
        return
    scores = np.einsum("ij,j->i", codes, weights, dtype=np.int32)
    if len(scores) > candidates:
        best = np.argpartition(-scores, candidates - 1)[:candidates]
        ids, scores = ids[best], scores[best]
    pool_ids.append(ids)
    pool_scores.append(scores)


def _delta(conn: Connection, lists: list[int]) -> dict[int, bytes]:
    """{chunk id: code} of the delta rows filed under these lists."""
    span = vector_codes.LIST_SPAN
    return {int(cid): bytes(code) for cid, code in conn.execute(
        f"SELECT c.chunk_id, c.code FROM json_each(?) AS l CROSS JOIN {schema.CODES} AS c"
        f" ON c.key >= l.value * {span} AND c.key < (l.value + 1) * {span}", (json.dumps(lists),))}


def _unique(ids: Iterable[int]) -> list[int]:
    return list(dict.fromkeys(ids))


def allowed_mask(ids: Sequence[int]) -> Mask:
    """The allowed chunk ids as best_codes takes them: a flag per chunk id (a megabyte at a million)."""
    picked = np.fromiter(ids, dtype=np.int64, count=len(ids))
    mask = np.zeros(int(picked.max()) + 1 if len(picked) else 1, dtype=np.bool_)
    mask[picked] = True
    return mask
