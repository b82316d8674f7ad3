"""The top k of a query made only of common words, from the writer's impact lists (pipeline/impacts.py).

Every term of such a query has a list of its best rows by its own bm25 and a floor no row outside
the list exceeds for it. BM25 is a sum over the query's phrases, so a row scores at most the sum,
over the terms, of its listed score where it is listed and the floor where not; a row in no list
at most the floors' sum. The candidates (the lists' rows) are taken by that bound, best first, and
re-scored exactly outside FTS5 (query/rescoring.py) in batches, until the k-th exact score reaches
the next candidate's bound and the floors' sum: then no row left out can enter the top k.

That holds while the lists' stamp is the table's (same rows, same tokens, no chunk written since).
A one-word query is then its list, scores and all (they are the bm25() values a one-word MATCH
gives). After a smaller run than a refresh needs, the rows written since (chunk ids above the
stamp's) join the candidates, every candidate is re-scored with today's statistics, and the answer
is flagged unproven: the lists may have missed a row whose score moved. Without lists for every
term (a store not yet refreshed, a rarer word), or with excluded words, None leaves it to FTS5.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline import db, impacts, schema
from pipeline.bm25 import BM25
from pipeline.db import Connection, OperationalError
from query.lexical.frequency import frequencies
from query.lexical.plan import Answer, Plan, Request
from query.lexical.rescoring import row_counts
from query.lexical.stats import LexicalStats
from query.terms import LexicalQuery
from query.words import STEMMER

BATCH = 64
MAX_NEW_ROWS = 2000  # more rows written since the stamp than this: leave it to FTS5
MAX_TERMS = 6
MAX_RESCORED = 256  # past this many rows re-scored in Python, FTS5's own plan is as cheap


class ImpactLists:
    """The top-k strategy of queries of common words: the impact lists (module docstring)."""

    name = "impact lists"

    def plan(self, request: Request) -> Plan | None:
        """A plan while the lists exist for the weights: exact while their stamp is the table's, else only when an
        unproven answer may be served; about 0.1 ms a term's list read."""
        query = request.query
        if request.allowed is not None or not _serves(query, request.limit):
            return None
        try:
            if schema.meta_value(request.conn, impacts.WEIGHTS_KEY) != _weights_text(BM25.weights):
                return None
            made = impacts.Stamp.parse(schema.meta_value(request.conn, impacts.STAMP_KEY))
        except OperationalError:
            return None
        if made is None:
            return None
        exact = made == impacts.current_stamp(request.conn)
        if not exact and not request.unproven:
            return None
        return Plan(self, 100.0 * len(set(query.terms)) + (0.0 if exact else 1000.0), exact)

    def run(self, request: Request, plan: Plan) -> Answer | None:
        found = common_top_k(request.conn, request.query, request.limit, BM25.weights, request.stats)
        return found if found is None or found.exact or request.unproven else None


def _serves(query: LexicalQuery, limit: int) -> bool:
    return not query.excluded and 1 <= len(query.terms) <= MAX_TERMS and limit <= impacts.LIST_ROWS


def _weights_text(weights: Sequence[float]) -> str:
    return ",".join(str(float(w)) for w in weights)


def common_top_k(conn: Connection, query: LexicalQuery, limit: int, weights: Sequence[float],
                 stats: LexicalStats | None = None) -> Answer | None:
    """query's top limit (rowid, bm25) from the impact lists, or None when they cannot answer it."""
    if not _serves(query, limit):
        return None
    with db.read_snapshot(conn):
        try:
            return _answer(conn, query, limit, weights, stats or LexicalStats())
        except OperationalError:  # a store of an older format: no lists to read
            return None


def _answer(conn: Connection, query: LexicalQuery, limit: int, weights: Sequence[float],
            stats: LexicalStats) -> Answer | None:
    if schema.meta_value(conn, impacts.WEIGHTS_KEY) != _weights_text(weights):
        return None
    made = impacts.Stamp.parse(schema.meta_value(conn, impacts.STAMP_KEY))
    now = impacts.current_stamp(conn)
    if made is None or now is None:
        return None
    stems = STEMMER.stems(query.terms)
    lists = _lists(conn, sorted({stems[t] for t in query.terms}))
    if lists is None:
        return None
    unchanged = made == now
    if unchanged and len(query.phrases) == 1:  # one phrase: its list is its answer (a repeated word is not one)
        listed, _ = lists[stems[query.terms[0]]]
        return Answer([(cid, -value) for cid, value in listed[:limit]], True)
    return _by_bound(conn, query, limit, weights, lists, [stems[t] for t in query.phrases], made, unchanged, stats)


