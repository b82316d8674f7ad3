"""The lexical top k from the posting columns (pipeline/postings.py): bm25 of every matching row, with numpy.

FTS5's bm25() costs about a microsecond a row; a keyword query over terms each held by a few percent
of a million chunks scores tens of thousands of rows. Here every phrase of the OR expression adds its
part to an accumulator indexed by chunk id, in the expression's order, with the same double
operations as FTS5 (pipeline/bm25.py's part), so each row's score is bm25()'s to the bit:

- a term with a column: its ids, weighted counts and the rows' token counts give its part at once;
- a term without one (held by fewer than POSTINGS_FROM rows when the columns were made): FTS5 scores
  that phrase alone over the rows the columns know (its bm25 is exactly the phrase's part);
- rows written since the columns were made (ids above their stamp) are scored by FTS5 with the
  whole expression, and rows deleted since (the gone table) are left out; each term's row count,
  and so its IDF, is the current one.

The best `limit` rows come out ordered by (score, rowid), as `ORDER BY bm25, rowid` orders them. A
query the columns cannot serve (no term with a column, an excluded word, a term held by a large share
of the rows without a column) returns None and FTS5's plans answer it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pipeline import db, postings, schema
from pipeline.bm25 import BM25
from pipeline.db import Connection, OperationalError
from pipeline.impacts import REFRESH_SHARE, Stamp, current_stamp, table_stats
from query.filters import Allowed
from query.lexical.frequency import frequencies
from query.lexical.plan import Answer, Plan, Request
from query.lexical.stats import LexicalStats, StoreKey
from query.terms import LexicalQuery, quote
from query.words import STEMMER

EVERY_ROW = (0, 2**62)
MAX_SCANNED = 1_000_000  # the column rows a query may score; past it FTS5's and the impact lists' plans serve
FTS5_MOST = 4 * postings.POSTINGS_FROM  # a term without a column held by more rows: FTS5's plans are as cheap


class PostingColumns:
    """The top-k strategy of keyword queries: every matching row scored from the posting columns with numpy."""

    name = "posting columns"

    def plan(self, request: Request) -> Plan | None:
        """A plan while the store keeps columns: exact; about 10 ns a column row and 1 us a row FTS5 scores for a term
        without one (its rows estimated by its document count)."""
        query = request.pruned
        if query.excluded or not query.terms or request.query.excluded or request.limit < 1:
            return None
        if not schema.meta_value(request.conn, schema.POSTINGS_STAMP_KEY):
            return None
        _, held = frequencies(request.conn, request.query.terms, request.stats)
        stems = STEMMER.stems(query.terms)
        try:
            kept = postings.terms_with_columns(request.conn, sorted({stems[t] for t in query.terms}))
        except OperationalError:
            return None
        rows = [(int(held.get(t) or 0), stems[t] in kept) for t in query.terms]
        if not any(has for _, has in rows):
            return None  # no term is held by many rows: FTS5 alone is as fast
        return Plan(self, 50.0 + sum(0.01 * n if has else float(n) for n, has in rows), True)

    def run(self, request: Request, plan: Plan) -> Answer | None:
        return postings_top_k(request.conn, request.pruned, request.limit, request.allowed, request.query,
                              request.stats)


def postings_top_k(conn: Connection, query: LexicalQuery, limit: int, allowed: Allowed | None = None,
                   full: LexicalQuery | None = None, stats: LexicalStats | None = None) -> Answer | None:
    """query's exact top limit (rowid, bm25) from the posting columns, or None when they cannot serve it.

    allowed (a filter's chunks, query/filters.py) keeps the rows of its span of ids, and of those only the
    allowed documents' when the span holds others too; the IDFs stay the whole table's, as FTS5's bm25()
    keeps them under a rowid constraint. With full (the query before query/lexical/frequency.py left out the
    words most rows hold), query finds the rows and full scores those that can be in its top limit: the
    answer is full's, each score its bm25()."""
    if query.excluded or not query.terms or limit < 1 or (full is not None and full.excluded):
        return None
    with db.read_snapshot(conn):
        try:
            return _top(conn, query, limit, allowed, full, stats or LexicalStats())
        except OperationalError:  # the columns' tables are missing: FTS5's plans answer (`knowledge check` says so)
            return None


@dataclass(frozen=True)
class _Reading:
    """What a query reads: each term's column (None: FTS5 scores its phrase), its rows now, the sizes and the gone."""

    columns: dict[str, postings.Column | None]  # by term
    held: dict[str, int]
    top: int
    tokens: npt.NDArray[np.float64]
    gone: npt.NDArray[np.int64]
    unchanged: bool
    span: tuple[int, int]
    mask: npt.NDArray[np.bool_] | None  # the allowed rows by id, for a filter whose span holds others too


def _top(conn: Connection, query: LexicalQuery, limit: int, allowed: Allowed | None,
         full: LexicalQuery | None, kept: LexicalStats) -> Answer | None:
    stats = table_stats(conn)
    dropped = tuple(t for t in full.terms if t not in query.terms) if full is not None else ()
    scorer = full if full is not None and dropped else query
    plan = _reading(conn, scorer, allowed, kept) if stats is not None else None
    if plan is None or stats is None:
        return None
    if sum(len(c.ids) for t in query.terms if (c := plan.columns[t]) is not None) > MAX_SCANNED:
        return None  # words most rows hold and nothing rarer: the impact lists answer them (impact_lists.py)
    weights = {t: BM25.idf(stats.rows, plan.held[t]) for t in scorer.terms}
    parts = {t: _term_parts(conn, t, plan, weights[t], stats.avgdl) for t in query.terms}
    # a dropped word adds less than idf * (k1 + 1) to any row: the rows so close to the last one kept are weighed
    slack = sum(weights[t] * (BM25.k1 + 1.0) * scorer.repeat(t) for t in dropped) * (1.0 + 1e-9)
    if len(query.terms) == 1:  # one term: its parts are the scores, no accumulator to gather them in
        found = _single(query, plan, parts[query.terms[0]], limit, slack)
    else:
        found = _accumulated(query, plan, parts, limit, slack, kept)
    if dropped:
        found = _rescored(conn, np.array([cid for cid, _ in found], dtype=np.int64), scorer, plan, parts, weights,
                          stats.avgdl)
    if not plan.unchanged:
        found += _written_since(conn, scorer, plan, allowed, limit)
    found.sort(key=lambda item: (item[1], item[0]))
    return Answer(found[:limit], True)


Parts = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]  # rows (ascending ids) and one phrase's part in each


