"""The document sets of match's terms: each term's documents as sorted columns, intersected and tallied.

A term's documents (every matching chunk grouped by its document, body and heading apart) are the
costly part of a match: ~870k chunks for "the" at a million chunks. They are kept per store
generation (query/generation.py) as sorted numpy columns, 24 bytes a document, so a kept term
costs nothing to find again and two common words intersect and tally in a few vectorised passes
rather than a Python loop per document. A server fills them for the corpus's most common words as
it starts (warm_common), so the words every query shares are ready before the first request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pipeline.db import Connection, OperationalError
from query.generation import MAX_HELD, Generation
from query.match_query import Term
from query.terms import TRIGRAM, quote
from query.words import STEMMER

SCOPES: dict[str | None, tuple[str, ...]] = {
    None: ("body", "heading_path"), "heading": ("heading_path",), "body": ("body",),
}
NO_CHUNK = 1 << 62  # above every ordinal: the first matching chunk of a document not yet seen
WARM_SHARE = 0.5  # of MAX_HELD: what the common words filled at a server's start may hold at most
WARM_TERMS = 24

Ids = npt.NDArray[np.int64]
Counts = npt.NDArray[np.int32]


def fts_expression(term: Term, column: str | None) -> str:
    """The FTS5 expression of a term: one quoted string, with a column filter from a fixed table."""
    phrase = quote(term.text)
    return f"{{{column}}} : {phrase}" if column else phrase


@dataclass(frozen=True)
class Columns:
    """Documents by ascending id, each with its body and heading match counts and first matching chunk.

    One term's documents, kept across queries (never changed once made), or a query's tallied answer.
    """

    ids: Ids
    body: Counts
    heading: Counts
    first: Ids

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def of(cls, rows: Iterable[tuple[int, int, int, int]]) -> Columns:
        """The columns of (document id, body count, heading count, first chunk) rows, any order, ids distinct."""
        table = np.array(list(rows), dtype=np.int64).reshape(-1, 4)
        table = table[np.argsort(table[:, 0], kind="stable")]
        return cls(table[:, 0].copy(), table[:, 1].astype(np.int32), table[:, 2].astype(np.int32),
                   table[:, 3].copy())


def term_documents(conn: Connection, term: Term, table: str = "chunks_fts") -> Columns:
    """The documents one term matches (in any form), with per-column chunk counts."""
    if term.cjk:
        return _cjk_documents(conn, term)
    found: dict[int, list[int]] = {}
    for column in SCOPES[term.field]:
        rows = conn.execute(
            f"SELECT c.document_id, count(*), min(c.ordinal) FROM {table} f JOIN chunks c ON c.id = f.rowid"
            f" WHERE {table} MATCH ? GROUP BY c.document_id",
            (fts_expression(term, column),),
        ).fetchall()
        at = 1 if column == "body" else 2
        for doc_id, count, first in rows:
            hits = found.get(doc_id)
            if hits is None:
                hits = found[doc_id] = [doc_id, 0, 0, first]
            hits[3] = min(hits[3], first)
            hits[at] += count
    return Columns.of(tuple(h) for h in found.values())  # type: ignore[misc]


def _cjk_documents(conn: Connection, term: Term) -> Columns:
    run = term.text
    if len(run) >= TRIGRAM:
        candidates = "c.id IN (SELECT rowid FROM chunks_fts_cjk WHERE chunks_fts_cjk MATCH ?)"
        arg = quote(run)
    else:
        candidates = "c.cjk != '' AND instr(c.cjk, ?) > 0"
        arg = run
    rows = conn.execute(
        "SELECT c.document_id, c.ordinal, instr(c.body, ?) > 0, instr(c.heading_path, ?) > 0"
        f" FROM chunks c WHERE {candidates}",
        (run, run, arg),
    ).fetchall()
    found: dict[int, list[int]] = {}
    for doc_id, ordinal, in_body, in_heading in rows:
        in_body = bool(in_body) and term.field in (None, "body")
        in_heading = bool(in_heading) and term.field in (None, "heading")
        if not (in_body or in_heading):
            continue
        hits = found.setdefault(int(doc_id), [int(doc_id), 0, 0, NO_CHUNK])
        hits[1] += int(in_body)
        hits[2] += int(in_heading)
        hits[3] = min(hits[3], int(ordinal))
    return Columns.of(tuple(h) for h in found.values())  # type: ignore[misc]


def term_columns(conn: Connection, term: Term, generation: Generation) -> Columns:
    """term_documents, kept for the store's generation (query/generation.py): the same words come back."""
    key = ("match-columns", term.text, term.field, term.cjk)
    return generation.get(key, lambda: term_documents(conn, term), len)


