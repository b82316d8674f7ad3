"""The impact lists the writer keeps: each common term's best rows by its own BM25, for queries of common words.

A query made only of words most chunks hold ("not", "which was") gives FTS5 nothing to prune: it
scores every row holding one of them. So the writer keeps, for every porter term held by more than
COMMON_SHARE of the rows, its LIST_ROWS + 1 best rows by the term's own bm25 (the score a one-word
query gives them, which is also the term's share of any query's score: FTS5's BM25 is a sum over
phrases), and the last of them as the term's *floor*: no row outside the list gets more from the
term. query/common_top.py reads them.

The lists are stamped with the table's statistics when they were made (the row count and tokens
FTS5's averages record holds, the highest chunk id): while the stamp holds, a one-word query's
answer is the list itself, score for score. A run that changes (adds or removes) fewer than
REFRESH_SHARE of the rows leaves them; the readers then add the rows written since (chunk ids above
the stamp's) and re-score. A larger change, or a store whose lists were never made, refreshes them
at the run's end (workers/write.py), in one write transaction.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline import db, schema
from pipeline.bm25 import BM25
from pipeline.db import Connection

COMMON_SHARE = 0.2
LIST_ROWS = 1000
REFRESH_SHARE = 0.05
WEIGHTS = BM25.weights  # bm25()'s column weights the lists are scored with
IMPACTS = schema.IMPACTS
FLOORS = schema.IMPACT_FLOORS
STAMP_KEY = "impacts_stamp"
WEIGHTS_KEY = "impacts_weights"


@dataclass(frozen=True)
class TableStats:
    """The porter table's row count and tokens per row, as FTS5's bm25() reads them."""

    rows: int
    avgdl: float
    tokens: int


@dataclass(frozen=True)
class Stamp:
    """What the lists were made from: the row count, all rows' tokens, the highest chunk id."""

    rows: int
    tokens: int
    top: int

    def text(self) -> str:
        return f"{self.rows}:{self.tokens}:{self.top}"

    @staticmethod
    def parse(text: str | None) -> Stamp | None:
        parts = (text or "").split(":")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            return None
        return Stamp(int(parts[0]), int(parts[1]), int(parts[2]))


def varints(blob: bytes) -> list[int]:
    """The SQLite varints packed in blob (FTS5's averages and docsize records)."""
    values: list[int] = []
    i, n = 0, len(blob)
    while i < n:
        value = 0
        for step in range(9):
            byte = blob[i]
            i += 1
            if step == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        values.append(value)
    return values


def table_stats(conn: Connection) -> TableStats | None:
    """N and avgdl of chunks_fts from its averages record (None for an empty table)."""
    row = conn.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()
    if row is None:
        return None
    counts = varints(bytes(row[0]))
    if not counts or counts[0] <= 0:
        return None
    tokens = sum(counts[1:])
    return TableStats(counts[0], float(tokens) / float(counts[0]), tokens)


def current_stamp(conn: Connection) -> Stamp | None:
    """The stamp the table has now (None when it is empty)."""
    stats = table_stats(conn)
    if stats is None:
        return None
    top = conn.execute("SELECT max(id) FROM chunks").fetchone()[0]
    return Stamp(stats.rows, stats.tokens, int(top or 0))


def stale(conn: Connection) -> bool:
    """Whether the lists should be made again: never made, other weights, or REFRESH_SHARE of the rows changed."""
    made = Stamp.parse(schema.meta_value(conn, STAMP_KEY))
    now = current_stamp(conn)
    if now is None:
        return made is not None
    if made is None or schema.meta_value(conn, WEIGHTS_KEY) != _weights_text():
        return True
    added = int(conn.execute("SELECT count(*) FROM chunks WHERE id > ?", (made.top,)).fetchone()[0])
    removed = max(0, made.rows - (now.rows - added))
    return added + removed >= REFRESH_SHARE * max(now.rows, made.rows)


