"""search: the lexical tier (and, with embeddings, the vector tier fused by RRF) with honest statuses."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from config.errors import EmbeddingError, QueryError, UsageError, VectorIdentityMismatch
from config.instruments import TIER, instruments
from config.observability import traced
from config.settings import MAX_TOP_K, Settings
from pipeline.schema import read_meta
from pipeline.vectors import pinned_identity, serving
from query.filters import Filter, document_ids_json
from query.fusion import diversified_top, diversify, rrf
from query.lexical import FANOUT, search_ids
from query.reader import Hit, Reader, borrowed_reader, not_built_note
from query.status import Status
from query.terminal import one_line
from query.terms import LexicalQuery, build_query, verbatim_phrases
from query.tier import tier_line
from query.verbatim import protect, verbatim_ids

if TYPE_CHECKING:
    from query.citations import CitationMapper


# The rankings search_deep can force; `search` ranks as configured (hybrid with embeddings, else lexical).
LEXICAL = "lexical"
VECTOR = "vector"
HYBRID = "hybrid"
RANKINGS = (LEXICAL, VECTOR, HYBRID)

NOTE_EMPTY = "the index holds no documents; check knowledge.paths and run `knowledge index`"


@dataclass
class SearchResponse:
    """What a search found, how, and what the caller should know about it."""

    tier: str
    status: str
    hits: list[Hit] = field(default_factory=list)
    note: str | None = None
    dropped: tuple[str, ...] = ()
    degraded: str | None = None
    degraded_kind: str | None = None  # the step that failed: timeout, refused, http_status, malformed


def clamp_top_k(top_k: int | None, settings: Settings) -> tuple[int, str | None]:
    """(effective result count, note): None or 0 is the configured count; above MAX_TOP_K is clamped, saying so.

    A negative count is a QueryError.
    """
    if top_k is not None and top_k < 0:
        raise QueryError(f"top_k must be 0 (the configured {settings.top_k}) or more, got {top_k}")
    wanted = top_k or settings.top_k
    if wanted > MAX_TOP_K:
        return MAX_TOP_K, f"top_k {wanted} is above the cap of {MAX_TOP_K}; at most {MAX_TOP_K} results are returned"
    return max(1, int(wanted)), None


def search(settings: Settings, text: str, top_k: int | None = None, reader: Reader | None = None,
           filters: Filter | None = None, explain: bool = False) -> SearchResponse:
    """Answer free text with the top_k best sections; never raises for any query text.

    filters narrows the documents answered from (query/filters.py); explain attaches to each hit
    its ranks and scores in each tier (query/explain.py).

    With embeddings the vector tier runs too and RRF fuses both rankings; an unreachable or
    failing server degrades to lexical (tier line, note and `degraded` say so), while a model,
    dimension or prefix mismatch with the index raises VectorIdentityMismatch.
    """
    with borrowed_reader(settings, reader) as reader:
        if reader is None:
            return SearchResponse(tier_line(settings), Status.INDEX_NOT_BUILT, note=not_built_note(settings))
        k, clamped = clamp_top_k(top_k, settings)
        with traced("search") as span:
            began = time.perf_counter()
            response = _search(settings, reader, text, k, filters=filters, explain=explain)
            if clamped:
                response.note = "; ".join(n for n in (response.note, clamped) if n)
            if not response.hits and response.status == Status.OK:
                reader.require_intact()
            span.set_attribute("knowledge.tier", response.tier)
            span.set_attribute("knowledge.degraded", response.degraded or "")
            if response.degraded_kind:
                span.set_attribute("knowledge.degraded_kind", response.degraded_kind)
            if settings.embeddings is not None:
                server = urlsplit(settings.embeddings.base_url)
                span.set_attribute("server.address", server.hostname or "")
                if server.port:
                    span.set_attribute("server.port", server.port)
            span.set_attribute("knowledge.hits", len(response.hits))
            _measure(settings, response, time.perf_counter() - began)
            return response


def _measure(settings: Settings, response: SearchResponse, seconds: float) -> None:
    """Record one search's latency by tier (lexical, hybrid, degraded) and count a degraded one."""
    meters = instruments()
    tier = "lexical" if settings.embeddings is None else "degraded" if response.degraded else "hybrid"
    meters.search_duration.record(seconds, {TIER: tier})
    if response.degraded:
        meters.searches_degraded.add(1, {"knowledge.degraded_kind": response.degraded_kind or "other"})