def _single(query: LexicalQuery, plan: _Reading, parts: Parts, limit: int, slack: float) -> list[tuple[int, float]]:
    """The best limit rows of a one-term query: its part, once per time the query repeats it, is the score."""
    ids, part = parts
    scores = np.zeros(len(part), dtype=np.float64)
    for _ in range(query.repeat(query.terms[0])):
        scores += part
    if len(plan.gone):
        scores[np.isin(ids, plan.gone, assume_unique=True)] = 0.0
    return _best(ids, scores, limit, 1, slack)


def _written_since(conn: Connection, query: LexicalQuery, plan: _Reading, allowed: Allowed | None,
                   limit: int) -> list[tuple[int, float]]:
    """The best limit rows written since the columns were made (ids above their top), scored by FTS5."""
    only, args = allowed.rows() if allowed is not None else ("", ())
    return [(int(r[0]), float(r[1])) for r in conn.execute(
        f"SELECT rowid, {BM25.sql()} AS s FROM chunks_fts WHERE chunks_fts MATCH ?"
        f" AND rowid > ?{only} ORDER BY s, rowid LIMIT ?", (query.expression, plan.top, *args, limit))]


def _term_parts(conn: Connection, term: str, plan: _Reading, weight: float, avgdl: float) -> Parts:
    """A term's rows and its phrase's part of their scores: from its column, else from FTS5."""
    column = plan.columns[term]
    if column is None:
        ids, part = _fts5_part(conn, term, plan.span[0], min(plan.top, plan.span[1]))
        if plan.mask is None:
            return ids, part
        keep = plan.mask[ids]
        return ids[keep], part[keep]
    return column.ids, BM25.part(weight, column.counts, plan.tokens[column.ids], avgdl)


