"""match / knowledge_enumerate: which documents contain the words, completely and unranked.

FTS5 booleans see one row, and a row is one chunk, so each term runs as its own document-set query
and the sets are intersected and subtracted here, holding only document ids. The query language
is small and closed: bare words, quoted phrases, a leading minus, and heading:/body: scoping.
OR, AND, NOT, NEAR and `*` are rejected by name, because FTS5 would silently answer another
question. User text reaches FTS5 only as one quoted string per term, with a column filter chosen
from a fixed table. CJK runs are matched as substrings through the trigram table.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from config.errors import QueryError
from config.instruments import TIER, instruments
from config.observability import traced
from config.settings import Settings
from pipeline import db, schema
from pipeline.db import Connection
from pipeline.identifiers import written_form
from query.filters import Filter
from query.generation import Generation
from query.match_query import WORD, ParsedQuery, Term, parse, scrub
from query.match_sets import (
    SCOPES,
    Columns,
    fts_expression,
    matching,
    shown_by_matches,
    tallied,
    term_columns,
    warm_common,
    within,
)
from query.reader import Reader
from query.status import Status
from query.words import STEMMER, document_count, other_forms

if TYPE_CHECKING:
    from query.citations import CitationMapper


NOTE_CORPUS_EMPTY = (
    "the index holds no documents, so an empty answer says nothing about the words; "
    "check knowledge.paths and run `knowledge index`"
)
NOTE_QUERY_EMPTY = (
    "the query has no term to match (words need two or more letters or digits), so nothing was "
    "enumerated and an empty answer says nothing about the documents"
)

SORTS = ("matches", "path")
DEFAULT_LIMIT = 50


def checked_limit(limit: int | None) -> int | None:
    """A list limit as every surface takes it: None (every document) or at least 1; QueryError otherwise."""
    if limit is not None and limit < 1:
        raise QueryError(f"limit must be at least 1, got {limit}; ask for every document with all (--all)")
    return limit

@dataclass(frozen=True)
class TermReport:
    """What one term found: documents in any form and as written, its stem and related forms."""

    term: Term
    any_form: int
    as_written: int
    stem: str
    related: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The JSON shape of one term's report."""
        return {
            "term": self.term.text,
            "query": self.term.label,
            "field": self.term.field,
            "excluded": self.term.negated,
            "phrase": self.term.phrase,
            "documents_any_form": self.any_form,
            "documents_as_written": self.as_written,
            "stem": self.stem,
            "related_forms": list(self.related),
        }


@dataclass(frozen=True)
class MatchedDocument:
    """One matching document, its match counts (body and heading apart) and first matching chunk."""

    path: str
    body_matches: int
    heading_matches: int
    ordinal: int
    section: str
    lang: str = ""  # the document's language (pipeline/translations.py)


@dataclass
class EnumerateResult:
    """A complete answer: every matching document (up to limit), the total, per-term reports."""

    status: str
    note: str
    query: str
    terms: list[TermReport] = field(default_factory=list)
    dropped: tuple[str, ...] = ()
    matched: int = 0
    documents: list[MatchedDocument] = field(default_factory=list)
    indexed_documents: int = 0

    @property
    def limited(self) -> bool:
        """Whether fewer documents are listed than matched."""
        return len(self.documents) < self.matched


def enumerate_documents(
    settings: Settings,
    text: str,
    limit: int | None = None,
    sort: str = "matches",
    *,
    reader: Reader,
    min_matches: int = 1,
    filters: Filter | None = None,
) -> EnumerateResult:
    """Every document holding all positive terms and none of the excluded, read from the reader it is lent
    (QueryService lends one; a store never built is answered before); raise QueryError on bad syntax.

    min_matches keeps only the documents whose matching sections (body and heading matches of every
    positive term, summed) number at least that many; filters keeps only the documents it allows
    (query/filters.py), and the answer is complete within them.
    """
    if sort not in SORTS:
        raise QueryError(f"unknown sort {sort!r}; use one of {', '.join(SORTS)}")
    text = scrub(text)
    parsed = parse(text)
    with traced("enumerate") as span:
        began = time.perf_counter()
        with db.translating_damage(settings.db_path):
            generation = Generation.of(reader)  # read before the snapshot, confirmed after
            with reader.snapshot():  # the cached sets and the documents from one snapshot
                generation.confirm()
                result = _enumerate(reader, text, parsed, limit, sort, min_matches, filters, generation)
                if result.status == Status.OK and not result.matched:
                    reader.require_intact()
        span.set_attribute("knowledge.status", result.status)
        span.set_attribute("knowledge.terms", len(parsed.terms))
        span.set_attribute("knowledge.matched", result.matched)
        instruments().enumerate_duration.record(time.perf_counter() - began, {TIER: "lexical"})
        return result


