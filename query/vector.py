"""The vector tier of a query: the index's pinned identity, the query embedding, KNN over chunks_vec.

The query is embedded with the identity pinned in the index (model, query prefix, dimension); a
configuration that differs from it is a hard error naming `--reindex`, never a degrade, because the
ranking would be wrong rather than narrower.

KNN is exact brute force over chunks_vec on small stores (~5 ms at 10k chunks). From EXACT_BELOW
chunks on, when the store has trained quantised companions (pipeline.vector_codes), the query ranks
every list's centroid, scans the int8 codes of the nearest lists with numpy (query/list_scan.py:
PROBE_SHARE of the lists, at least about MIN_PROBE_ROWS codes) and re-scores the RESCORE * k best
of them exactly from chunks_vec: the exact top k whenever those hold it. Stores without the
companions, or whose lists are not trained yet, stay exact.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from config.errors import VectorIdentityMismatch
from config.settings import EmbeddingsSettings
from pipeline import db, schema, vector_codes
from pipeline.db import Connection
from pipeline.embeddings import EmbeddingsClient, RetryPolicy
from pipeline.vectors import (
    VectorIdentity,
    check_identity,
    configured_identity,
    has_table,
    no_vectors,
    pinned_identity,
    to_blob,
)
from query.caches import Caches

if TYPE_CHECKING:
    from query.list_scan import VectorLists

KNN_K = 50
# Below this many chunk ids brute force is as fast as the quantised path (both ~5 ms at 10k) and exact.
EXACT_BELOW = 15_000
# Lists a query scans: this share of them, and at least about MIN_PROBE_ROWS codes. all-MiniLM-L6-v2
# vectors needed ~15% of the store scanned for recall@50 >= 0.95 (docs/vector-tier.md, bench/RESULTS.md).
PROBE_SHARE = 0.15
MIN_PROBE_ROWS = 16_000
MIN_PROBES = 4
# The RESCORE * k codes nearest the query are re-scored with their float vectors.
RESCORE = 3
# A filter allowing at most this many chunks ranks them exactly (point reads of their vectors).
EXACT_ALLOWED = 2_000
# A search must answer promptly: one quick retry of a transient failure, then degrade to lexical.
QUERY_RETRY = RetryPolicy(attempts=2, initial_wait=0.1, max_wait=0.5)


def query_identity(settings: EmbeddingsSettings, meta: Mapping[str, str], where: object) -> VectorIdentity:
    """The pinned identity to query with; VectorIdentityMismatch if the configuration differs or none is pinned."""
    pinned = pinned_identity(meta)
    if pinned is None:
        raise no_vectors(where, settings.model)
    # The recipe shapes only the sections' text: a query is embedded alike under every recipe.
    check_identity(where, pinned, configured_identity(settings, pinned.dimension, pinned.recipe))
    return pinned


def embed_query(settings: EmbeddingsSettings, identity: VectorIdentity, text: str,
                retry: RetryPolicy = QUERY_RETRY, environ: Mapping[str, str] | None = None) -> list[float]:
    """The unit vector of text under the pinned identity (EmbeddingUnavailable/Rejected, or a mismatch).

    Each attempt waits at most the query's own budget (embeddings.query_timeout, capped by timeout):
    indexing needs a long timeout, a search must answer promptly or degrade.
    """
    pinned = replace(settings, model=identity.model, query_prefix=identity.query_prefix,
                     document_prefix=identity.document_prefix,
                     timeout=min(settings.timeout, settings.query_timeout))
    with EmbeddingsClient(pinned, environ=environ, retry=retry, expected_dim=identity.dimension) as client:
        return client.embed_query(text)


def knn(
    conn: Connection, vector: list[float], k: int = KNN_K, exact_below: int | None = None,
    caches: Caches | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, L2 distance) of the k nearest chunks, nearest first (ties to the smaller id).

    Exact on stores under `exact_below` (default EXACT_BELOW) chunk ids or without the quantised
    companions; otherwise quantised candidates re-scored exactly (see the module docstring). caches: where
    the lists read are kept (the Reader's, from its ReadIndex; None: kept for this call only).
    """
    if not has_table(conn):
        raise VectorIdentityMismatch(
            "the index pins a vector identity but has no vector table; run `knowledge index --reindex`"
        )
    size = conn.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0]
    if size >= (EXACT_BELOW if exact_below is None else exact_below) and vector_codes.ready(conn) \
            and vector_codes.state(conn).clusters:
        return knn_quantised(conn, vector, k, caches=caches)
    return knn_exact(conn, vector, k)


def knn_pinned(conn: Connection, identity: VectorIdentity, vector: list[float],
               k: int = KNN_K, allowed: str | None = None, caches: Caches | None = None,
               ) -> list[tuple[int, float]] | None:
    """knn() in one read snapshot that still pins identity; None when the store switched models meanwhile.

    With allowed (a filter's document ids, query/filters.py) only those documents' chunks are ranked.

    A query embedded just before a model switch swapped the vector tier (pipeline/shadow.py) is
    never compared with vectors of the other model: the caller re-embeds it with the new identity.
    """
    with db.read_snapshot(conn):
        if pinned_identity(schema.read_meta(conn)) != identity:
            return None
        return (knn(conn, vector, k, caches=caches) if allowed is None
                else knn_within(conn, vector, allowed, k, caches))