class Vocabulary:
    """The porter terms held by many rows and their row counts, read once for the run's end.

    FTS5's row vocabulary counts a term's rows by walking its doclist, so a read of it walks the whole
    index; the impact lists and the posting columns (pipeline/postings.py) both need the frequent terms,
    and the first read, of every term held by `floor` rows or more, serves both.
    """

    def __init__(self, conn: Connection, floor: int = 0) -> None:
        self.conn = conn
        self.floor = floor
        self._found: list[tuple[str, int]] | None = None
        self._least = 0

    def held_from(self, least: int) -> list[tuple[str, int]]:
        """(term, rows holding it) of every term held by `least` rows or more."""
        if self._found is None or least < self._least:
            self._least = min(least, self.floor) if self.floor else least
            self.conn.execute(schema.IMPACT_VOCAB_DDL)
            self._found = [(str(t), int(n)) for t, n in self.conn.execute(
                f"SELECT term, doc FROM {schema.IMPACT_VOCAB} WHERE doc >= ?", (self._least,))]
        return [(t, n) for t, n in self._found if n >= least]


def refresh(conn: Connection, force: bool = False, vocabulary: Vocabulary | None = None) -> bool:
    """Make the lists again when stale (or force), in the caller's write transaction; whether they were."""
    if not force and not stale(conn):
        return False
    conn.execute(f"DELETE FROM {IMPACTS}")
    conn.execute(f"DELETE FROM {FLOORS}")
    stamp = current_stamp(conn)
    if stamp is not None:
        for term, held in common_terms(vocabulary or Vocabulary(conn), stamp.rows):
            _list(conn, term, held)
    schema.write_meta(conn, {STAMP_KEY: stamp.text() if stamp else "", WEIGHTS_KEY: _weights_text()})
    return True


def common_terms(vocabulary: Vocabulary, rows: int) -> list[tuple[str, int]]:
    """(term, rows holding it) of every porter term above COMMON_SHARE whose quoted form matches itself."""
    found = vocabulary.held_from(int(rows * COMMON_SHARE) + 1)
    fixed = _fixed_points([t for t, _ in found])
    return [(t, n) for t, n in found if t in fixed]


def _fixed_points(terms: list[str]) -> set[str]:
    """The terms the porter tokenizer leaves as they are (a MATCH of the quoted term finds exactly its rows)."""
    scratch = db.memory_connection()
    try:
        for statement in schema.STEMMER_DDL:
            scratch.execute(statement)
        scratch.executemany("INSERT INTO scratch(rowid, w) VALUES (?, ?)", list(enumerate(terms)))
        tokens: dict[int, list[str]] = {}
        for doc, term in scratch.execute("SELECT doc, term FROM scratch_tokens ORDER BY doc, offset"):
            tokens.setdefault(int(doc), []).append(str(term))
        return {t for i, t in enumerate(terms) if tokens.get(i) == [t]}
    finally:
        scratch.close()


def _list(conn: Connection, term: str, held: int) -> None:
    """Store term's LIST_ROWS + 1 best rows by its own bm25 (higher is better) and its floor."""
    weights = ", ".join(str(w) for w in WEIGHTS)
    quoted = '"' + term.replace('"', '""') + '"'
    rows = conn.execute(f"SELECT rowid, bm25(chunks_fts, {weights}) AS s FROM chunks_fts WHERE chunks_fts MATCH ?"
                        " ORDER BY s, rowid LIMIT ?", (quoted, LIST_ROWS + 1)).fetchall()
    conn.executemany(f"INSERT INTO {IMPACTS}(term, rank, chunk_id, score) VALUES (?, ?, ?, ?)",
                     [(term, rank, int(r[0]), -float(r[1])) for rank, r in enumerate(rows)])
    floor = -float(rows[-1][1]) if len(rows) > LIST_ROWS else 0.0
    conn.execute(f"INSERT INTO {FLOORS}(term, held, floor) VALUES (?, ?, ?)", (term, held, floor))


def _weights_text() -> str:
    return ",".join(str(w) for w in WEIGHTS)
