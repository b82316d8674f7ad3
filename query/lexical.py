"""The lexical tier: free text to a safe FTS5 expression, and BM25 over the porter table.

User text reaches FTS5 only through query/terms.py's build_query, so no query text can carry FTS5
syntax.

Chinese, Japanese and Korean runs in the query are also looked up in the trigram table over the
chunks' CJK runs (the trigrams of runs of three or more characters, OR-ed and ranked by BM25;
shorter runs by substring over the CJK column) and fused with the porter ranking by reciprocal rank fusion. A
query without CJK characters takes exactly the porter path.
"""

from __future__ import annotations

from pipeline import schema
from pipeline.db import Connection
from query.common_top import common_top_k
from query.filters import Allowed
from query.frequency import without_common
from query.fusion import rrf
from query.shaping import shaped_top_k
from query.terms import TRIGRAM, LexicalQuery, quote, trigrams
from query.topk import exact_top_k

FANOUT = 50
HEADING_WEIGHT = 2.0
WEIGHTS = f"1.0, {HEADING_WEIGHT}"  # bm25()'s column weights: body, heading_path
COLUMN_WEIGHTS = (1.0, HEADING_WEIGHT)
# Whether a shaped answer the bound could not prove (query/shaping.py) is served: the best of the
# re-scored candidates, every score exact, measured against the full query in bench/RESULTS.md.
UNPROVEN_SHAPED = True


def search_ids(conn: Connection, query: LexicalQuery, limit: int = FANOUT,
               allowed: Allowed | None = None) -> list[tuple[int, float]]:
    """(chunk id, score) best first, lower scores better: bm25, or negated RRF when CJK runs are fused.

    allowed (query/filters.py) restricts the candidates to the filter's chunks before they are scored: a
    rowid range FTS5 seeks in, and the allowed documents when the range holds others too.
    """
    if allowed is not None and allowed.empty:
        return []
    porter = _porter_ids(conn, query, limit, allowed)
    if not query.cjk:
        return porter
    rankings = [[cid for cid, _ in porter], *cjk_rankings(conn, query.cjk, limit, allowed)]
    return fuse(rankings, limit)


def _porter_ids(conn: Connection, query: LexicalQuery, limit: int,
                allowed: Allowed | None = None) -> list[tuple[int, float]]:
    if not query.expression:
        return []
    if allowed is None:  # a filter keeps every term: a rare term alone may not fill limit allowed rows
        listed = common_top_k(conn, query, limit, COLUMN_WEIGHTS)  # words most rows hold: their best rows, kept
        if listed is not None and listed.exact:
            return listed.rows
        pruned_query = without_common(conn, query, limit)
        scanned = _scanned(conn, pruned_query, limit, full=query)
        if scanned is not None:
            return scanned
        if listed is not None and UNPROVEN_SHAPED:
            return listed.rows
        shaped = shaped_top_k(conn, query, limit, COLUMN_WEIGHTS)
        if shaped is not None and (shaped.exact or UNPROVEN_SHAPED):
            return shaped.rows
        query = pruned_query
        pruned = exact_top_k(conn, query, limit, WEIGHTS)
        if pruned is not None:
            return pruned
    else:  # the columns keep the filter's span of ids, and in it the allowed documents' rows
        scanned = _scanned(conn, query, limit, allowed)
        if scanned is not None:
            return scanned
    only, args = _only(allowed)
    rows = conn.execute(
        f"SELECT rowid, bm25(chunks_fts, {WEIGHTS}) AS score FROM chunks_fts"
        f" WHERE chunks_fts MATCH ?{only} ORDER BY score, rowid LIMIT ?",
        (query.expression, *args, limit),
    ).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


def _scanned(conn: Connection, query: LexicalQuery, limit: int, allowed: Allowed | None = None,
             full: LexicalQuery | None = None) -> list[tuple[int, float]] | None:
    """The top limit from the posting columns (query/postings_scan.py), when the store keeps them and they serve
    the query (full: the query before its commonest words were left out, whose scores the answer has); None
    otherwise."""
    if not schema.meta_value(conn, schema.POSTINGS_STAMP_KEY):
        return None
    from query.postings_scan import postings_top_k  # numpy: only for a store that keeps columns

    scanned = postings_top_k(conn, query, limit, allowed, full)
    return None if scanned is None else scanned.rows


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
