"""The exact BM25 top k of an OR query, scoring only the rows that can reach it.

FTS5 computes bm25() for every row an OR query matches before ORDER BY ... LIMIT keeps k of them,
and that scoring is most of a query's cost: a few common words match tens of thousands of chunks.
But BM25 is a sum over the query's phrases, and one phrase adds less than (k1 + 1) * idf to any
row, whatever its frequency or length (FTS5's bm25 uses k1 = 1.2). So a row holding the query
terms S scores less than the sum of bound(t) = 2.2 * idf(t) over S, and:

1. the *seed* rows, those holding two or more distinct query terms (plus every row of a term
   held by few rows, cheap to score), are scored with the full query; the k-th best of them is
   a floor every final top-k score reaches. When the terms are common enough that the rows
   holding two of them would be many (at 1M chunks: hundreds of thousands), the seed is instead
   the rows holding the most terms that still number k (all n terms, else any n-1, ...);
2. a *reaching* set of terms is one whose bounds add up to the floor (only the smallest such sets
   count): the rows outside the seed that hold one, might still make the top k, so they are
   scored too; every other row holds a set of terms whose bounds add up to less than the floor.

The answer is the k best of the rows scored, by (score, rowid): exactly the rows, order and scores
of the full query, because every score comes from the same bm25() over the same full expression
(the restriction is a plain filter on rowid, which leaves the phrases, their IDFs and the average
length alone), and a row never scored is strictly below k rows that were. When the seed has fewer
than k rows, or a query has one term, too many terms or only rare ones, the full query runs as
before.

Document frequencies and the row count come from query/frequency.py's per-connection cache (the
numbers FTS5 itself uses: the porter vocabulary's document counts, the chunk count).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import combinations

from pipeline import db
from pipeline.db import Connection
from query.frequency import frequencies
from query.terms import LexicalQuery, quote

BM25_K1 = 1.2  # FTS5's bm25 constant (fts5_aux.c); b = 0.75 does not enter the bound
IDF_FLOOR = 1e-6  # FTS5 clamps a non-positive IDF to this
BOUND_MARGIN = 1e-6  # relative slack on each bound, far above the rounding of log() and the score
MAX_TERMS = 8  # the seed expression has one AND pair per two terms: at most 28 pairs
SEED_FRACTION = 0.025  # a term held by at most this share of the rows is scored whole, in the seed
FULL_BELOW = 2000  # queries matching at most this many rows in all are cheap: no pruning


SEED_ROWS = "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT ?"
SEED_ROWS_MAX = 4096  # a seed of pairs expected above this many rows gives way to rows holding more terms


def score_sql(weights: str) -> str:
    """The full query's rows, bm25 with weights, best k first; `?2` restricts them when given."""
    return (f"SELECT rowid, bm25(chunks_fts, {weights}) AS score FROM chunks_fts WHERE chunks_fts MATCH ?1"
            " AND +rowid IN (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?2) ORDER BY score, rowid LIMIT ?3")


def exact_top_k(conn: Connection, query: LexicalQuery, limit: int, weights: str) -> list[tuple[int, float]] | None:
    """(rowid, bm25) of the exact top limit of query.expression, or None when pruning cannot help.

    None asks the caller to run the full query: one term, more than MAX_TERMS, an unknown
    frequency, few rows in all, no term held by many rows, or a seed of fewer than limit rows.
    The counts and both scoring statements are read in one read transaction (one snapshot), so a
    write landing meanwhile cannot make a bound disagree with the IDFs bm25() uses.
    """
    if not 2 <= len(query.terms) <= MAX_TERMS:
        return None
    with db.read_snapshot(conn):
        return pruned_top_k(conn, query, limit, weights)


def pruned_top_k(conn: Connection, query: LexicalQuery, limit: int, weights: str) -> list[tuple[int, float]] | None:
    """exact_top_k inside the caller's read transaction (None: run the full query)."""
    if not 2 <= len(query.terms) <= MAX_TERMS:
        return None
    terms = query.terms
    rows, found = frequencies(conn, terms)
    counts = {t: found.get(t) for t in terms}
    if not rows or any(n is None for n in counts.values()):
        return None
    held = {t: int(n or 0) for t, n in counts.items()}
    if sum(held.values()) <= FULL_BELOW:
        return None
    small = [t for t in terms if held[t] <= rows * SEED_FRACTION]
    if len(small) == len(terms):
        return None
    together, size = _seed(conn, terms, held, rows, limit)
    seed = " OR ".join([together, *(quote(t) for t in small)])
    sql = score_sql(weights)
    scored = conn.execute(sql, (query.expression, seed, limit)).fetchall()
    if len(scored) < limit:
        return None
    floor = -float(scored[-1][1])
    bounds = {t: bound(rows, held[t]) * query.repeat(t) for t in terms}  # a repeated term is that many phrases
    reaching = [chosen for chosen in reaching_sets(terms, bounds, floor)
                if len(chosen) < size and not set(chosen) & set(small)]  # the rest are all in the seed
    if reaching:
        rest = f"({_any_of(reaching)}) NOT ({seed})"
        scored += conn.execute(sql, (query.expression, rest, limit)).fetchall()
    best = {int(r[0]): float(r[1]) for r in scored}
    return sorted(best.items(), key=lambda item: (item[1], item[0]))[:limit]


def _any_of(sets: Iterable[tuple[str, ...]]) -> str:
    """The FTS5 expression of the rows holding every term of at least one of sets."""
    return " OR ".join("(" + " AND ".join(quote(t) for t in terms) + ")" for terms in sets)


def _seed(conn: Connection, terms: tuple[str, ...], held: dict[str, int], rows: int,
          limit: int) -> tuple[str, int]:
    """(the seed's expression, how many of the terms its rows hold at least).

    The seed is scored whole, so it should be small but still fill limit: the rows holding any two
    terms, unless the terms are so common that those would be many (more than SEED_ROWS_MAX
    expected, were the terms independent), then the rows holding all the terms if they fill limit,
    else any n-1 of them, and so on.
    """
    expected = sum(held[a] * held[b] for a, b in combinations(terms, 2)) / rows
    if expected > SEED_ROWS_MAX:
        for size in range(len(terms), 2, -1):
            seed = _any_of(combinations(terms, size))
            if len(conn.execute(SEED_ROWS, (seed, limit)).fetchall()) >= limit:
                return seed, size
    return _any_of(combinations(terms, 2)), 2


def reaching_sets(terms: tuple[str, ...], bounds: dict[str, float], floor: float) -> list[tuple[str, ...]]:
    """The smallest sets of terms whose bounds add up to floor or more (none a superset of another).

    A row holds some set of the query terms and scores less than that set's bounds summed, so a row
    whose terms contain none of these sets scores below floor.
    """
    found: list[tuple[str, ...]] = []
    for size in range(1, len(terms) + 1):
        for chosen in combinations(terms, size):
            if sum(bounds[t] for t in chosen) >= floor and not any(set(f) <= set(chosen) for f in found):
                found.append(chosen)
    return found


def bound(rows: int, held: int) -> float:
    """More than any one phrase held by `held` of `rows` rows adds to a row's BM25 score (with margin)."""
    idf = math.log((rows - held + 0.5) / (held + 0.5))
    return (BM25_K1 + 1.0) * (idf if idf > 0 else IDF_FLOOR) * (1.0 + BOUND_MARGIN)
