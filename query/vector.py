"""The vector tier of a query: the index's pinned identity, the query embedding, KNN over chunks_vec.

The query is embedded with the identity pinned in the index (model, query prefix, dimension); a
configuration that differs from it is a hard error naming `--reindex`, never a degrade, because the
ranking would be wrong rather than narrower.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from config.errors import VectorIdentityMismatch
from config.settings import EmbeddingsSettings
from pipeline.embeddings import EmbeddingsClient, RetryPolicy
from pipeline.vectors import (
    TABLE,
    VectorIdentity,
    check_identity,
    configured_identity,
    has_table,
    pinned_identity,
    to_blob,
)

KNN_K = 50
# A search must answer promptly: one quick retry of a transient failure, then degrade to lexical.
QUERY_RETRY = RetryPolicy(attempts=2, initial_wait=0.1, max_wait=0.5)


def query_identity(settings: EmbeddingsSettings, meta: Mapping[str, str], where: object) -> VectorIdentity:
    """The pinned identity to query with; VectorIdentityMismatch if the configuration differs or none is pinned."""
    pinned = pinned_identity(meta)
    dimension = pinned.dimension if pinned is not None else 0
    check_identity(where, pinned, configured_identity(settings, dimension))
    assert pinned is not None
    return pinned


def embed_query(settings: EmbeddingsSettings, identity: VectorIdentity, text: str,
                retry: RetryPolicy = QUERY_RETRY, environ: Mapping[str, str] | None = None) -> list[float]:
    """The unit vector of text under the pinned identity (EmbeddingUnavailable/Rejected, or a mismatch)."""
    pinned = replace(settings, model=identity.model, query_prefix=identity.query_prefix,
                     document_prefix=identity.document_prefix)
    with EmbeddingsClient(pinned, environ=environ, retry=retry, expected_dim=identity.dimension) as client:
        return client.embed_query(text)


def knn(conn: Any, vector: list[float], k: int = KNN_K) -> list[tuple[int, float]]:
    """(chunk id, distance) of the k nearest chunks, nearest first (ties to the smaller id)."""
    if not has_table(conn):
        raise VectorIdentityMismatch(
            "the index pins a vector identity but has no vector table; run `knowledge index --reindex`"
        )
    rows = conn.execute(
        f"SELECT chunk_id, distance FROM {TABLE} WHERE embedding MATCH ? AND k = {int(k)} ORDER BY distance",
        (to_blob(vector),),
    ).fetchall()
    return sorted(((int(r[0]), float(r[1])) for r in rows), key=lambda row: (row[1], row[0]))
