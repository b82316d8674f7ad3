"""The posting columns the writer keeps: each frequent porter term's rows and weighted counts, as arrays.

FTS5 finds a term's rows fast (a count of 20,000 rows takes ~1 ms at a million chunks) but its bm25()
costs about a microsecond a row, so a keyword query over terms each held by a few percent of the
chunks spends tens of milliseconds scoring. So the writer keeps, for every term held by at least
POSTINGS_FROM rows, its rows as sorted ids (gaps, 16 bits where every gap fits) and each row's
column-weighted count of the term (body 1, heading 2, as query/lexical.py weighs them), plus every
row's token count. query/postings_scan.py scores them with numpy, to the bit
of what bm25() gives.

The words most rows hold have columns too: a query that leaves them out to find its rows
(query/frequency.py) still scores the rows it keeps with them, so its answer is the full query's.

The columns are stamped like the impact lists (rows, tokens, highest chunk id) and made again at the
end of a run that changed REFRESH_SHARE of the rows (workers/write.py). Between two makings a reader
adds the rows written since (ids above the stamp's: chunk ids are never reused, pipeline/store.py)
through FTS5 and leaves out the rows deleted since, which the chunks_gone trigger lists (schema.py).
A store of fewer than MIN_ROWS rows keeps none: FTS5 alone is as fast there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pipeline import schema
from pipeline.bm25 import BM25
from pipeline.db import Connection
from pipeline.impacts import REFRESH_SHARE, Stamp, Vocabulary, current_stamp, varints

POSTINGS_FROM = 1024
MIN_ROWS = 20_000
WEIGHTS = tuple(int(w) for w in BM25.weights)  # the body's and the heading's weight, as integers
STAMP_KEY = schema.POSTINGS_STAMP_KEY
WEIGHTS_KEY = schema.POSTINGS_WEIGHTS_KEY
POSTINGS_TOP = schema.POSTINGS_TOP_KEY  # the chunks_gone trigger lists the deleted rows up to this id
WIDE_GAPS = 1  # `wide` bits: the gaps are 32-bit, the counts 16-bit
WIDE_COUNTS = 2

Ids = npt.NDArray[np.int64]
Counts = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Column:
    """One term's rows (ascending chunk ids) and its weighted count in each, as the columns were made."""

    held: int
    ids: Ids
    counts: Counts


def stamp_of(conn: Connection) -> Stamp | None:
    """The stamp of the columns the store holds (None: none made, or made for other weights)."""
    if schema.meta_value(conn, WEIGHTS_KEY) != _weights_text():
        return None
    return Stamp.parse(schema.meta_value(conn, STAMP_KEY))


def stale(conn: Connection, min_rows: int | None = None) -> bool:
    """Whether the columns should be made again: never made, other weights, or REFRESH_SHARE of the rows changed."""
    min_rows = MIN_ROWS if min_rows is None else min_rows
    now = current_stamp(conn)
    made = stamp_of(conn)
    if now is None or now.rows < min_rows:
        return made is not None or bool(schema.meta_value(conn, POSTINGS_TOP))
    if made is None:
        return True
    added = int(conn.execute("SELECT count(*) FROM chunks WHERE id > ?", (made.top,)).fetchone()[0])
    gone = int(conn.execute(f"SELECT count(*) FROM {schema.POSTINGS_GONE}").fetchone()[0])
    return added + gone >= REFRESH_SHARE * max(now.rows, made.rows)


def refresh(conn: Connection, force: bool = False, least: int | None = None, min_rows: int | None = None,
            vocabulary: Vocabulary | None = None) -> bool:
    """Make the columns again when stale (or force), in the caller's write transaction; whether they were.

    least and min_rows default to POSTINGS_FROM and MIN_ROWS, read when called; vocabulary is the run
    end's one read of the frequent terms (shared with the impact lists)."""
    least = POSTINGS_FROM if least is None else least
    min_rows = MIN_ROWS if min_rows is None else min_rows
    if not force and not stale(conn, min_rows):
        return False
    for table in (schema.POSTINGS, schema.POSTINGS_SIZES, schema.POSTINGS_GONE):
        conn.execute(f"DELETE FROM {table}")
    stamp = current_stamp(conn)
    if stamp is None or stamp.rows < min_rows:
        schema.write_meta(conn, {STAMP_KEY: "", WEIGHTS_KEY: "", POSTINGS_TOP: ""})
        return True
    conn.execute(schema.INSTANCE_VOCAB_DDL)
    for term, _ in (vocabulary or Vocabulary(conn)).held_from(least):
        _column(conn, term)
    conn.execute(f"INSERT INTO {schema.POSTINGS_SIZES}(id, top, tokens) VALUES (1, ?, ?)",
                 (stamp.top, _sizes(conn, stamp.top).tobytes()))
    schema.write_meta(conn, {STAMP_KEY: stamp.text(), WEIGHTS_KEY: _weights_text(), POSTINGS_TOP: str(stamp.top)})
    return True


