"""Leave out query terms most chunks contain, which FTS5's BM25 scores as nothing anyway.

FTS5 computes a term's IDF as log((N - n + 0.5) / (n + 0.5)) and clamps it to 1e-6 when that is not
positive, i.e. when at least half of the N chunks contain the term. Such a term ("the", "of")
cannot move a chunk's score, but it makes FTS5 visit and score nearly every row of the index: a
query of running text at 100k chunks spends ~100 ms on it instead of ~1 ms. So, when a query also
has rarer terms, the common ones are dropped before the MATCH; when every term is common, all are
kept; and only when some rarer term alone fills the requested number of results, so the top
results are exactly those of the full query (a row with a rare term always outscores a row with
only common ones). Document frequencies come from a temp fts5vocab view of the porter table (one of
pipeline/schema.py's READER_TEMP_DDL, on every Reader's connection) and are cached per connection
until another connection commits; the common terms' counts, the costly ones, come from the impact
lists' record while it is current (one statement for all of them). The counts are kept in the
LexicalStats (query/lexical/stats.py) the caller passes, per connection.
"""

from __future__ import annotations

import contextlib

from pipeline import impacts, schema
from pipeline.db import Connection, OperationalError
from query.lexical.stats import LexicalStats
from query.terms import LexicalQuery
from query.words import STEMMER

COMMON_FRACTION = 0.5


def frequencies(conn: Connection, terms: tuple[str, ...],
                stats: LexicalStats | None = None) -> tuple[int, dict[str, int | None]]:
    """(chunk count, each term's porter-stem document frequency or None when unknown); (0, {}) without a view.

    Kept in stats per connection until another connection commits (without stats: for this call only)."""
    kept = stats if stats is not None else LexicalStats()
    try:
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        with kept.lock:  # only to find the connection's cache: a connection serves one request at a time,
            cache = kept.frequency_cache(conn)  # so its refill (SQL) holds no other reader up
        if cache.version != version:
            cache.version = version
            table = impacts.table_stats(conn)  # FTS5's own row count: one record, where count(*) reads every row
            cache.rows = table.rows if table is not None else 0
            cache.frequencies.clear()
            cache.frequencies.update(listed_counts(conn))
            cache.columns = columns_current(conn)
        stems = STEMMER.stems(terms)
        found: dict[str, int | None] = {}
        for term in terms:
            stem = stems[term]
            if not stem or " " in stem:
                found[term] = None
                continue
            if stem not in cache.frequencies:
                row = _column_count(conn, stem) if cache.columns else None
                if row is None:  # no column, or columns of an older state: FTS5's vocabulary walks the doclist
                    row = conn.execute(f"SELECT doc FROM {schema.PORTER_VOCAB} WHERE term = ?", (stem,)).fetchone()
                cache.frequencies[stem] = int(row[0]) if row else 0
            found[term] = cache.frequencies[stem]
        return cache.rows, found
    except OperationalError:  # no vocabulary view on this connection: keep every term
        return 0, {}


def listed_counts(conn: Connection) -> dict[str, int]:
    """The document counts the impact lists recorded (pipeline/impacts.py), while their stamp is the table's.

    These are the common terms, whose counts FTS5's vocabulary finds by walking their long doclists
    (tens of milliseconds each at a million chunks): a fresh Reader reads them here in one statement.
    """
    try:
        made = impacts.Stamp.parse(schema.meta_value(conn, impacts.STAMP_KEY))
        if made is None or made != impacts.current_stamp(conn):
            return {}
        return {str(t): int(n) for t, n in conn.execute(f"SELECT term, held FROM {impacts.FLOORS}")}
    except OperationalError:  # a store without the lists' tables
        return {}


def _column_count(conn: Connection, stem: str) -> tuple[int] | None:
    """The rows of stem's posting column, when it has one (None also when the columns' table is missing)."""
    try:
        row = conn.execute(f"SELECT held FROM {schema.POSTINGS} WHERE term = ?", (stem,)).fetchone()
    except OperationalError:
        return None
    return None if row is None else (int(row[0]),)


def columns_current(conn: Connection) -> bool:
    """Whether the posting columns (pipeline/postings.py) were made from the table as it is: their row counts are
    then the terms' document frequencies, read by key where FTS5's vocabulary walks each term's doclist."""
    try:
        made = impacts.Stamp.parse(schema.meta_value(conn, schema.POSTINGS_STAMP_KEY))
        return made is not None and made == impacts.current_stamp(conn)
    except OperationalError:
        return False


def prime(conn: Connection, stats: LexicalStats) -> int:
    """Fill stats for conn before the first query (a server's warm-up): the counts, and the lists' pages read; how
    many counts it holds."""
    frequencies(conn, (), stats)
    with contextlib.suppress(OperationalError):  # a store without the lists
        conn.execute(f"SELECT count(*), sum(chunk_id) FROM {impacts.IMPACTS}").fetchone()
    return stats.known_frequencies(conn)


def common_terms(conn: Connection, terms: tuple[str, ...], stats: LexicalStats | None = None) -> set[str]:
    """The terms whose porter stem is in at least COMMON_FRACTION of the chunks."""
    return _common(*frequencies(conn, terms, stats))


def _common(rows: int, found: dict[str, int | None]) -> set[str]:
    return {t for t, n in found.items() if rows and n is not None and n >= rows * COMMON_FRACTION}


def without_common(conn: Connection, query: LexicalQuery, limit: int,
                   stats: LexicalStats | None = None) -> LexicalQuery:
    """query with its common terms left out, when a rarer term alone still fills limit results."""
    if len(query.terms) < 2:
        return query
    rows, found = frequencies(conn, query.terms, stats)
    common = _common(rows, found)
    kept = tuple(t for t in query.terms if t not in common)
    if not common or not kept or max((found.get(t) or 0) for t in kept) < limit:
        return query
    return query.keeping(kept)