def _enumerate(reader: Reader, text: str, parsed: ParsedQuery, limit: int | None, sort: str,
               min_matches: int, filters: Filter | None, generation: Generation) -> EnumerateResult:
    indexed = reader.document_count()
    if indexed == 0:
        return EnumerateResult(Status.CORPUS_EMPTY, NOTE_CORPUS_EMPTY, text, dropped=parsed.dropped)
    positives = [t for t in parsed.terms if not t.negated]
    if not positives:
        note = NOTE_QUERY_EMPTY
        if parsed.dropped:
            note += "; dropped terms under two characters: " + ", ".join(parsed.dropped)
        return EnumerateResult(Status.QUERY_EMPTY, note, text, dropped=parsed.dropped, indexed_documents=indexed)
    conn = reader.conn
    sets = {term: term_columns(conn, term, generation) for term in parsed.terms}
    reports = [report(conn, term, len(sets[term]), generation) for term in parsed.terms]
    found = matching(positives, [t for t in parsed.terms if t.negated], sets)
    active = filters is not None and filters.active
    if filters is not None and active:
        found = within(found, filters.documents(conn))
    totals = tallied(found, [sets[term] for term in positives], min_matches)
    documents = _hydrate(conn, totals, sort, limit)
    generation.keep()
    result = EnumerateResult(Status.OK, "", text, reports, parsed.dropped, len(totals), documents, indexed)
    result.note = ok_note(result)
    if filters is not None and active:
        result.note += "; " + filters.describe()
    return result


def warm(reader: Reader) -> int:
    """Keep the most common words' documents and reports before the first match (a server's start); how many."""
    generation = Generation.of(reader)
    with reader.snapshot():
        generation.confirm()
        made = warm_common(reader.conn, generation, lambda term: report(reader.conn, term, 0, generation))
    generation.keep()
    return made


def ok_note(result: EnumerateResult, shown: int | None = None) -> str:
    """The note of a successful answer: what it means, what was dropped, what the limit hid."""
    shown = len(result.documents) if shown is None else shown
    of = f" of {result.indexed_documents}" if result.indexed_documents else ""
    if result.matched:
        plural = "s" if result.matched != 1 else ""
        parts = [
            f"complete: all {result.matched} matching document{plural}{of} hold every term (in any form of "
            "each word) and none of the exclusions; matching is complete, never ranked"
        ]
    else:
        parts = [
            f"complete: no document{of} holds every term in any form; an empty answer means the documents "
            "do not contain these words (`knowledge words` lists the words they use)"
        ]
    if shown < result.matched:
        parts.append(f"listing {shown} of {result.matched}")
    if result.dropped:
        parts.append("dropped terms under two characters: " + ", ".join(result.dropped))
    return "; ".join(parts)


def written_term(term: Term) -> Term:
    """The term as the exact table holds it: one identifier (`model_validator`) whole, any other by its words."""
    return Term(written_form(term.text, term.phrase), term.phrase, term.field, term.negated, term.cjk)


def report(conn: Connection, term: Term, any_form: int, generation: Generation | None = None) -> TermReport:
    """A term's report: documents in any form (given) and as written, its stem, related forms."""
    if term.cjk:
        return TermReport(term, any_form, any_form, term.text)
    found = _written_and_forms(conn, term) if generation is None else generation.get(
        ("report", term.text, term.field), lambda: _written_and_forms(conn, term))
    return TermReport(term, any_form, *found)