def search_deep(settings: Settings, reader: Reader, text: str, depth: int,
                ranking: str | None = None) -> SearchResponse:
    """Up to `depth` ranked hits, past the user cap of MAX_TOP_K: the entry point of evaluation.

    Each tier reads max(depth, its user fan-out of 50) candidates, so up to depth 50 the ranking is
    the one `search` cuts at top_k: search_deep(.., k) has exactly the hits of search(.., top_k=k)
    for every k search allows. `ranking` forces one ranking (LEXICAL, VECTOR or HYBRID; None = as
    configured, like `search`). A forced vector or hybrid ranking needs embeddings (UsageError) and
    raises the embedding error instead of degrading to lexical.
    """
    if ranking is not None and ranking not in RANKINGS:
        raise UsageError(f"unknown ranking {ranking!r}; expected one of {', '.join(RANKINGS)}")
    if ranking in (VECTOR, HYBRID) and settings.embeddings is None:
        raise UsageError(f"the {ranking} ranking needs embeddings configured (knowledge.embeddings)")
    return _search(settings, reader, text, max(1, depth), max(depth, FANOUT), depth, ranking)


def _search(settings: Settings, reader: Reader, text: str, k: int, fanout: int = FANOUT, depth: int = 0,
            ranking: str | None = None, filters: Filter | None = None, explain: bool = False) -> SearchResponse:
    """The top k; each tier reads `fanout` (lexical) or max(depth, KNN_K) (vector) candidates.

    With an active filter both tiers read only the allowed documents' chunks (query/filters.py), so
    their candidates are the best allowed ones, never a fixed fan-out cut afterwards.
    """
    settings = serving(settings, reader.meta)  # after a model switch, embeddings_next serves
    emb = settings.embeddings
    pinned = pinned_identity(reader.meta)
    tier = tier_line(settings, dimension=pinned.dimension if pinned else None)
    if reader.document_count() == 0:
        return SearchResponse(tier, Status.INDEX_EMPTY, note=NOTE_EMPTY)
    query = build_query(text)
    allowed = document_ids_json(filters.documents(reader.conn)) if filters is not None and filters.active else None
    excluded = excluded_ids(reader, query)
    scored = [(cid, score) for cid, score in search_ids(reader.conn, query, fanout, allowed)
              if cid not in excluded] if ranking != VECTOR else []
    lexical = [cid for cid, _ in scored]
    note = _query_note(query, filters if allowed is not None else None)

    def hits(ranked: list[tuple[int, float]], used: str, neighbours: list[tuple[int, float]] | None = None,
             feedback: int = 0, held: set[int] | None = None) -> list[Hit]:
        """The top k of ranked after document diversity (and verbatim protection: held), hydrated and explained."""
        demoted: set[int] = set()
        if held or explain:  # explain reports every demoted section; protection reorders the whole list
            ranked, demoted = diversify(ranked, reader.documents_of([cid for cid, _ in ranked]))
            if held:  # a protected section is placed first, whatever its document's allowance
                ranked, demoted = protect(ranked, lexical, held), demoted - held
            top = ranked[:k]
        else:
            top = diversified_top(ranked, k, reader.documents_of)
        found = reader.hydrate([cid for cid, _ in top], dict(top))
        if not explain:
            return found
        from query.explain import explanations  # only --explain pays for it

        why = explanations(used, scored if used != VECTOR else [], neighbours or [], bool(query.cjk),
                           demoted, feedback)
        return [replace(h, explain=why.get(h.chunk_id)) for h in found]

    by_bm25 = [(cid, -score) for cid, score in scored]  # bm25 (or negated RRF): lower was better
    if emb is None or ranking == LEXICAL:
        return SearchResponse(tier, Status.OK, hits(by_bm25, LEXICAL), note, query.dropped)
    from query.vector import KNN_K, query_identity  # the HTTP client only with embeddings

    if not query.terms and ranking != VECTOR:
        if emb is not None:
            query_identity(emb, reader.meta, settings.db_path)  # a mismatch is an error even here
        return SearchResponse(tier, Status.OK, hits(by_bm25, LEXICAL), note, query.dropped)
    try:
        found, feedback, settings, tier = _nearest(settings, reader, text, max(depth, KNN_K), allowed, tier,
                                                   None if ranking == VECTOR else lexical, excluded)
    except VectorIdentityMismatch:
        raise
    except EmbeddingError as exc:  # the embed step failed: degrade, and say so everywhere
        if ranking is not None:
            raise  # a forced ranking (evaluation) never degrades silently
        reason = f"{exc.kind}: {one_line(str(exc), 200)}"
        notes = [n for n in (note, f"vector tier skipped ({reason}); these results are lexical only") if n]
        return SearchResponse(tier_line(settings, degraded=reason), Status.OK,
                              hits(by_bm25, LEXICAL),
                              "; ".join(notes), query.dropped, degraded=reason, degraded_kind=exc.kind)
    neighbours = [(cid, d) for cid, d in found if cid not in excluded]
    if ranking == VECTOR:
        return SearchResponse(tier, Status.OK, hits([(cid, -d) for cid, d in neighbours], VECTOR, neighbours),
                              note, query.dropped)
    held = verbatim_ids(reader.conn, verbatim_phrases(text), lexical)
    fused = rrf([lexical, [cid for cid, _ in neighbours]])
    return SearchResponse(tier, Status.OK, hits(fused, HYBRID, neighbours, len(feedback), held), note, query.dropped)