def _accumulated(query: LexicalQuery, plan: _Reading, parts: dict[str, Parts], limit: int,
                 slack: float, kept: LexicalStats) -> list[tuple[int, float]]:
    """The best limit rows of the terms' parts, added up per row in the expression's order."""
    acc = kept.accumulator(plan.top, _zeros)
    touched: list[npt.NDArray[np.int64]] = []
    try:
        for term in query.terms:
            ids, part = parts[term]
            for _ in range(query.repeat(term)):
                acc[ids] += part
            touched.append(ids)
        if len(plan.gone):
            acc[plan.gone[plan.gone <= plan.top]] = 0.0
        every = np.concatenate(touched)
        return _best(every, acc[every], limit, len(touched), slack)
    finally:
        for ids in touched:
            acc[ids] = 0.0
        kept.give_back(acc)


def _rescored(conn: Connection, rows: npt.NDArray[np.int64], query: LexicalQuery, plan: _Reading,
              parts: dict[str, Parts], weights: dict[str, float], avgdl: float) -> list[tuple[int, float]]:
    """rows scored by every phrase of the query, in its order: bm25() of the full expression, to the bit."""
    total = np.zeros(len(rows), dtype=np.float64)
    for term in query.terms:
        column = plan.columns[term]
        if term in parts or column is None:  # (a left-out word without a column: FTS5 scores its phrase)
            ids, part = parts[term] if term in parts else _term_parts(conn, term, plan, weights[term], avgdl)
            at = _part_at(ids, part, rows)
        else:  # a word most rows hold: its part at these rows only
            found = _positions(column.ids, rows)
            at = np.zeros(len(rows), dtype=np.float64)
            hit = found >= 0
            at[hit] = BM25.part(weights[term], column.counts[found[hit]], plan.tokens[rows[hit]], avgdl)
        for _ in range(query.repeat(term)):
            total += at
    return [(int(cid), -1.0 * float(value)) for cid, value in zip(rows, total, strict=True)]


