"""The lexical top k from the posting columns (pipeline/postings.py): bm25 of every matching row, with numpy.

FTS5's bm25() costs about a microsecond a row; a keyword query over terms each held by a few percent
of a million chunks scores tens of thousands of rows. Here every phrase of the OR expression adds its
part to an accumulator indexed by chunk id, in the expression's order, with the same double
operations as FTS5 (query/rescoring.py's formula), so each row's score is bm25()'s to the bit:

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

import os
import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pipeline import db, postings
from pipeline.db import Connection
from pipeline.impacts import current_stamp, table_stats
from query.frequency import frequencies
from query.rescoring import K1, B, idf
from query.shaping import Shaped
from query.terms import LexicalQuery, quote
from query.words import STEMMER

WEIGHTS = "1.0, 2.0"  # bm25()'s column weights: query/lexical.py's, as postings.WEIGHTS records them
EVERY_ROW = (0, 2**62)
FTS5_MOST = 4 * postings.POSTINGS_FROM  # a term without a column held by more rows: FTS5's plans are as cheap

_lock = threading.Lock()
_sizes: dict[tuple[str, int, int, str], npt.NDArray[np.float64]] = {}
_scratch = threading.local()


def postings_top_k(conn: Connection, query: LexicalQuery, limit: int,
                   span: tuple[int, int] = EVERY_ROW) -> Shaped | None:
    """query's exact top limit (rowid, bm25) from the posting columns, or None when they cannot serve it.

    span (low, high) keeps the rows of those chunk ids only (a filter's dense span, query/filters.py); the
    IDFs stay the whole table's, as FTS5's bm25() with a rowid range keeps them."""
    if query.excluded or not query.terms or limit < 1:
        return None
    with db.read_snapshot(conn):
        return _top(conn, query, limit, span)


@dataclass(frozen=True)
class _Plan:
    """What a query reads: each term's column (None: FTS5 scores its phrase), its rows now, the sizes and the gone."""

    columns: dict[str, postings.Column | None]  # by term
    held: dict[str, int]
    top: int
    tokens: npt.NDArray[np.float64]
    gone: npt.NDArray[np.int64]
    unchanged: bool
    span: tuple[int, int]


def _top(conn: Connection, query: LexicalQuery, limit: int, span: tuple[int, int]) -> Shaped | None:
    stats = table_stats(conn)
    plan = _plan(conn, query, span) if stats is not None else None
    if plan is None or stats is None:
        return None
    only = plan.columns[query.terms[0]] if len(query.terms) == 1 else None
    if only is not None:  # one term: its parts are the scores, no accumulator to gather them in
        found = _single(only, idf(stats.rows, plan.held[query.terms[0]]), plan, stats.avgdl,
                        query.repeat(query.terms[0]), limit)
    else:
        found = _accumulated(conn, query, plan, stats.rows, stats.avgdl, limit)
    if not plan.unchanged:
        found += [(int(r[0]), float(r[1])) for r in conn.execute(
            f"SELECT rowid, bm25(chunks_fts, {WEIGHTS}) AS s FROM chunks_fts WHERE chunks_fts MATCH ?"
            " AND rowid BETWEEN ? AND ? ORDER BY s, rowid LIMIT ?",
            (query.expression, max(plan.top + 1, span[0]), span[1], limit))]
    found.sort(key=lambda item: (item[1], item[0]))
    return Shaped(found[:limit], True)


def _single(column: postings.Column, weight: float, plan: _Plan, avgdl: float, repeat: int,
            limit: int) -> list[tuple[int, float]]:
    """The best limit rows of a one-term query: its phrase's parts (added up `repeat` times, as FTS5 adds them)."""
    part = _parts(weight, column.counts, plan.tokens[column.ids], avgdl)
    scores = np.zeros(len(part), dtype=np.float64)
    for _ in range(repeat):
        scores += part
    ids = column.ids
    if len(plan.gone):
        scores[np.isin(ids, plan.gone, assume_unique=True)] = 0.0
    return _best(ids, scores, limit)


def _accumulated(conn: Connection, query: LexicalQuery, plan: _Plan, rows: int, avgdl: float,
                 limit: int) -> list[tuple[int, float]]:
    """The best limit rows of the columns' and FTS5's parts, added up per row in the expression's order."""
    acc = _accumulator(plan.top)
    touched: list[npt.NDArray[np.int64]] = []
    try:
        for term in query.terms:
            weight = idf(rows, plan.held[term])
            column = plan.columns[term]
            if column is not None:
                ids, part = column.ids, _parts(weight, column.counts, plan.tokens[column.ids], avgdl)
            else:
                ids, part = _fts5_part(conn, term, plan.span[0], min(plan.top, plan.span[1]))
            for _ in range(query.repeat(term)):
                acc[ids] += part
            touched.append(ids)
        if len(plan.gone):
            acc[plan.gone[plan.gone <= plan.top]] = 0.0
        every = np.concatenate(touched)
        return _best(every, acc[every], limit, len(touched))
    finally:
        for ids in touched:
            acc[ids] = 0.0


def _plan(conn: Connection, query: LexicalQuery, span: tuple[int, int]) -> _Plan | None:
    """The query's plan over the columns, or None when they cannot serve it."""
    made = postings.stamp_of(conn)
    stems = STEMMER.stems(query.terms)
    if made is None or any(not stems[t] or " " in stems[t] for t in query.terms):
        return None
    read = {stem: postings.column(conn, stem) for stem in dict.fromkeys(stems[t] for t in query.terms)}
    if not any(read.values()):
        return None  # no term is held by many rows: FTS5 alone is as fast
    columns = {t: read[stems[t]] for t in query.terms}
    loose = tuple(t for t in query.terms if columns[t] is None)
    _, counted = frequencies(conn, loose)
    if any(counted.get(t) is None or int(counted[t] or 0) > FTS5_MOST for t in loose):
        return None
    sizes = _sizes_of(conn, made.text())
    if sizes is None:
        return None
    top, tokens = sizes
    unchanged = made == current_stamp(conn)
    gone = np.empty(0, dtype=np.int64) if unchanged else postings.gone(conn)
    held = {t: int(counted[t] or 0) for t in loose}
    for term, column in columns.items():
        if column is not None:
            held[term] = column.held if unchanged else _held_now(conn, term, column, gone, top)
    if span != EVERY_ROW:
        columns = {t: None if c is None else _within(c, span) for t, c in columns.items()}
    return _Plan(columns, held, top, tokens, gone, unchanged, span)


def _within(column: postings.Column, span: tuple[int, int]) -> postings.Column:
    """The column's rows with ids in span (views: the ids are sorted)."""
    low, high = np.searchsorted(column.ids, span[0]), np.searchsorted(column.ids, span[1], side="right")
    return postings.Column(column.held, column.ids[low:high], column.counts[low:high])


def _parts(weight: float, counts: npt.NDArray[np.float64], tokens: npt.NDArray[np.float64],
           avgdl: float) -> npt.NDArray[np.float64]:
    """One phrase's part of each row's score, as FTS5 computes it (query/rescoring.score, element by element)."""
    return weight * ((counts * (K1 + 1.0)) / (counts + K1 * (1 - B + B * tokens / avgdl)))


def _fts5_part(conn: Connection, term: str, low: int,
               high: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """A term without a column: its rows low..high and the phrase's part of their scores, by FTS5 itself."""
    rows = conn.execute(f"SELECT rowid, bm25(chunks_fts, {WEIGHTS}) FROM chunks_fts WHERE chunks_fts MATCH ?"
                        " AND rowid BETWEEN ? AND ?", (quote(term), low, high)).fetchall()
    ids = np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))
    return ids, -np.fromiter((float(r[1]) for r in rows), dtype=np.float64, count=len(rows))


