"""Ranking metrics over one query's document ranking and its graded judgments: pure functions.

A ranking is a list of document ids, best first, each id once (`first_ranks` makes one from hits
where several chunks of a document appear: the document counts at its best rank). Judgments map
document ids to graded relevance; a document is relevant when its grade is > 0, and a grade below
zero counts as zero.

- nDCG@k: sum of grade / log2(rank + 1) over the top k (linear gains, ranks 1-based), divided by
  the same sum for the ideal ranking of every judged document; 0 when nothing is relevant.
- Recall@k: relevant documents in the top k over all relevant documents.
- MRR@k (its per-query part, the reciprocal rank): 1 / rank of the first relevant document in the
  top k, else 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

NDCG_AT = 10
RECALL_AT = (10, 100)
MRR_AT = 10
METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@10")


def first_ranks(doc_ids: Iterable[str]) -> list[str]:
    """Document ids in order, each kept at its first (best) rank only."""
    return list(dict.fromkeys(doc_ids))


def relevant(judged: Mapping[str, int]) -> set[str]:
    """The documents judged relevant (grade > 0)."""
    return {doc for doc, grade in judged.items() if grade > 0}


def dcg(grades: Iterable[int]) -> float:
    """Discounted cumulative gain of grades in rank order: sum of grade / log2(rank + 1)."""
    return sum(max(grade, 0) / math.log2(rank + 1) for rank, grade in enumerate(grades, start=1))


def ndcg_at(ranking: Sequence[str], judged: Mapping[str, int], k: int = NDCG_AT) -> float:
    """nDCG@k of a ranking against graded judgments (0.0 when no document is relevant)."""
    ideal = dcg(sorted((g for g in judged.values() if g > 0), reverse=True)[:k])
    if ideal == 0:
        return 0.0
    return dcg(judged.get(doc, 0) for doc in ranking[:k]) / ideal


def recall_at(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """The share of relevant documents found in the top k (0.0 when no document is relevant)."""
    wanted = relevant(judged)
    if not wanted:
        return 0.0
    return len(wanted.intersection(ranking[:k])) / len(wanted)


def reciprocal_rank_at(ranking: Sequence[str], judged: Mapping[str, int], k: int = MRR_AT) -> float:
    """1 / rank of the first relevant document in the top k, or 0.0."""
    for rank, doc in enumerate(ranking[:k], start=1):
        if judged.get(doc, 0) > 0:
            return 1.0 / rank
    return 0.0


def scores(ranking: Sequence[str], judged: Mapping[str, int]) -> dict[str, float]:
    """nDCG@10, Recall@10, Recall@100 and the reciprocal rank @10 of one query."""
    return {
        "ndcg@10": ndcg_at(ranking, judged, NDCG_AT),
        "recall@10": recall_at(ranking, judged, RECALL_AT[0]),
        "recall@100": recall_at(ranking, judged, RECALL_AT[1]),
        "mrr@10": reciprocal_rank_at(ranking, judged, MRR_AT),
    }


def mean(per_query: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """The mean of each metric over the queries (all 0.0 for no queries)."""
    rows = list(per_query)
    return {name: (sum(row[name] for row in rows) / len(rows) if rows else 0.0) for name in METRICS}


def misses(ranking: Sequence[str], judged: Mapping[str, int], k: int = NDCG_AT) -> list[tuple[str, int, int | None]]:
    """(document, grade, rank or None) of each relevant document not in the top k: best grade first.

    The rank is the document's 1-based rank in the whole ranking, None when it is not there at all.
    """
    top = set(ranking[:k])
    position = {doc: rank for rank, doc in enumerate(ranking, start=1)}
    missed = [(doc, grade, position.get(doc)) for doc, grade in judged.items() if grade > 0 and doc not in top]
    return sorted(missed, key=lambda m: (-m[1], m[2] if m[2] is not None else math.inf, m[0]))