def _positions(ids: npt.NDArray[np.int64], rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Where each of rows is in the sorted ids (-1: not there)."""
    at = np.searchsorted(ids, rows)
    inside = at < len(ids)
    found = np.full(len(rows), -1, dtype=np.int64)
    found[inside] = np.where(ids[at[inside]] == rows[inside], at[inside], -1)
    return found


def _part_at(ids: npt.NDArray[np.int64], part: npt.NDArray[np.float64],
             rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """A phrase's part at rows (0 where a row lacks it)."""
    found = _positions(ids, rows)
    at = np.zeros(len(rows), dtype=np.float64)
    at[found >= 0] = part[found[found >= 0]]
    return at


def _reading(conn: Connection, query: LexicalQuery, allowed: Allowed | None, kept: LexicalStats) -> _Reading | None:
    """What the query reads from the columns, or None when they cannot serve it."""
    found = _columns(conn, query, kept)
    if found is None:
        return None
    store, made, columns = found
    loose = tuple(t for t in query.terms if columns[t] is None)
    _, counted = frequencies(conn, loose, kept)
    if any(counted.get(t) is None or int(counted[t] or 0) > FTS5_MOST for t in loose):
        return None
    sizes = kept.sizes(store, lambda: postings.sizes(conn))
    if sizes is None:
        return None
    top, tokens = sizes
    since = _since(conn, made)
    if since is None:
        return None
    unchanged, gone = since
    held = {t: int(counted[t] or 0) for t in loose}
    for term, column in columns.items():
        if column is not None:
            held[term] = column.held if unchanged else _held_now(conn, term, column, gone, top)
    if allowed is None:
        return _Reading(columns, held, top, tokens, gone, unchanged, EVERY_ROW, None)
    span = (allowed.low, allowed.high)
    mask = None if allowed.dense else kept.mask(store, allowed.documents, lambda: _allowed_rows(conn, allowed, top))
    columns = {t: None if c is None else _within(c, span, mask) for t, c in columns.items()}
    return _Reading(columns, held, top, tokens, gone, unchanged, span, mask)


def _since(conn: Connection, made: Stamp) -> tuple[bool, npt.NDArray[np.int64]] | None:
    """Whether the table is as the columns were made, and the rows deleted since; None when so much changed
    since (a re-index under way) that the run's end makes them again."""
    now = current_stamp(conn)
    if made == now:
        return True, np.empty(0, dtype=np.int64)
    if now is not None and postings.gone_beyond(conn, int(REFRESH_SHARE * now.rows)):
        return None
    return False, postings.gone(conn)


def _columns(conn: Connection, query: LexicalQuery,
             kept: LexicalStats) -> tuple[StoreKey, Stamp, dict[str, postings.Column | None]] | None:
    """The store's key, the columns' stamp and each term's column (None: the term has none); None when the
    columns cannot serve the query (none made, a term without one stem, no term with a column)."""
    made = postings.stamp_of(conn)
    stems = STEMMER.stems(query.terms)
    if made is None or any(not stems[t] or " " in stems[t] for t in query.terms):
        return None
    store = kept.store_key(conn, made.text())  # what the values kept are valid for
    if store is None:
        return None
    read = {stem: kept.column(store, stem, lambda stem=stem: postings.column(conn, stem))  # type: ignore[misc]
            for stem in dict.fromkeys(stems[t] for t in query.terms)}
    if not any(read.values()):
        return None  # no term is held by many rows: FTS5 alone is as fast
    return store, made, {t: read[stems[t]] for t in query.terms}


def _within(column: postings.Column, span: tuple[int, int], mask: npt.NDArray[np.bool_] | None) -> postings.Column:
    """The column's rows with ids in span (views: the ids are sorted), and of those the mask's."""
    low, high = np.searchsorted(column.ids, span[0]), np.searchsorted(column.ids, span[1], side="right")
    ids, counts = column.ids[low:high], column.counts[low:high]
    if mask is not None:
        keep = mask[ids]
        ids, counts = ids[keep], counts[keep]
    return postings.Column(column.held, ids, counts)


def _allowed_rows(conn: Connection, allowed: Allowed, top: int) -> npt.NDArray[np.bool_]:
    """The filter's rows up to top as a mask by chunk id (kept per store, stamp and allowed documents: a chunk id up
    to the columns' top always belongs to the document it was given to, ids are never given twice)."""
    mask = np.zeros(top + 1, dtype=np.bool_)
    rows = conn.execute("SELECT id FROM chunks WHERE document_id IN (SELECT value FROM json_each(?))"
                        " AND id BETWEEN ? AND ?", (allowed.documents, allowed.low, min(allowed.high, top)))
    mask[np.fromiter((int(r[0]) for r in rows), dtype=np.int64)] = True
    return mask


def _fts5_part(conn: Connection, term: str, low: int,
               high: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """A term without a column: its rows low..high and the phrase's part of their scores, by FTS5 itself."""
    rows = conn.execute(f"SELECT rowid, {BM25.sql()} FROM chunks_fts WHERE chunks_fts MATCH ?"
                        " AND rowid BETWEEN ? AND ? ORDER BY rowid", (quote(term), low, high)).fetchall()
    ids = np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))
    return ids, -np.fromiter((float(r[1]) for r in rows), dtype=np.float64, count=len(rows))


def _held_now(conn: Connection, term: str, column: postings.Column, gone: npt.NDArray[np.int64], top: int) -> int:
    """The rows holding term now: the column's rows not deleted since, and the rows written since that hold it."""
    lost = int(np.isin(column.ids, gone, assume_unique=True).sum()) if len(gone) else 0
    added = int(conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid > ?",
                             (quote(term), top)).fetchone()[0])
    return column.held - lost + added


def _best(touched: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], limit: int, sources: int = 1,
          slack: float = 0.0) -> list[tuple[int, float]]:
    """The best limit (rowid, bm25) of the touched rows (each listed at most `sources` times, with its score),
    ordered by (bm25, rowid); with slack, also every row within slack of the last one (more than limit)."""
    wanted = limit * sources  # a row is touched at most once a source: so many entries hold limit rows
    if len(scores) > wanted:
        line = np.partition(scores, len(scores) - wanted)[len(scores) - wanted]
        keep = scores >= line - slack
        touched, scores = touched[keep], scores[keep]
    keep = scores > 0.0
    ids, first = np.unique(touched[keep], return_index=True)
    values = scores[keep][first]
    order = np.lexsort((ids, -values))
    close = slack > 0.0 and len(order) > limit
    order = order[values[order] >= values[order[limit - 1]] - slack] if close else order[:limit]
    return [(int(ids[i]), -1.0 * float(values[i])) for i in order]


def _zeros(size: int) -> npt.NDArray[np.float64]:
    return np.zeros(size, dtype=np.float64)