def knn_within(conn: Connection, vector: list[float], allowed: str, k: int = KNN_K,
               caches: Caches | None = None) -> list[tuple[int, float]]:
    """(chunk id, L2 distance) of the k nearest chunks of the allowed documents (a JSON array of ids).

    Up to EXACT_ALLOWED allowed chunks are ranked exactly; more, when the quantised companions are
    trained, by their int8 codes in the nearest lists, probed in proportion to the share of the store
    the filter leaves (every list when it leaves under PROBE_SHARE of it), the best RESCORE * k then
    exactly; without the companions, one exact scan of chunks_vec. A filter never starves the top k.
    """
    if not has_table(conn):
        raise VectorIdentityMismatch(
            "the index pins a vector identity but has no vector table; run `knowledge index --reindex`"
        )
    chunks = "SELECT id FROM chunks WHERE document_id IN (SELECT value FROM json_each(?))"
    ids = [int(r[0]) for r in conn.execute(chunks, (allowed,))]
    if len(ids) <= EXACT_ALLOWED:
        return exact_nearest(conn, vector, ids, k)
    if not vector_codes.ready(conn) or not vector_codes.state(conn).clusters:  # one scan, the allowed scored
        rows = conn.execute(
            f"SELECT chunk_id, vec_distance_l2(embedding, ?) AS d FROM {schema.VECTORS} WHERE chunk_id IN ({chunks})"
            f" ORDER BY d, chunk_id LIMIT {int(k)}", (to_blob(vector), allowed)).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]
    from query import list_scan

    state = vector_codes.state(conn)
    size = max(1, int(conn.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0]))
    share = min(1.0, len(ids) / size)
    wanted = state.clusters if share < PROBE_SHARE else min(state.clusters, math.ceil(
        probes(state.clusters, size) / share))
    kept = _kept(caches)
    found = list_scan.centroids(conn, _state_text(conn), kept)
    nearest = list_scan.nearest_lists(found, vector, wanted)
    best = list_scan.best_codes(conn, nearest, vector, RESCORE * k, kept, list_scan.allowed_mask(ids),
                                _state_text(conn))
    return exact_nearest(conn, vector, best, k)


def knn_exact(conn: Connection, vector: list[float], k: int = KNN_K) -> list[tuple[int, float]]:
    """Brute-force KNN over chunks_vec: the reference ranking."""
    rows = conn.execute(
        f"SELECT chunk_id, distance FROM {schema.VECTORS} WHERE embedding MATCH ? AND k = {int(k)} ORDER BY distance",
        (to_blob(vector),),
    ).fetchall()
    return sorted(((int(r[0]), float(r[1])) for r in rows), key=lambda row: (row[1], row[0]))


def probes(clusters: int, size: int) -> int:
    """Lists a query scans in a store of `size` chunks filed in `clusters` lists: PROBE_SHARE of them, at least
    about MIN_PROBE_ROWS codes (every list of a small store)."""
    by_rows = math.ceil(MIN_PROBE_ROWS * clusters / max(1, size))
    return min(clusters, max(MIN_PROBES, math.ceil(PROBE_SHARE * clusters), by_rows))


def knn_quantised(conn: Connection, vector: list[float], k: int = KNN_K, lists: int | None = None,
                  rescore: int | None = None, caches: Caches | None = None) -> list[tuple[int, float]]:
    """The int8 codes of the `lists` lists nearest the query (default probes()), the best rescore * k (default
    RESCORE * k) re-scored exactly.

    Needs the companions; reads in one snapshot (its own when the caller has none). A store whose
    centroids are not trained yet keeps every code in list 0.
    """
    from query import list_scan

    kept = _kept(caches)
    with db.read_snapshot(conn):
        state, text = vector_codes.state(conn), _state_text(conn)
        if state.clusters:
            size = conn.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0]
            found = list_scan.centroids(conn, text, kept)
            nearest = list_scan.nearest_lists(found, vector, probes(state.clusters, size) if lists is None else lists)
        else:
            nearest = [0]
        best = list_scan.best_codes(conn, nearest, vector, int((RESCORE if rescore is None else rescore) * k),
                                    kept, state_text=text)
        return exact_nearest(conn, vector, best, k)


def _kept(caches: Caches | None) -> VectorLists:
    """The vector lists kept in caches (a Reader's, from its ReadIndex), else kept for one call."""
    from query.list_scan import VectorLists

    return caches.of(VectorLists) if caches is not None else VectorLists()


def _state_text(conn: Connection) -> str:
    """The code state's meta JSON: the centroid cache's key (its build changes whenever the centroids do)."""
    return schema.meta_value(conn, schema.VECTOR_CODES_STATE_KEY) or ""


def exact_nearest(conn: Connection, vector: list[float], ids: list[int], k: int) -> list[tuple[int, float]]:
    """(chunk id, L2 distance) of the k of the chunks ids nearest vector, nearest first; one chunks_vec point read each.

    (The join makes every read a vec0 point lookup; `chunk_id IN (...)` would scan all of chunks_vec.)
    """
    rows = conn.execute(
        f"SELECT v.chunk_id, vec_distance_l2(v.embedding, ?) AS d FROM json_each(?) AS j"
        f" CROSS JOIN {schema.VECTORS} AS v ON v.chunk_id = j.value ORDER BY d, v.chunk_id LIMIT {int(k)}",
        (to_blob(vector), json.dumps(ids)),
    ).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]
