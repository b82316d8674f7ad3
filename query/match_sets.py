"""The document sets of match's terms: each term's documents as sorted columns, intersected and tallied.

A term's documents (every matching chunk grouped by its document, body and heading apart) are the
costly part of a match: ~870k chunks for "the" at a million chunks. They are kept per store
generation (query/generation.py) as sorted columns (array.array, 24 bytes a document), so a kept
term costs nothing to find again, and from VECTOR_FROM documents two common words intersect and
tally in a few numpy passes over views of those columns rather than a Python loop per document
(numpy is imported only then: a read command on a small store never loads it). A server fills
them for the corpus's most common words as it starts (warm_common), so the words every query
shares are ready before the first request.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

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
VECTOR_FROM = 2048  # documents: from this many, sets are intersected and tallied with numpy (loaded only then)


def _numpy() -> Any:
    import numpy  # a read command on a small store never loads it (tests/test_architecture.py)

    return numpy


def _view(values: array[int]) -> Any:
    """values as a numpy array sharing their memory."""
    np = _numpy()
    dtype = np.int64 if values.typecode == "q" else np.int32
    return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype)


def _array(code: str, values: Any) -> array[int]:
    out = array(code)
    out.frombytes(_numpy().ascontiguousarray(values, dtype="int64" if code == "q" else "int32").tobytes())
    return out


def fts_expression(term: Term, column: str | None) -> str:
    """The FTS5 expression of a term: one quoted string, with a column filter from a fixed table."""
    phrase = quote(term.text)
    return f"{{{column}}} : {phrase}" if column else phrase


@dataclass(frozen=True)
class Columns:
    """Documents by ascending id, each with its body and heading match counts and first matching chunk.

    One term's documents, kept across queries (never changed once made), or a query's tallied answer.
    """

    ids: array[int]
    body: array[int]
    heading: array[int]
    first: array[int]

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def of(cls, rows: Iterable[tuple[int, int, int, int]]) -> Columns:
        """The columns of (document id, body count, heading count, first chunk) rows, any order, ids distinct."""
        ordered = sorted(rows)
        return cls(array("q", (r[0] for r in ordered)), array("i", (r[1] for r in ordered)),
                   array("i", (r[2] for r in ordered)), array("q", (r[3] for r in ordered)))


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


def matching(positives: list[Term], negated: list[Term], sets: dict[Term, Columns]) -> array[int]:
    """The ids (ascending) of the documents holding every positive term (smallest set first) and none of the negated."""
    ordered = sorted(positives, key=lambda t: len(sets[t]))
    if len(sets[ordered[0]]) >= VECTOR_FROM:
        np = _numpy()
        found = _view(sets[ordered[0]].ids)
        for term in ordered[1:]:
            found = np.intersect1d(found, _view(sets[term].ids), assume_unique=True)
        for term in negated:
            found = np.setdiff1d(found, _view(sets[term].ids), assume_unique=True)
        return _array("q", found)
    kept = set(sets[ordered[0]].ids)
    for term in ordered[1:]:
        kept.intersection_update(sets[term].ids)
    for term in negated:
        kept.difference_update(sets[term].ids)
    return array("q", sorted(kept))


def within(found: array[int], allowed: set[int]) -> array[int]:
    """found (ascending ids) kept to the allowed documents."""
    return array("q", (d for d in found if d in allowed))


def tallied(found: array[int], per_term: list[Columns], min_matches: int) -> Columns:
    """Each found document's body and heading matches summed over the terms, and its first chunk."""
    if len(found) >= VECTOR_FROM:
        return _tallied_vectors(found, per_term, min_matches)
    rows = []
    for doc in found:
        body = heading = 0
        first = NO_CHUNK
        for columns in per_term:
            i = bisect_left(columns.ids, doc)
            body += columns.body[i]
            heading += columns.heading[i]
            first = min(first, columns.first[i])
        if body + heading >= min_matches:
            rows.append((doc, body, heading, first))
    return Columns.of(rows)


def _tallied_vectors(found: array[int], per_term: list[Columns], min_matches: int) -> Columns:
    np = _numpy()
    ids = _view(found)
    body = np.zeros(len(ids), np.int32)
    heading = np.zeros(len(ids), np.int32)
    first = np.full(len(ids), NO_CHUNK, np.int64)
    for columns in per_term:
        at = np.searchsorted(_view(columns.ids), ids)
        body += _view(columns.body)[at]
        heading += _view(columns.heading)[at]
        np.minimum(first, _view(columns.first)[at], out=first)
    kept = (body + heading) >= min_matches
    return Columns(_array("q", ids[kept]), _array("i", body[kept]), _array("i", heading[kept]),
                   _array("q", first[kept]))


def shown_by_matches(totals: Columns, limit: int | None) -> list[int]:
    """The positions of the documents at or above the limit-th by (body, heading) matches (all without a limit)."""
    n = len(totals)
    if limit is None or limit >= n:
        return list(range(n))
    if n >= VECTOR_FROM:
        np = _numpy()
        body, heading = _view(totals.body), _view(totals.heading)
        cut = np.lexsort((-heading, -body))[max(0, limit - 1)]
        above = (body > body[cut]) | ((body == body[cut]) & (heading >= heading[cut]))
        return list(np.flatnonzero(above).tolist())
    counts = list(zip(totals.body, totals.heading))
    cut_body, cut_heading = sorted(counts, key=lambda c: (-c[0], -c[1]))[max(0, limit - 1)]
    return [i for i, (b, h) in enumerate(counts) if b > cut_body or (b == cut_body and h >= cut_heading)]


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
