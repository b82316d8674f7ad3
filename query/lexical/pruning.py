"""The exact BM25 top k of an OR query, scoring only the rows that can reach it.

FTS5 computes bm25() for every row an OR query matches before ORDER BY ... LIMIT keeps k of them,
and that scoring is most of a query's cost: a few common words match tens of thousands of chunks.
But BM25 is a sum over the query's phrases, and one phrase adds less than (k1 + 1) * idf to any
row, whatever its frequency or length (pipeline/bm25.py's Bm25.bound). So a row holding the query
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

Document frequencies and the row count come from query/lexical/frequency.py's per-connection cache (the
numbers FTS5 itself uses: the porter vocabulary's document counts, the chunk count).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import combinations

from pipeline import db
from pipeline.bm25 import BM25
from pipeline.db import Connection
from query.lexical.frequency import frequencies
from query.lexical.plan import Answer, Plan, Request
from query.lexical.stats import LexicalStats
from query.terms import LexicalQuery, quote

MAX_TERMS = 8  # the seed expression has one AND pair per two terms: at most 28 pairs
SEED_FRACTION = 0.025  # a term held by at most this share of the rows is scored whole, in the seed
FULL_BELOW = 2000  # queries matching at most this many rows in all are cheap: no pruning


SEED_ROWS = "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT ?"
SEED_ROWS_MAX = 4096  # a seed of pairs expected above this many rows gives way to rows holding more terms


def score_sql(weights: str) -> str:
    """The full query's rows, bm25 with weights, best k first; `?2` restricts them when given."""
    return (f"SELECT rowid, bm25(chunks_fts, {weights}) AS score FROM chunks_fts WHERE chunks_fts MATCH ?1"
            " AND +rowid IN (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?2) ORDER BY score, rowid LIMIT ?3")


class Pruning:
    """The top-k strategy of a query over many rows: only the rows that can reach the top k are scored, by FTS5."""

    name = "pruned"

    def plan(self, request: Request) -> Plan | None:
        """A plan for 2..MAX_TERMS terms without a filter over more than FULL_BELOW rows, some not rare: about half
        FTS5's full cost (it scores the seed and the reaching rows)."""
        query = request.scored
        if request.allowed is not None or not 2 <= len(query.terms) <= MAX_TERMS:
            return None
        rows, found = frequencies(request.conn, query.terms, request.stats)
        if not rows or any(found.get(t) is None for t in query.terms):
            return None
        held = sum(int(found[t] or 0) for t in query.terms)
        return None if held <= FULL_BELOW else Plan(self, 0.5 * held, query is request.query)

    def run(self, request: Request, plan: Plan) -> Answer | None:
        found = exact_top_k(request.conn, request.scored, request.limit, BM25.sql_weights, request.stats)
        return None if found is None else Answer(found, plan.exact)


def exact_top_k(conn: Connection, query: LexicalQuery, limit: int, weights: str,
                stats: LexicalStats | None = None) -> list[tuple[int, float]] | None:
    """(rowid, bm25) of the exact top limit of query.expression, or None when pruning cannot help.

    None asks the caller to run the full query: one term, more than MAX_TERMS, an unknown
    frequency, few rows in all, no term held by many rows, or a seed of fewer than limit rows.
    The counts and both scoring statements are read in one read transaction (one snapshot), so a
    write landing meanwhile cannot make a bound disagree with the IDFs bm25() uses.
    """
    if not 2 <= len(query.terms) <= MAX_TERMS:
        return None
    with db.read_snapshot(conn):
        return pruned_top_k(conn, query, limit, weights, stats)


def pruned_top_k(conn: Connection, query: LexicalQuery, limit: int, weights: str,
                 stats: LexicalStats | None = None) -> list[tuple[int, float]] | None:
    """exact_top_k inside the caller's read transaction (None: run the full query)."""
    if not 2 <= len(query.terms) <= MAX_TERMS:
        return None
    terms = query.terms
    rows, found = frequencies(conn, terms, stats)
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
    bounds = {t: BM25.bound(rows, held[t]) * query.repeat(t) for t in terms}  # a repeated term is that many phrases
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