def _query_note(query: LexicalQuery, filters: Filter | None) -> str | None:
    """What the caller should know about the query itself: no terms, dropped terms, exclusions, filters."""
    note = None
    if not query.terms:
        note = "the query has no searchable terms (words of two or more letters or digits)"
    elif query.dropped:
        note = "dropped terms under two characters: " + ", ".join(query.dropped)
    if query.excluded:
        left_out = "left out the sections holding " + ", ".join(query.excluded)
        note = f"{note}; {left_out}" if note else left_out
    if filters is not None:
        note = "; ".join(n for n in (note, filters.describe()) if n)
    return note


def _nearest(settings: Settings, reader: Reader, text: str, count: int, allowed: str | None, tier: str,
             lexical: list[int] | None, excluded: set[int]) -> tuple[list[tuple[int, float]], list[int], Settings, str]:
    """(the vector tier's (chunk id, distance) list, the feedback chunk ids, the serving settings, the tier line).

    The vector tier of a hybrid ranking is the feedback pass: both tiers' candidates re-scored by the
    moved query (query/feedback.py); with
    lexical None (a forced vector ranking) the first pass alone. Runs under the identity the store
    serves: a model switch that swaps the vectors between embedding and KNN is followed once (the
    query is embedded again with the new model); EmbeddingError when the server fails.
    """
    from query.feedback import nearest_with_feedback
    from query.vector import embed_query, query_identity

    for _ in range(2):  # a second pass only when a model switch swapped the vectors mid-query
        emb = settings.embeddings
        assert emb is not None  # serving() only ever swaps one block for another
        identity = query_identity(emb, reader.meta, settings.db_path)
        vector = embed_query(emb, identity, text)
        found = nearest_with_feedback(reader.conn, identity, vector, count, lexical, excluded, allowed)
        if found is not None:
            return found[0], found[1], settings, tier
        reader.meta = read_meta(reader.conn)  # the store now serves another model: follow it
        settings = serving(settings, reader.meta)
        now = pinned_identity(reader.meta)
        tier = tier_line(settings, dimension=now.dimension if now else None)
    raise VectorIdentityMismatch(f"the vectors of {settings.db_path} changed model twice during one query")


def hit_json(hit: Hit, mapper: CitationMapper | None = None) -> dict[str, Any]:
    """One hit as every surface prints it: cite `citation`, look up `index_ref` (seed 001)."""
    return {
        "citation": mapper.cite_chunk(hit.path, hit.ordinal, hit.section) if mapper else hit.index_ref,
        "index_ref": hit.index_ref,
        "ref": hit.short_ref,
        "path": hit.path,
        "section": hit.section,
        "content": hit.content,
        "score": None if hit.score is None else round(hit.score, 6),
        **({"explain": hit.explain.to_json()} if hit.explain is not None else {}),
    }


def excluded_ids(reader: Reader, query: LexicalQuery) -> set[int]:
    """The chunks holding a word the query excludes (any form of it, as the porter index sees words)."""
    if not query.excluded:
        return set()
    rows = reader.conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (query.exclusion,))
    return {int(r[0]) for r in rows}


def to_json(response: SearchResponse, mapper: CitationMapper | None = None) -> dict[str, Any]:
    """The `search --json` and `/v1/search` shape: tier, status, note (null when none), results."""
    return {
        "tier": response.tier,
        "status": response.status,
        "note": response.note,
        "degraded": response.degraded,
        "degraded_kind": response.degraded_kind,
        "dropped_terms": list(response.dropped),
        "results": [hit_json(h, mapper) for h in response.hits],
    }