def _written_and_forms(conn: Connection, term: Term) -> tuple[int, str, tuple[str, ...]]:
    """(documents holding the term as written, its stem, the index's other forms of it)."""
    column = SCOPES[term.field][0] if term.field else None
    as_written = document_count(conn, schema.EXACT_TABLE, fts_expression(written_term(term), column))
    words = [w.lower() for w in WORD.findall(term.text)]
    stems = STEMMER.stems(words)
    stem = " ".join(stems[w] for w in words)
    related = tuple(other_forms(conn, stem, words[0])) if len(words) == 1 else ()
    return as_written, stem, related


def _hydrate(conn: Connection, totals: Columns, sort: str, limit: int | None) -> list[MatchedDocument]:
    if not len(totals) or limit == 0:
        return []
    ids = totals.ids.tolist()
    if sort == "path":
        paths = _paths(conn, ids)
        order = sorted(range(len(ids)), key=lambda i: paths[ids[i]])
    else:
        # By counts, ties by path: only the documents at or above the limit-th count need a path.
        at = shown_by_matches(totals, limit)
        paths = _paths(conn, [ids[i] for i in at])
        body, heading = totals.body.tolist(), totals.heading.tolist()
        order = sorted(at, key=lambda i: (-body[i], -heading[i], paths[ids[i]]))
    if limit is not None:
        order = order[: max(0, limit)]
    picked = [(ids[i], totals.body[i], totals.heading[i], totals.first[i]) for i in order]
    sections = _sections(conn, [(d, first) for d, _, _, first in picked])
    langs = _langs(conn, [d for d, *_ in picked])
    return [MatchedDocument(paths[d], body, heading, first, sections.get(d, ""), langs.get(d, ""))
            for d, body, heading, first in picked]


def _langs(conn: Connection, doc_ids: list[int]) -> dict[int, str]:
    """{document id: its language} in one query."""
    rows = conn.execute("SELECT id, lang FROM documents WHERE id IN (SELECT value FROM json_each(?))",
                        (json.dumps(doc_ids),))
    return {int(i): str(lang) for i, lang in rows}


def _paths(conn: Connection, doc_ids: list[int]) -> dict[int, str]:
    out: dict[int, str] = {}
    for start in range(0, len(doc_ids), 500):
        batch = doc_ids[start : start + 500]
        marks = ",".join("?" * len(batch))
        out.update(conn.execute(f"SELECT id, path FROM documents WHERE id IN ({marks})", batch).fetchall())
    return out


def _sections(conn: Connection, firsts: list[tuple[int, int]]) -> dict[int, str]:
    out: dict[int, str] = {}
    for start in range(0, len(firsts), 250):
        batch = firsts[start : start + 250]
        where = " OR ".join("(document_id = ? AND ordinal = ?)" for _ in batch)
        args = [v for pair in batch for v in pair]
        out.update(conn.execute(f"SELECT document_id, heading_path FROM chunks WHERE {where}", args).fetchall())
    return out


def document_json(doc: MatchedDocument, mapper: CitationMapper | None = None) -> dict[str, Any]:
    """One matching document as every surface prints it: a document-level citation (no section, no
    anchor: the document matched, not one section), its first matching section's index_ref, its counts."""
    return {
        "citation": mapper.cite_document(doc.path) if mapper else doc.path,
        "index_ref": f"{doc.path}#{doc.ordinal}",
        "path": doc.path,
        "body_matches": doc.body_matches,
        "heading_matches": doc.heading_matches,
        "lang": doc.lang,
    }


def to_json(result: EnumerateResult, mapper: CitationMapper | None = None) -> dict[str, Any]:
    """The `match --json` and `/v1/match` shape."""
    return {
        "status": result.status,
        "note": result.note,
        "query": result.query,
        "matched": result.matched,
        "indexed_documents": result.indexed_documents,
        "returned": len(result.documents),
        "dropped_terms": list(result.dropped),
        "terms": [r.to_json() for r in result.terms],
        "documents": [document_json(d, mapper) for d in result.documents],
    }
