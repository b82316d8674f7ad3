"""The lexical tier: free text to a safe FTS5 expression, and BM25 over the porter table.

User text reaches FTS5 only through query/terms.py's build_query, so no query text can carry FTS5
syntax.

Chinese, Japanese and Korean runs in the query are also looked up in the trigram table over the
chunks' CJK runs (the trigrams of runs of three or more characters, OR-ed and ranked by BM25;
shorter runs by substring over the CJK column) and fused with the porter ranking by reciprocal rank fusion. A
query without CJK characters takes exactly the porter path.
"""

from __future__ import annotations

from pipeline.bm25 import BM25
from pipeline.db import Connection
from query.filters import Allowed
from query.fusion import rrf
from query.lexical.impact_lists import ImpactLists
from query.lexical.plan import Answer, Chosen, Plan, Request, TopK
from query.lexical.pruning import Pruning
from query.lexical.shaping import Shaping
from query.lexical.stats import LexicalStats
from query.terms import TRIGRAM, LexicalQuery, quote, trigrams

FANOUT = 50
HEADING_WEIGHT = BM25.weights[1]
WEIGHTS = BM25.sql_weights  # bm25()'s column weights: body, heading_path
COLUMN_WEIGHTS = BM25.weights


class PlainFts5:
    """FTS5's own plan: every matching row scored by bm25(), the reference every other strategy equals."""

    name = "fts5"

    def plan(self, request: Request) -> Plan | None:
        """Always a plan, exact; its cost is the rows it scores, about a microsecond each."""
        from query.lexical.frequency import frequencies

        query = request.scored
        _, held = frequencies(request.conn, query.terms, request.stats)
        rows = sum(int(held.get(t) or 0) for t in query.terms) if held else 10**6  # unknown counts: last
        return Plan(self, float(rows), query is request.query)

    def run(self, request: Request, plan: Plan) -> Answer | None:
        """bm25() of every matching row; exact unless it ran the query without its commonest words."""
        only, args = _only(request.allowed)
        rows = request.conn.execute(
            f"SELECT rowid, {BM25.sql()} AS score FROM chunks_fts"
            f" WHERE chunks_fts MATCH ?{only} ORDER BY score, rowid LIMIT ?",
            (request.scored.expression, *args, request.limit),
        ).fetchall()
        return Answer([(int(r[0]), float(r[1])) for r in rows], plan.exact)


class _Columns:
    """The posting columns' strategy, its numpy module loaded only for a store that keeps columns."""

    name = "posting columns"

    def plan(self, request: Request) -> Plan | None:
        from pipeline import schema

        if not schema.meta_value(request.conn, schema.POSTINGS_STAMP_KEY):
            return None
        from query.lexical.posting_columns import PostingColumns

        return PostingColumns().plan(request)

    def run(self, request: Request, plan: Plan) -> Answer | None:
        return plan.run(request)  # the plan is PostingColumns'


# Every way to the top k, in the order a tie in cost is broken (query/rank/stages.py orders the stages alike).
STRATEGIES: tuple[TopK, ...] = (ImpactLists(), _Columns(), Shaping(), Pruning(), PlainFts5())


def plans(request: Request, strategies: tuple[TopK, ...] = STRATEGIES) -> list[Plan]:
    """The strategies' plans for request in the order they are tried: the exact ones cheapest first, then the
    inexact ones (planned only where the request permits them) cheapest first; ties in STRATEGIES' order."""
    found = [(not plan.exact, plan.cost, n, plan) for n, strategy in enumerate(strategies)
             if (plan := strategy.plan(request)) is not None]
    return [plan for *_, plan in sorted(found, key=lambda item: item[:3])]


def top_k(conn: Connection, query: LexicalQuery, limit: int = FANOUT, allowed: Allowed | None = None,
          stats: LexicalStats | None = None, unproven: bool = True) -> Chosen:
    """The porter table's top limit for query by the cheapest plan that answers (an inexact one only with
    unproven), with the plan's name and whether its answer is proven."""
    request = Request(conn, query, limit, allowed, stats if stats is not None else LexicalStats(), unproven)
    if not query.expression or (allowed is not None and allowed.empty):
        return Chosen([], "none", True)
    for plan in plans(request):
        answer = plan.run(request)
        if answer is not None:
            return Chosen(answer.rows, plan.name, answer.exact)
    raise AssertionError("FTS5's plan always answers")  # PlainFts5.run never declines


def search_ids(conn: Connection, query: LexicalQuery, limit: int = FANOUT,
               allowed: Allowed | None = None, stats: LexicalStats | None = None,
               unproven: bool = True) -> list[tuple[int, float]]:
    """(chunk id, score) best first, lower scores better: bm25, or negated RRF when CJK runs are fused."""
    return lexical_top(conn, query, limit, allowed, stats, unproven).rows


def lexical_top(conn: Connection, query: LexicalQuery, limit: int = FANOUT, allowed: Allowed | None = None,
                stats: LexicalStats | None = None, unproven: bool = True) -> Chosen:
    """search_ids' answer with the porter plan that gave it.

    allowed (query/filters.py) restricts the candidates to the filter's chunks before they are scored: a
    rowid range FTS5 seeks in, and the allowed documents when the range holds others too.
    """
    if allowed is not None and allowed.empty:
        return Chosen([], "none", True)
    porter = top_k(conn, query, limit, allowed, stats, unproven)
    if not query.cjk:
        return porter
    rankings = [[cid for cid, _ in porter.rows], *cjk_rankings(conn, query.cjk, limit, allowed)]
    return Chosen(fuse(rankings, limit), porter.strategy, porter.exact)


def _only(allowed: Allowed | None, column: str = "rowid") -> tuple[str, tuple[object, ...]]:
    """The filter's restriction of a candidate query (query/filters.py Allowed.rows), or nothing."""
    return ("", ()) if allowed is None else allowed.rows(column)


def cjk_rankings(conn: Connection, runs: tuple[str, ...] | list[str], limit: int = FANOUT,
                 allowed: Allowed | None = None) -> list[list[int]]:
    """Chunk ids ranked per kind of CJK run: one trigram BM25 list, then one list per short run."""
    rankings: list[list[int]] = []
    grams = trigrams(runs)
    only, args = _only(allowed)
    if grams:
        rows = conn.execute(
            f"SELECT rowid FROM chunks_fts_cjk WHERE chunks_fts_cjk MATCH ?{only}"
            " ORDER BY bm25(chunks_fts_cjk), rowid LIMIT ?",
            (" OR ".join(quote(g) for g in grams), *args, limit),
        ).fetchall()
        rankings.append([int(r[0]) for r in rows])
    for run in (r for r in runs if len(r) < TRIGRAM):
        rows = conn.execute(
            f"SELECT id FROM chunks WHERE cjk != '' AND instr(cjk, ?) > 0{_only(allowed, 'id')[0]}"
            " ORDER BY (length(cjk) - length(replace(cjk, ?, ''))) * 1.0 / length(cjk) DESC, id LIMIT ?",
            (run, *args, run, limit),
        ).fetchall()
        rankings.append([int(r[0]) for r in rows])
    return rankings


def fuse(rankings: list[list[int]], limit: int) -> list[tuple[int, float]]:
    """The first limit ids of the reciprocal rank fusion of rankings, scores negated (lower is better)."""
    return [(cid, -score) for cid, score in rrf(rankings)[:limit]]
