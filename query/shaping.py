"""Frequency-aware query shaping: common terms only re-score the rows the rarer terms find, exactly.

An OR query's cost in FTS5 is the rows it scores, and a term held by a large share of the chunks
("not", "which" at 1M chunks: hundreds of thousands of rows) makes it score nearly all of them. So
a query whose terms split into *rare* ones (held by at most COMMON_SHARE of the rows) and *common*
ones runs in two steps:

1. the rare terms alone (with the query's exclusions) give their best M rows, by FTS5 (through
   query/topk.py's pruning when there are several);
2. those M rows are scored with the whole query outside FTS5 (query/rescoring.py: every phrase, in
   the expression's order, to the bit of what bm25() gives them).

The answer is exact, not estimated: a common phrase adds less than bound(t) = 2.2 * idf(t) to any
row (query/topk.py), so a row outside the M scores less than r_M + sum(bound(common)), where r_M
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
from pipeline.db import Connection
from pipeline.impacts import TableStats, table_stats
from query.frequency import frequencies
from query.rescoring import idf, row_counts, score
from query.terms import LexicalQuery
from query.topk import bound, pruned_top_k

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


def split(conn: Connection, query: LexicalQuery, share: float = COMMON_SHARE) -> Split | None:
    """The query's rare and common terms, or None when shaping cannot apply (no term of one kind, an unknown count)."""
    if len(query.terms) < 2:
        return None
    stats = table_stats(conn)
    _, found = frequencies(conn, query.terms)
    if stats is None or any(found.get(t) is None for t in query.terms):
        return None
    held = {t: int(found[t] or 0) for t in query.terms}
    common = tuple(t for t in query.terms if held[t] > stats.rows * share)
    rare = tuple(t for t in query.terms if t not in common)
    if not common or not rare:
        return None
    return Split(rare, common, stats, tuple(idf(stats.rows, held[t]) for t in query.phrases),
                 sum(bound(stats.rows, held[t]) for t in query.phrases if t in common), held)


@dataclass(frozen=True)
class Shaped:
    """The shaped plan's top rows (rowid, bm25) best first, and whether the bound proved them the full query's."""

    rows: list[tuple[int, float]]
    exact: bool


def shaped_top_k(conn: Connection, query: LexicalQuery, limit: int, weights: Sequence[float],
                 share: float = COMMON_SHARE, most: int = MAX_CANDIDATES) -> Shaped | None:
    """query's top limit by the shaped plan, or None when it does not apply (run the full query).

    Candidates grow from FIRST_CANDIDATES to at most `most`; when the bound still does not prove the
    answer, it is the best of the rows re-scored (exact False).
    """
    with db.read_snapshot(conn):
        parts = split(conn, query, share)
        if parts is None or sum(parts.held[t] for t in parts.common) < SHAPE_ABOVE:
            return None
        return _shaped(conn, query, parts, limit, weights, most)


def _shaped(conn: Connection, query: LexicalQuery, parts: Split, limit: int,
            weights: Sequence[float], most: int) -> Shaped | None:
    rare = query.keeping(parts.rare)
    wanted = max(FIRST_CANDIDATES, 4 * limit)
    while True:
        candidates = rare_top(conn, rare, wanted, weights)
        scored = rescored(conn, query, parts, [cid for cid, _ in candidates], weights)[:limit]
        outside = -candidates[-1][1] if len(candidates) == wanted else 0.0
        if len(scored) == limit and -scored[-1][1] >= outside + parts.ceiling:
            return Shaped(scored, True)
        if len(candidates) < wanted or wanted >= most:
            return Shaped(scored, False) if len(scored) == limit else None
        wanted *= GROWTH


def rare_top(conn: Connection, rare: LexicalQuery, wanted: int, weights: Sequence[float]) -> list[tuple[int, float]]:
    """The rare terms' best `wanted` rows by their own bm25 (lower first)."""
    text = ", ".join(str(float(w)) for w in weights)
    pruned = pruned_top_k(conn, rare, wanted, text)
    if pruned is not None:
        return pruned
    rows = conn.execute(f"SELECT rowid, bm25(chunks_fts, {text}) AS s FROM chunks_fts WHERE chunks_fts MATCH ?"
                        " ORDER BY s, rowid LIMIT ?", (rare.expression, wanted)).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


def rescored(conn: Connection, query: LexicalQuery, parts: Split, ids: list[int],
             weights: Sequence[float]) -> list[tuple[int, float]]:
    """ids scored by the whole query's bm25, best first (ties to the smaller rowid)."""
    counts = row_counts(conn, query.phrases, ids, weights)
    found = [(cid, score(parts.stats, parts.idfs, c)) for cid, c in counts.items()]
    return sorted(found, key=lambda item: (item[1], item[0]))