def _held_now(conn: Connection, term: str, column: postings.Column, gone: npt.NDArray[np.int64], top: int) -> int:
    """The rows holding term now: the column's rows not deleted since, and the rows written since that hold it."""
    lost = int(np.isin(column.ids, gone, assume_unique=True).sum()) if len(gone) else 0
    added = int(conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid > ?",
                             (quote(term), top)).fetchone()[0])
    return column.held - lost + added


def _best(touched: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], limit: int,
          sources: int = 1) -> list[tuple[int, float]]:
    """The best limit (rowid, bm25) of the touched rows (each listed at most `sources` times, with its score),
    ordered by (bm25, rowid); every row tied with the last one kept is weighed."""
    wanted = limit * sources  # a row is touched at most once a source: so many entries hold limit rows
    if len(scores) > wanted:
        line = np.partition(scores, len(scores) - wanted)[len(scores) - wanted]
        keep = scores >= line
        touched, scores = touched[keep], scores[keep]
    keep = scores > 0.0
    ids, first = np.unique(touched[keep], return_index=True)
    values = scores[keep][first]
    order = np.lexsort((ids, -values))[:limit]
    return [(int(ids[i]), -1.0 * float(values[i])) for i in order]


def _accumulator(top: int) -> npt.NDArray[np.float64]:
    """This thread's zeroed score array for ids 0..top (kept between queries, zeroed again after each)."""
    acc: npt.NDArray[np.float64] | None = getattr(_scratch, "acc", None)
    if acc is None or len(acc) <= top:
        acc = np.zeros(top + 1, dtype=np.float64)
        _scratch.acc = acc
    return acc


def _sizes_of(conn: Connection, stamp: str) -> tuple[int, npt.NDArray[np.float64]] | None:
    """The columns' row sizes, kept per store file and stamp in the process (a Reader per request reads them once)."""
    db_path = str(conn.execute("PRAGMA database_list").fetchone()[2])
    try:
        info = os.stat(db_path)
    except OSError:
        return None
    key = (db_path, info.st_dev, info.st_ino, stamp)
    with _lock:
        kept = _sizes.get(key)
    if kept is not None:
        return len(kept) - 1, kept
    found = postings.sizes(conn)
    if found is None:
        return None
    with _lock:
        _sizes.clear()  # one store's sizes at a time: a process serves one store
        _sizes[key] = found[1]
    return found