def _column(conn: Connection, term: str) -> None:
    """Store one term's ids (as gaps) and weighted counts, from the porter table's instances of it."""
    docs, columns = conn.execute(
        f"SELECT group_concat(doc), group_concat(col = 'heading_path') FROM {schema.INSTANCE_VOCAB}"
        " WHERE term = ?", (term,)).fetchone()
    if not docs:
        return
    rows = np.fromstring(str(docs), dtype=np.int64, sep=",")
    weight = np.where(np.fromstring(str(columns), dtype=np.int64, sep=",") == 1, WEIGHTS[1], WEIGHTS[0])
    if len(rows) > 1 and bool(np.any(rows[1:] < rows[:-1])):  # instances come by row; never count on it
        order = np.argsort(rows, kind="stable")
        rows, weight = rows[order], weight[order]
    starts = np.flatnonzero(np.diff(rows, prepend=-1))
    ids = rows[starts]
    counts = np.add.reduceat(weight, starts)
    gaps = np.diff(ids, prepend=0)
    wide = (WIDE_GAPS if int(gaps.max()) > 0xFFFF else 0) | (WIDE_COUNTS if int(counts.max()) > 0xFF else 0)
    gap_type = np.uint32 if wide & WIDE_GAPS else np.uint16
    count_type = np.uint16 if wide & WIDE_COUNTS else np.uint8
    conn.execute(f"INSERT INTO {schema.POSTINGS}(term, held, wide, gaps, freqs) VALUES (?, ?, ?, ?, ?)",
                 (term, len(ids), wide, gaps.astype(gap_type).tobytes(), counts.astype(count_type).tobytes()))


def _sizes(conn: Connection, top: int) -> npt.NDArray[np.uint32]:
    """Every row's token count (all columns) by chunk id, 0 for ids that are no row, from FTS5's docsize table."""
    sizes = np.zeros(top + 1, dtype=np.uint32)
    for cid, blob in conn.execute("SELECT id, sz FROM chunks_fts_docsize WHERE id <= ?", (top,)):
        data = bytes(blob)
        sizes[int(cid)] = data[0] + data[1] if len(data) == 2 and data[0] < 0x80 and data[1] < 0x80 \
            else sum(varints(data))
    return sizes


def column(conn: Connection, term: str) -> Column | None:
    """A term's column as the writer made it (None: the term has none)."""
    row = conn.execute(f"SELECT held, wide, gaps, freqs FROM {schema.POSTINGS} WHERE term = ?", (term,)).fetchone()
    if row is None:
        return None
    wide = int(row[1])
    gaps = np.frombuffer(bytes(row[2]), dtype=np.uint32 if wide & WIDE_GAPS else np.uint16)
    counts = np.frombuffer(bytes(row[3]), dtype=np.uint16 if wide & WIDE_COUNTS else np.uint8)
    return Column(int(row[0]), np.cumsum(gaps, dtype=np.int64), counts.astype(np.float64))


def terms_with_columns(conn: Connection, terms: list[str]) -> set[str]:
    """Which of terms have a column."""
    marks = ",".join("?" * len(terms))
    return {str(r[0]) for r in conn.execute(f"SELECT term FROM {schema.POSTINGS} WHERE term IN ({marks})", terms)}


def sizes(conn: Connection) -> tuple[int, npt.NDArray[np.float64]] | None:
    """(the stamp's top id, every row's token count by id as floats), or None when no columns are made."""
    row = conn.execute(f"SELECT top, tokens FROM {schema.POSTINGS_SIZES} WHERE id = 1").fetchone()
    if row is None:
        return None
    return int(row[0]), np.frombuffer(bytes(row[1]), dtype=np.uint32).astype(np.float64)


def gone_beyond(conn: Connection, most: int) -> bool:
    """Whether more than `most` rows were deleted since the columns were made (reading at most most + 1)."""
    return bool(conn.execute(f"SELECT count(*) > ? FROM (SELECT 1 FROM {schema.POSTINGS_GONE} LIMIT ?)",
                             (most, most + 1)).fetchone()[0])


def gone(conn: Connection) -> Ids:
    """The ids of the rows deleted since the columns were made."""
    return np.array([int(r[0]) for r in conn.execute(f"SELECT id FROM {schema.POSTINGS_GONE}")], dtype=np.int64)


def _weights_text() -> str:
    return ",".join(str(w) for w in WEIGHTS)
