"""Pseudo-relevance feedback for the vector tier: candidates re-scored by the query moved toward its best sections.

A hybrid search runs KNN once, with one embedding call. That pass ranks the sections nearest the
query's vector; those are fused with the lexical candidates by RRF (query/fusion.py), and the vectors
of the FEEDBACK best fused sections are averaged into unit(q + BETA * mean): Rocchio's query update
(Rocchio 1971), as studied for dense retrievers by Li et al. (ECIR 2022, "Improving query
representations for dense retrieval with pseudo relevance feedback: a reproducibility study"). The
moved query then RE-SCORES the candidates both tiers already listed (the lexical ones and the first
pass's, one batched exact read of their vectors): that list, nearest first, is the vector tier that
fusion, explain and the caller see. Because the feedback comes from the fused ranking, lexical
evidence (the exact terms of the query) reaches the vector tier: a section that shares the query's
words and is near its best fused sections ranks higher in both.

A second KNN with the moved query (shipped first) found no better sections on Cranfield than the
re-scored candidates (nDCG@10 0.434 either way on the breadcrumb store) and cost as much as the first
pass, the larger part of a hybrid query on large stores (bench/RESULTS.md, "Better hybrid ranking").
On Cranfield every setting from 1 to 10 feedback sections and BETA 0.5 or 1 gained 0.01-0.02
nDCG@10 over plain RRF on two separately embedded stores; the defaults (3 sections, the query and
their mean weighted equally) are the common choice in that literature, not a fit to Cranfield. A
forced `vector` ranking (evaluation) stays the first pass alone, the tier as the model sees it.

The pass and the re-scoring run in one read snapshot that pins the identity, so a model switch that
swaps the vectors in between is seen as None (the caller embeds the query again with the new model).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from pipeline import db, schema
from pipeline.db import Connection
from pipeline.vectors import VectorIdentity, from_blob
from query.caches import Caches
from query.fusion import rrf
from query.vector import exact_nearest, knn_pinned

FEEDBACK = 3  # sections of the first fused ranking whose vectors move the query
BETA = 1.0  # weight of their mean against the query's own unit vector


def moved_query(conn: Connection, vector: Sequence[float], chunk_ids: Sequence[int]) -> list[float]:
    """unit(vector + BETA * mean of the chunks' stored vectors); the vector itself when none has one."""
    stored = [from_blob(bytes(row[0])) for row in conn.execute(  # a join: point reads, never a scan
        f"SELECT v.embedding FROM json_each(?) AS j CROSS JOIN {schema.VECTORS} AS v ON v.chunk_id = j.value",
        (json.dumps([int(cid) for cid in chunk_ids]),))]
    stored = [v for v in stored if len(v) == len(vector)]
    if not stored:
        return list(vector)
    mean = [sum(column) / len(stored) for column in zip(*stored)]
    summed = [q + BETA * m for q, m in zip(vector, mean)]
    norm = math.sqrt(math.fsum(x * x for x in summed))
    return [x / norm for x in summed] if norm > 0 else list(vector)


def nearest_with_feedback(conn: Connection, identity: VectorIdentity, vector: list[float], count: int,
                          lexical: Sequence[int] | None, excluded: set[int],
                          allowed: str | None = None, caches: Caches | None = None,
                          ) -> tuple[list[tuple[int, float]], list[int]] | None:
    """(the vector tier's (chunk id, distance) list, the feedback chunk ids) in one snapshot; None after a switch.

    The list is the lexical and first-pass candidates (at most count of them) re-scored by the moved
    query. With lexical None (a forced vector ranking) the first pass is the answer and no feedback is
    used. Excluded chunks (the query's `-word`s) are neither feedback nor answers; lexical holds only
    allowed chunks when a filter is on, as the first pass does.
    """
    with db.read_snapshot(conn):
        first = knn_pinned(conn, identity, vector, count, allowed, caches)
        if first is None or lexical is None:
            return None if first is None else (first, [])
        nearest = [cid for cid, _ in first if cid not in excluded]
        top = [cid for cid, _ in rrf([lexical, nearest])[:FEEDBACK]]
        if not top:
            return first, []
        pool = [cid for cid in dict.fromkeys([*lexical, *nearest]) if cid not in excluded]
        return exact_nearest(conn, moved_query(conn, vector, top), pool, count), top
