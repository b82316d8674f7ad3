"""Frequency-aware query shaping: common terms only re-score the rows the rarer terms find, exactly.

An OR query's cost in FTS5 is the rows it scores, and a term held by a large share of the chunks
("not", "which" at 1M chunks: hundreds of thousands of rows) makes it score nearly all of them. So
a query whose terms split into *rare* ones (held by at most COMMON_SHARE of the rows) and *common*
ones runs in two steps:

1. the rare terms alone (with the query's exclusions) give their best M rows, by FTS5 (through
   query/lexical/pruning.py's pruning when there are several);
2. those M rows are scored with the whole query outside FTS5 (query/lexical/rescoring.py: every phrase, in
   the expression's order, to the bit of what bm25() gives them).

The answer is exact, not estimated: a common phrase adds less than bound(t) = 2.2 * idf(t) to any
row (query/lexical/pruning.py), so a row outside the M scores less than r_M + sum(bound(common)), where r_M
is the M-th rare score (0 when the rare terms hold fewer than M rows: a row outside then holds
only common terms). When the k-th best re-scored row reaches that, no row outside can enter the top
k; otherwise M grows (x4, up to MAX_CANDIDATES) and, failing that, the caller runs the full query.
The statistics and both reads come from one read transaction, so a commit between them cannot make
the scores disagree with the IDFs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline import db
from pipeline.bm25 import BM25
from pipeline.db import Connection
from pipeline.impacts import TableStats, table_stats
from query.lexical.frequency import frequencies
from query.lexical.plan import Answer, Plan, Request
from query.lexical.pruning import pruned_top_k
from query.lexical.rescoring import row_counts
from query.lexical.stats import LexicalStats
from query.terms import LexicalQuery

COMMON_SHARE = 0.2  # a term held by more than this share of the rows only re-scores
FIRST_CANDIDATES = 100  # M of the first try, at least 4 * limit
MAX_CANDIDATES = 400  # past this many re-scored rows the full query is cheaper
GROWTH = 4
SHAPE_ABOVE = 50_000  # the common terms' rows in all below which FTS5's own pruning is as cheap


@dataclass(frozen=True)
class Split:
    """A query's terms parted by document frequency, with the numbers the bound and the scores need."""

    rare: tuple[str, ...]
    common: tuple[str, ...]
    stats: TableStats
    idfs: tuple[float, ...]  # per phrase of the expression, in its order (a repeated word's as often as written)
    ceiling: float  # more than the common terms' phrases together add to any row's score
    held: dict[str, int]  # the rows holding each term


def split(conn: Connection, query: LexicalQuery, share: float = COMMON_SHARE,
          stats: LexicalStats | None = None) -> Split | None:
    """The query's rare and common terms, or None when shaping cannot apply (no term of one kind, an unknown count)."""
    if len(query.terms) < 2:
        return None
    table = table_stats(conn)
    _, found = frequencies(conn, query.terms, stats)
    if table is None or any(found.get(t) is None for t in query.terms):
        return None
    held = {t: int(found[t] or 0) for t in query.terms}
    common = tuple(t for t in query.terms if held[t] > table.rows * share)
    rare = tuple(t for t in query.terms if t not in common)
    if not common or not rare:
        return None
    return Split(rare, common, table, tuple(BM25.idf(table.rows, held[t]) for t in query.phrases),
                 sum(BM25.bound(table.rows, held[t]) for t in query.phrases if t in common), held)


class Shaping:
    """The top-k strategy of queries mixing common and rarer words: the rarer words' rows re-scored whole."""

    name = "shaped"

    def plan(self, request: Request) -> Plan | None:
        """A plan for a query of both kinds of terms with many common rows, exact: an answer its bound does not prove
        is served (flagged unproven) only where the request permits; about 20 us a re-scored row plus the rarer
        terms' rows."""
        if request.allowed is not None:
            return None
        parts = split(request.conn, request.query, COMMON_SHARE, request.stats)
        if parts is None or sum(parts.held[t] for t in parts.common) < SHAPE_ABOVE:
            return None
        rare_rows = sum(parts.held[t] for t in parts.rare)
        return Plan(self, 20.0 * max(FIRST_CANDIDATES, 4 * request.limit) + rare_rows, True)

    def run(self, request: Request, plan: Plan) -> Answer | None:
        found = shaped_top_k(request.conn, request.query, request.limit, BM25.weights, stats=request.stats)
        return found if found is None or found.exact or request.unproven else None


def shaped_top_k(conn: Connection, query: LexicalQuery, limit: int, weights: Sequence[float],
                 share: float = COMMON_SHARE, most: int = MAX_CANDIDATES,
                 stats: LexicalStats | None = None) -> Answer | None:
    """query's top limit by the shaped plan, or None when it does not apply (run the full query).

    Candidates grow from FIRST_CANDIDATES to at most `most`; when the bound still does not prove the
    answer, it is the best of the rows re-scored (exact False).
    """
    kept = stats or LexicalStats()
    with db.read_snapshot(conn):
        parts = split(conn, query, share, kept)
        if parts is None or sum(parts.held[t] for t in parts.common) < SHAPE_ABOVE:
            return None
        return _shaped(conn, query, parts, limit, weights, most, kept)


def _shaped(conn: Connection, query: LexicalQuery, parts: Split, limit: int,
            weights: Sequence[float], most: int, stats: LexicalStats) -> Answer | None:
    rare = query.keeping(parts.rare)
    wanted = max(FIRST_CANDIDATES, 4 * limit)
    while True:
        candidates = rare_top(conn, rare, wanted, weights, stats)
        scored = rescored(conn, query, parts, [cid for cid, _ in candidates], weights, stats)[:limit]
        outside = -candidates[-1][1] if len(candidates) == wanted else 0.0
        if len(scored) == limit and -scored[-1][1] >= outside + parts.ceiling:
            return Answer(scored, True)
        if len(candidates) < wanted or wanted >= most:
            return Answer(scored, False) if len(scored) == limit else None
        wanted *= GROWTH


def rare_top(conn: Connection, rare: LexicalQuery, wanted: int, weights: Sequence[float],
             stats: LexicalStats | None = None) -> list[tuple[int, float]]:
    """The rare terms' best `wanted` rows by their own bm25 (lower first)."""
    text = ", ".join(str(float(w)) for w in weights)
    pruned = pruned_top_k(conn, rare, wanted, text, stats)
    if pruned is not None:
        return pruned
    rows = conn.execute(f"SELECT rowid, bm25(chunks_fts, {text}) AS s FROM chunks_fts WHERE chunks_fts MATCH ?"
                        " ORDER BY s, rowid LIMIT ?", (rare.expression, wanted)).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


def rescored(conn: Connection, query: LexicalQuery, parts: Split, ids: list[int],
             weights: Sequence[float], stats: LexicalStats | None = None) -> list[tuple[int, float]]:
    """ids scored by the whole query's bm25, best first (ties to the smaller rowid)."""
    counts = row_counts(conn, query.phrases, ids, weights, stats)
    found = [(cid, BM25.score(parts.idfs, c.freq, c.tokens, parts.stats.avgdl)) for cid, c in counts.items()]
    return sorted(found, key=lambda item: (item[1], item[0]))
