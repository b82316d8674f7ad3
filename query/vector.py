"""The vector tier of a query: the index's pinned identity, the query embedding, KNN over chunks_vec.

The query is embedded with the identity pinned in the index (model, query prefix, dimension); a
configuration that differs from it is a hard error naming `--reindex`, never a degrade, because the
ranking would be wrong rather than narrower.

KNN is exact brute force over chunks_vec on small stores (~5 ms at 10k chunks). From EXACT_BELOW
chunks on, when the store has the quantised companions (pipeline.vector_codes), the query ranks the
centroids, scans the int8 codes of the nearest lists (about PROBE_ROWS codes, whatever the store's
size) and re-scores the RESCORE * k best of them exactly from chunks_vec: the exact top k whenever
those hold it. Stores without the companions stay exact.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import replace

from config.errors import VectorIdentityMismatch
from config.settings import EmbeddingsSettings
from pipeline import schema, vector_codes
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

KNN_K = 50
# Below this many chunk ids brute force is as fast as the quantised path (both ~5 ms at 10k) and exact.
EXACT_BELOW = 15_000
# Codes a query scans: the lists nearest the query until about this many (every list of a smaller store).
PROBE_ROWS = 48_000
MIN_PROBES = 4
# The RESCORE * k codes nearest the query are re-scored with their float vectors.
RESCORE = 2
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
    conn: Connection, vector: list[float], k: int = KNN_K, exact_below: int | None = None
) -> list[tuple[int, float]]:
    """(chunk id, L2 distance) of the k nearest chunks, nearest first (ties to the smaller id).

    Exact on stores under `exact_below` (default EXACT_BELOW) chunk ids or without the quantised
    companions; otherwise quantised candidates re-scored exactly (see the module docstring).
    """
    if not has_table(conn):
        raise VectorIdentityMismatch(
            "the index pins a vector identity but has no vector table; run `knowledge index --reindex`"
        )
    size = conn.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0]
    if size >= (EXACT_BELOW if exact_below is None else exact_below) and vector_codes.ready(conn):
        return knn_quantised(conn, vector, k)
    return knn_exact(conn, vector, k)


def knn_pinned(conn: Connection, identity: VectorIdentity, vector: list[float],
               k: int = KNN_K, allowed: str | None = None) -> list[tuple[int, float]] | None:
    """knn() in one read snapshot that still pins identity; None when the store switched models meanwhile.

    With allowed (a filter's document ids, query/filters.py) only those documents' chunks are ranked.

    A query embedded just before a model switch swapped the vector tier (pipeline/shadow.py) is
    never compared with vectors of the other model: the caller re-embeds it with the new identity.
    """
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        if pinned_identity(schema.read_meta(conn)) != identity:
            return None
        return knn(conn, vector, k) if allowed is None else knn_within(conn, vector, allowed, k)
    finally:
        if own:
            conn.execute("COMMIT")


def knn_within(conn: Connection, vector: list[float], allowed: str, k: int = KNN_K) -> list[tuple[int, float]]:
    """(chunk id, L2 distance) of the k nearest chunks of the allowed documents (a JSON array of ids).

    Every allowed chunk is scored (by its int8 code when the quantised companions exist, the best
    RESCORE * k of them then exactly; else exactly from chunks_vec), so a filter never starves the top k.
    """
    if not has_table(conn):
        raise VectorIdentityMismatch(
            "the index pins a vector identity but has no vector table; run `knowledge index --reindex`"
        )
    chunks = "SELECT id FROM chunks WHERE document_id IN (SELECT value FROM json_each(?))"
    if not vector_codes.ready(conn):  # one scan of chunks_vec, the allowed chunks scored
        rows = conn.execute(
            f"SELECT chunk_id, vec_distance_l2(embedding, ?) AS d FROM {schema.VECTORS} WHERE chunk_id IN ({chunks})"
            f" ORDER BY d, chunk_id LIMIT {int(k)}", (to_blob(vector), allowed)).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]
    code = _code(conn, vector)
    best = [int(r[0]) for r in conn.execute(
        f"SELECT chunk_id FROM {schema.CODES} WHERE chunk_id IN ({chunks})"
        f" ORDER BY vec_distance_l2(vec_int8(code), vec_int8(?)), chunk_id LIMIT {int(RESCORE * k)}",
        (allowed, code))]
    return exact_nearest(conn, vector, best, k)


def knn_exact(conn: Connection, vector: list[float], k: int = KNN_K) -> list[tuple[int, float]]:
    """Brute-force KNN over chunks_vec: the reference ranking."""
    rows = conn.execute(
        f"SELECT chunk_id, distance FROM {schema.VECTORS} WHERE embedding MATCH ? AND k = {int(k)} ORDER BY distance",
        (to_blob(vector),),
    ).fetchall()
    return sorted(((int(r[0]), float(r[1])) for r in rows), key=lambda row: (row[1], row[0]))


def probes(clusters: int, size: int) -> int:
    """Lists a query scans in a store of `size` chunks filed in `clusters` lists: about PROBE_ROWS codes."""
    return min(clusters, max(MIN_PROBES, math.ceil(PROBE_ROWS * clusters / max(1, size))))


def knn_quantised(conn: Connection, vector: list[float], k: int = KNN_K, lists: int | None = None,
                  rescore: int = RESCORE) -> list[tuple[int, float]]:
    """The int8 codes of the `lists` lists nearest the query (default probes()), the best re-scored exactly.

    Needs the companions. A store whose centroids are not trained yet keeps every code in list 0.
    """
    state = vector_codes.state(conn)
    code = _code(conn, vector, state.factor)
    if state.clusters:
        size = conn.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0]
        nearest = nearest_lists(conn, vector, probes(state.clusters, size) if lists is None else lists)
    else:
        nearest = [0]
    span = vector_codes.LIST_SPAN
    best = [int(r[0]) for r in conn.execute(
        f"SELECT c.chunk_id FROM json_each(?) AS l CROSS JOIN {schema.CODES} AS c"
        f" ON c.key >= l.value * {span} AND c.key < (l.value + 1) * {span}"
        f" ORDER BY vec_distance_l2(vec_int8(c.code), vec_int8(?)), c.chunk_id LIMIT {int(rescore * k)}",
        (json.dumps(nearest), code))]
    return exact_nearest(conn, vector, best, k)


def nearest_lists(conn: Connection, vector: list[float], wanted: int) -> list[int]:
    """The `wanted` lists whose centroids are nearest vector, nearest first.

    Every fine centroid is ranked (~2 us each: ~8 ms for 3,906 at a million under load). Ranking only
    those of the nearest coarse cells costs less but misses near lists: on 1M random vectors the 16 of
    62 nearest cells held 64% of the 195 nearest lists (bench/RESULTS.md).
    """
    return [int(r[0]) for r in conn.execute(
        f"SELECT id FROM {schema.CENTROIDS} ORDER BY vec_distance_l2(centroid, ?) LIMIT {int(wanted)}",
        (to_blob(vector),))]


def _code(conn: Connection, vector: list[float], factor: int | None = None) -> bytes:
    """The query's int8 code, made the way the store's codes were."""
    factor = vector_codes.state(conn).factor if factor is None else factor
    return bytes(conn.execute(f"SELECT {vector_codes.code_sql('?1', factor)}", (to_blob(vector),)).fetchone()[0])


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