def _lists(conn: Connection, stems: list[str]) -> dict[str, tuple[list[tuple[int, float]], float]] | None:
    """Each stem's listed (chunk id, score) best first and its floor; None when a stem has no list."""
    found: dict[str, tuple[list[tuple[int, float]], float]] = {}
    for stem in stems:
        floor = conn.execute(f"SELECT floor FROM {impacts.FLOORS} WHERE term = ?", (stem,)).fetchone()
        if floor is None:
            return None
        rows = conn.execute(f"SELECT chunk_id, score FROM {impacts.IMPACTS} WHERE term = ? ORDER BY rank",
                            (stem,)).fetchall()
        found[stem] = ([(int(r[0]), float(r[1])) for r in rows], float(floor[0]))
    return found


def _by_bound(conn: Connection, query: LexicalQuery, limit: int, weights: Sequence[float],
              lists: dict[str, tuple[list[tuple[int, float]], float]], stems: list[str],
              made: impacts.Stamp, unchanged: bool, stats: LexicalStats) -> Answer | None:
    """The top limit by the lists' bounds; stems: one per phrase of the expression, in its order (a repeated
    word's stem as often as it is written, so its part counts as often as FTS5 counts it)."""
    bounds, known = _bounds(lists, stems, unchanged)
    floors = sum(lists[s][1] for s in stems)
    if not unchanged:
        new = _written_since(conn, query, made)
        if new is None:
            return None
        bounds.update(dict.fromkeys(new, float("inf")))
    order = sorted(bounds, key=lambda cid: (-bounds[cid], cid))
    if len(order) < limit or bounds[order[limit - 1]] < floors:
        return None  # not even the best bounds reach the floors: the lists cannot prove any k rows
    table = impacts.table_stats(conn)
    _, held = frequencies(conn, query.terms, stats)
    if table is None or any(held.get(t) is None for t in query.terms):
        return None
    idfs = [BM25.idf(table.rows, int(held[t] or 0)) for t in query.phrases]
    scored: list[tuple[int, float]] = []
    rescored = 0
    for start in range(0, len(order), BATCH):
        batch = order[start:start + BATCH]
        unknown = [cid for cid in batch if cid not in known]
        rescored += len(unknown)
        if rescored > MAX_RESCORED:
            return None
        counts = row_counts(conn, query.phrases, unknown, weights, stats) if unknown else {}
        found = [(cid, BM25.score(idfs, c.freq, c.tokens, table.avgdl)) for cid, c in counts.items()]
        scored = sorted([*scored, *found, *((cid, known[cid]) for cid in batch if cid in known)],
                        key=lambda item: (item[1], item[0]))
        if _proven(scored, limit, bounds, order, start + BATCH, floors):
            return Answer(scored[:limit], unchanged)
    return None


def _written_since(conn: Connection, query: LexicalQuery, made: impacts.Stamp) -> list[int] | None:
    """The rows holding a query word written since the lists were made; None past MAX_NEW_ROWS of them."""
    new = [int(r[0]) for r in conn.execute(
        "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid > ? LIMIT ?",
        (query.expression, made.top, MAX_NEW_ROWS + 1))]
    return None if len(new) > MAX_NEW_ROWS else new


def _proven(scored: list[tuple[int, float]], limit: int, bounds: dict[int, float], order: list[int], following: int,
            floors: float) -> bool:
    """Whether the limit-th score so far beats every row not yet scored: the next bound and the floors' sum."""
    bound = bounds[order[following]] if following < len(order) else 0.0
    return len(scored) >= limit and -scored[limit - 1][1] >= max(bound, floors)


def _bounds(lists: dict[str, tuple[list[tuple[int, float]], float]], stems: list[str],
            unchanged: bool) -> tuple[dict[int, float], dict[int, float]]:
    """Each listed row's bound (its listed score for each term listing it, the floor for the others), and
    the bm25 of the rows every term lists, when the stamp holds (the listed scores summed in phrase order:
    the very operations FTS5 does)."""
    listed = {stem: dict(rows) for stem, (rows, _) in lists.items()}
    bounds: dict[int, float] = {}
    known: dict[int, float] = {}
    for cid in {cid for stem in stems for cid in listed[stem]}:
        bounds[cid] = sum(listed[stem].get(cid, lists[stem][1]) for stem in stems)
        if unchanged and all(cid in listed[stem] for stem in stems):
            total = 0.0
            for stem in stems:
                total += listed[stem][cid]
            known[cid] = -1.0 * total
    return bounds, known
