"""search: the lexical tier (and, with embeddings, the vector tier fused by RRF) with honest statuses.

This module owns the answer (statuses, notes, degrading, the span and meters); the ranking itself is
query/rank/: the query parsed once, each tier's candidates, the stages, one hydration.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from config.errors import EmbeddingError, QueryError, RerankError, UsageError, VectorIdentityMismatch
from config.instruments import TIER, instruments
from config.observability import traced
from config.settings import MAX_TOP_K, Settings
from pipeline import db
from pipeline.vectors import pinned_identity, serving
from query.filters import Filter
from query.generation import Generation
from query.lexical import FANOUT
from query.rank.language import query_language, widened
from query.rank.parsed import ParsedQuery, QueryLanguage, parse_query
from query.rank.pipeline import ranked_hits
from query.rank.ranked import Context
from query.rank.rerank import RerankOutcome, outcome_of
from query.rank.tiers import HYBRID as HYBRID  # the rankings, re-exported: eval and the CLI import them here
from query.rank.tiers import LEXICAL as LEXICAL
from query.rank.tiers import RANKINGS as RANKINGS
from query.rank.tiers import VECTOR as VECTOR
from query.rank.tiers import LexicalTier, Tiers, lexical_tier, vector_tier
from query.rank.tiers import excluded_ids as excluded_ids
from query.reader import Hit, Reader, Translation, not_built_note
from query.status import Status
from query.terminal import one_line
from query.tier import rerank_configured, tier_line

if TYPE_CHECKING:
    from query.citations import CitationMapper


NOTE_EMPTY = "the index holds no documents; check knowledge.paths and run `knowledge index`"


@dataclass(frozen=True)
class SearchResponse:
    """What a search found, how, and what the caller should know about it (made whole, never changed)."""

    tier: str
    status: str
    hits: list[Hit] = field(default_factory=list)
    note: str | None = None
    dropped: tuple[str, ...] = ()
    degraded: str | None = None
    degraded_kind: str | None = None  # the step that failed: timeout, refused, http_status, malformed
    query: ParsedQuery | None = None  # the query as search read it (the page marks its words with it)
    rerank: RerankOutcome | None = None  # what the reranking stage did (None: not configured or nothing to do)
    language: QueryLanguage | None = None  # the language it was answered in (None: lang any, or not searched)
    lexical_plan: str | None = None  # the lexical strategy that found the candidates (None: no lexical tier)
    lexical_exact: bool = True  # whether it proved its top k the full query's


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


def not_built(settings: Settings, text: str) -> SearchResponse:
    """The answer to a search when there is no index to read (or, on a replica, no generation yet)."""
    return SearchResponse(tier_line(settings), Status.INDEX_NOT_BUILT, note=not_built_note(settings),
                          query=parse_query(text))


def search(settings: Settings, text: str, top_k: int | None, reader: Reader, filters: Filter | None = None,
           explain: bool = False, lang: str | None = None) -> SearchResponse:
    """Answer free text with the top_k best sections (None: the configured count) from the reader it is lent
    (QueryService lends one; a store never built is answered before, with not_built()); never raises for any
    query text.

    filters narrows the documents answered from (query/filters.py); explain attaches to each hit
    its ranks and scores in each tier (query/explain.py); lang is the query's language (None: told
    from its text, else the default; `any`: no language preference, query/rank/language.py).

    With embeddings the vector tier runs too and RRF fuses both rankings; an unreachable or
    failing server degrades to lexical (tier line, note and `degraded` say so), while a model,
    dimension or prefix mismatch with the index raises VectorIdentityMismatch.
    """
    query = parse_query(text)
    with db.translating_damage(settings.db_path):
        k, clamped = clamp_top_k(top_k, settings)
        with traced("search") as span:
            began = time.perf_counter()
            response = _search(settings, reader, query, k, filters=filters, explain=explain, lang=lang)
            if clamped:
                response = replace(response, note="; ".join(n for n in (response.note, clamped) if n))
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
            if response.lexical_plan is not None:
                span.set_attribute("knowledge.lexical.strategy", response.lexical_plan)
                span.set_attribute("knowledge.lexical.exact", response.lexical_exact)
            if response.rerank is not None:
                span.set_attribute("knowledge.rerank", response.rerank.kind or "reranked")
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
                ranking: str | None = None, lang: str | None = None) -> SearchResponse:
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
    return _search(settings, reader, parse_query(text), max(1, depth), max(depth, FANOUT), depth, ranking, lang=lang)


def _search(settings: Settings, reader: Reader, query: ParsedQuery, k: int, fanout: int = FANOUT, depth: int = 0,
            ranking: str | None = None, filters: Filter | None = None, explain: bool = False,
            lang: str | None = None) -> SearchResponse:
    """The top k; each tier reads `fanout` (lexical) or max(depth, KNN_K) (vector) candidates.

    With an active filter both tiers read only the allowed documents' chunks (query/filters.py), so
    their candidates are the best allowed ones, never a fixed fan-out cut afterwards. Every statement
    runs in one read snapshot, so a section a tier found is still there when the hits are read,
    whatever the writer commits meanwhile (a re-index rewrites sections under new ids).
    """
    active = filters if filters is not None and filters.active else None
    # a filter's documents are kept per generation, read before the snapshot and confirmed once it has begun
    # (none is made without one: its sentinel connection would hold the store open in a CLI process)
    generation = Generation.of(reader) if active is not None else None
    with reader.snapshot():
        if generation is not None:
            generation.confirm()
        return _ranked(settings, reader, query, k, fanout, depth, ranking, active, explain, lang, generation)


def _ranked(settings: Settings, reader: Reader, query: ParsedQuery, k: int, fanout: int, depth: int,
            ranking: str | None, active: Filter | None, explain: bool, lang: str | None,
            generation: Generation | None) -> SearchResponse:
    """_search inside its snapshot."""
    settings = serving(settings, reader.meta)  # after a model switch, embeddings_next serves
    pinned = pinned_identity(reader.meta)
    tier = tier_line(settings, dimension=pinned.dimension if pinned else None)
    if not reader.has_documents():
        return SearchResponse(tier, Status.INDEX_EMPTY, note=NOTE_EMPTY, query=query)
    # None also for a filter allowing every document: the unfiltered path, at its cost
    allowed = (active.allowed(reader.conn, reader.document_count(), generation)
               if active is not None else None)
    excluded = excluded_ids(reader, query)
    language = query_language(settings, reader, query.text, lang)
    chosen = lexical_tier(reader, query, fanout, allowed, excluded) if ranking != VECTOR else LexicalTier((), "", True)
    lexical = widened(reader, query, chosen.found, fanout, allowed, excluded, language) if ranking != VECTOR else ()
    strategy, exact = chosen.strategy, chosen.exact
    response = SearchResponse(tier, Status.OK, note=_query_note(query, active), dropped=query.dropped, query=query,
                              language=language, lexical_plan=strategy or None, lexical_exact=exact)
    tiers = Tiers(LEXICAL, lexical, strategy=strategy, exact=exact)
    if _wants_vectors(settings, reader, query, ranking) and not (allowed is not None and allowed.empty):
        try:
            found = vector_tier(settings, reader, query.text, depth, allowed.documents if allowed else None, tier,
                                None if ranking == VECTOR else [cid for cid, _ in lexical], excluded)
        except VectorIdentityMismatch:
            raise
        except EmbeddingError as exc:  # the embed step failed: degrade, and say so everywhere
            if ranking is not None:
                raise  # a forced ranking (evaluation) never degrades silently
            response = _degraded(response, settings, exc)
        else:
            response = replace(response, tier=found.tier)
            tiers = Tiers(VECTOR if ranking == VECTOR else HYBRID, lexical, found.found, found.feedback,
                          strategy=strategy, exact=exact)
    answered = ranked_hits(Context(query, tiers, reader, settings, language), k, explain)
    return _reranked(replace(response, hits=answered.hits), settings, outcome_of(answered.ranking),
                     forced=ranking is not None)


def _reranked(response: SearchResponse, settings: Settings, outcome: RerankOutcome | None,
              forced: bool) -> SearchResponse:
    """The response saying what the reranker did: its part of the tier line, and a note when it was skipped.

    A forced ranking (evaluation) raises RerankError instead: its figures never silently leave out a stage.
    """
    if outcome is None or settings.rerank is None:
        return response
    if forced and outcome.skipped is not None:
        raise RerankError(f"the reranker was skipped ({outcome.skipped}); an evaluation ranks through every "
                          "configured stage or stops (raise knowledge.rerank.budget_ms, or fix the endpoint)",
                          outcome.kind or "error")
    plain = response.tier.removesuffix(f"; {rerank_configured(settings.rerank)}")
    note = response.note
    if outcome.skipped is not None:
        skipped = f"rerank skipped ({outcome.skipped}); these results keep the fused order"
        note = "; ".join(n for n in (note, skipped) if n)
    return replace(response, rerank=outcome, tier=f"{plain}; {outcome.line()}", note=note)


def _wants_vectors(settings: Settings, reader: Reader, query: ParsedQuery, ranking: str | None) -> bool:
    """Whether the vector tier runs: with embeddings, unless lexical is forced or a query with no terms is not
    forced to vector (whose identity is still checked: a mismatch is an error even then)."""
    emb = settings.embeddings
    if emb is None or ranking == LEXICAL:
        return False
    if not query.terms and ranking != VECTOR:
        from query.vector import query_identity  # the HTTP client only with embeddings

        query_identity(emb, reader.meta, settings.db_path)
        return False
    return True


def _degraded(response: SearchResponse, settings: Settings, exc: EmbeddingError) -> SearchResponse:
    """The response marked lexical only because the embed step failed: tier line, note and `degraded` say why."""
    reason = f"{exc.kind}: {one_line(str(exc), 200)}"
    notes = [n for n in (response.note, f"vector tier skipped ({reason}); these results are lexical only") if n]
    return replace(response, tier=tier_line(settings, degraded=reason), note="; ".join(notes), degraded=reason,
                   degraded_kind=exc.kind)


def _query_note(query: ParsedQuery, filters: Filter | None) -> str | None:
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
        **({"lang": hit.lang, "translations": [translation_json(t, mapper) for t in hit.translations]}
           if hit.lang is not None else {}),
        **({"explain": hit.explain.to_json()} if hit.explain is not None else {}),
    }


def translation_json(translation: Translation, mapper: CitationMapper | None = None) -> dict[str, str]:
    """One of a hit's translations: its language and the citation of its section."""
    citation = (mapper.cite_chunk(translation.path, translation.ordinal, translation.section) if mapper
                else translation.index_ref)
    return {"lang": translation.lang, "citation": citation, "index_ref": translation.index_ref}


def to_json(response: SearchResponse, mapper: CitationMapper | None = None) -> dict[str, Any]:
    """The `search --json` and `/v1/search` shape: tier, status, note (null when none), results."""
    return {
        "tier": response.tier,
        "status": response.status,
        "note": response.note,
        "degraded": response.degraded,
        "degraded_kind": response.degraded_kind,
        "dropped_terms": list(response.dropped),
        **({"rerank": response.rerank.to_json()} if response.rerank is not None else {}),
        **({"query_lang": response.language.lang} if response.language is not None else {}),
        "results": [hit_json(h, mapper) for h in response.hits],
    }