def matching(positives: list[Term], negated: list[Term], sets: dict[Term, Columns]) -> Ids:
    """The ids of the documents holding every positive term (smallest set first) and none of the negated ones."""
    ordered = sorted(positives, key=lambda t: len(sets[t]))
    found = sets[ordered[0]].ids
    for term in ordered[1:]:
        found = np.intersect1d(found, sets[term].ids, assume_unique=True)
    for term in negated:
        found = np.setdiff1d(found, sets[term].ids, assume_unique=True)
    return found


def within(found: Ids, allowed: set[int]) -> Ids:
    """found (sorted ids) kept to the allowed documents."""
    return np.intersect1d(found, np.fromiter(allowed, np.int64, len(allowed)), assume_unique=True)


def tallied(found: Ids, per_term: list[Columns], min_matches: int) -> Columns:
    """Each found document's body and heading matches summed over the terms, and its first chunk."""
    body = np.zeros(len(found), np.int32)
    heading = np.zeros(len(found), np.int32)
    first = np.full(len(found), NO_CHUNK, np.int64)
    for columns in per_term:
        at = np.searchsorted(columns.ids, found)
        body += columns.body[at]
        heading += columns.heading[at]
        np.minimum(first, columns.first[at], out=first)
    kept = (body + heading) >= min_matches
    return Columns(found[kept], body[kept], heading[kept], first[kept])


def shown_by_matches(totals: Columns, limit: int | None) -> Ids:
    """The positions of the documents at or above the limit-th by (body, heading) matches (all without a limit)."""
    if limit is None or limit >= len(totals):
        return np.arange(len(totals))
    order = np.lexsort((-totals.heading, -totals.body))
    cut = order[max(0, limit - 1)]
    body, heading = totals.body[cut], totals.heading[cut]
    above = (totals.body > body) | ((totals.body == body) & (totals.heading >= heading))
    return np.flatnonzero(above)


def common_words(conn: Connection, most: int = WARM_TERMS) -> list[str]:
    """The corpus's most common words (the impact lists' terms, most documents first) that are their own stem."""
    from pipeline import impacts  # the lists' tables; a store without them has no common words listed

    try:
        rows = conn.execute(f"SELECT term FROM {impacts.FLOORS} ORDER BY held DESC, term").fetchall()
    except OperationalError:
        return []
    words = [str(r[0]) for r in rows if str(r[0]).isalpha() and len(str(r[0])) >= 2]
    stems = STEMMER.stems(words)
    return [w for w in words if stems[w] == w][:most]


def warm_common(conn: Connection, generation: Generation, also: Callable[[Term], object] | None = None) -> int:
    """Fill the kept columns of the most common words (a server's start), within WARM_SHARE of the bound.

    also, when given, runs for each word's term once its columns are made (to keep its report too).
    Returns how many words were made.
    """
    held = made = 0
    for word in common_words(conn):
        columns = term_columns(conn, Term(word), generation)
        if also is not None:
            also(Term(word))
        held += len(columns)
        made += 1
        if held > MAX_HELD * WARM_SHARE:
            break
    return made
