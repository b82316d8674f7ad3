"""Reciprocal rank fusion (rankings combined by rank alone, so BM25 and distances never meet) and
document diversity (one document cannot fill every slot of a result list).

Diversity: in a ranked list, a section whose document already has PER_DOCUMENT sections above it is
demoted, not dropped: it moves after every section that is within its document's allowance, the
demoted ones keeping their order (and their scores). The rule reads the whole list, never the
number of results asked for, so the first k of a longer answer are the answer for k. Two sections
a document, because a section and its neighbour often answer together, while a third from the same
page is worth less to a reader (or an agent's budget) than the best section of another page.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

RRF_K = 60
PER_DOCUMENT = 2  # sections of one document before the rest of it is demoted


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


def diversify(ranked: Sequence[tuple[int, float]], document_of: Mapping[int, int],
              per_document: int = PER_DOCUMENT,
              exempt: Collection[int] = ()) -> tuple[list[tuple[int, float]], set[int]]:
    """(ranked with each document's sections past its first per_document moved after the others, the moved ids).

    An exempt section (a pinned one, query/verbatim.py) is never moved but counts towards its
    document's allowance. A chunk id missing from document_of (vanished meanwhile) counts as a
    document of its own.
    """
    kept: list[tuple[int, float]] = []
    moved: list[tuple[int, float]] = []
    seen: dict[int, int] = {}
    for chunk_id, score in ranked:
        document = document_of.get(chunk_id, -chunk_id)
        seen[document] = seen.get(document, 0) + 1
        (kept if seen[document] <= per_document or chunk_id in exempt else moved).append((chunk_id, score))
    return kept + moved, {chunk_id for chunk_id, _ in moved}


def diversified_prefix(ranked: Sequence[tuple[int, float]], depth: int | None,
                       documents_of: Callable[[list[int]], Mapping[int, int]], per_document: int = PER_DOCUMENT,
                       exempt: Collection[int] = ()) -> tuple[list[tuple[int, float]], set[int]]:
    """diversify(ranked, ...) exact for its first `depth` sections that are not exempt (all of it for None).

    A section's place depends only on the sections above it, so once a prefix of ranked holds depth
    non-exempt sections within their documents' allowance, those are settled: the rest of the list
    follows unread, in its order (a search of top 5 over 50 or 100 candidates looks up the documents
    of ~5-10 ranks, not all). Returns (that list, the moved ids among the ranks read).
    """
    if depth is None:
        return diversify(ranked, documents_of([chunk_id for chunk_id, _ in ranked]), per_document, exempt)
    known: dict[int, int] = {}
    read = 0
    size = min(len(ranked), depth)
    while True:
        known.update(documents_of([chunk_id for chunk_id, _ in ranked[read:size]]))
        read = size
        order, moved = diversify(ranked[:size], known, per_document, exempt)
        settled = size - len(moved) - (sum(1 for chunk_id, _ in ranked[:size] if chunk_id in exempt) if exempt else 0)
        if settled >= depth or size == len(ranked):
            return order + list(ranked[size:]), moved
        size = min(len(ranked), 2 * size)


def diversified_top(ranked: Sequence[tuple[int, float]], k: int, documents_of: Callable[[list[int]], Mapping[int, int]],
                    per_document: int = PER_DOCUMENT) -> list[tuple[int, float]]:
    """The first k of diversify(ranked, ...)[0], asking documents_of for the documents of as few ranks as it needs."""
    if not ranked or k < 1:
        return []
    return diversified_prefix(ranked, k, documents_of, per_document)[0][:k]
