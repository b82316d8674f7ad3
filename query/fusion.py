"""Reciprocal rank fusion: combine rankings by rank alone, so BM25 and distances never meet."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

RRF_K = 60


def rrf(rankings: Iterable[Sequence[int]], k: int = RRF_K) -> list[tuple[int, float]]:
    """(chunk id, score) best first: score = sum of 1/(k + rank) over the rankings, ranks 1-based.

    An id listed twice in one ranking counts at its best rank; equal scores go to the smaller id.
    """
    scores: dict[int, float] = {}
    for ranking in rankings:
        seen: set[int] = set()
        for rank, chunk_id in enumerate(ranking, start=1):
            if chunk_id in seen:
                continue
            seen.add(chunk_id)
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def fused_ids(rankings: Iterable[Sequence[int]], limit: int, k: int = RRF_K) -> list[int]:
    """The first `limit` chunk ids of the fused ranking."""
    return [chunk_id for chunk_id, _ in rrf(rankings, k)[:limit]]
