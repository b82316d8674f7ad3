"""search: the lexical tier (and, with embeddings, the vector tier fused by RRF) with honest statuses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from config.errors import EmbeddingError, UsageError, VectorIdentityMismatch
from config.observability import tracer
from config.settings import MAX_TOP_K, Settings
from pipeline.vectors import pinned_identity
from query.fusion import fused_ids
from query.lexical import FANOUT, search_ids
from query.reader import STATUS_NOT_BUILT, Hit, Reader, borrowed_reader, not_built_note
from query.terminal import one_line
from query.terms import build_query
from query.tier import tier_line

STATUS_OK = "ok"
STATUS_EMPTY = "index_empty"

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


def clamp_top_k(top_k: int | None, settings: Settings) -> int:
    """The effective result count: requested or configured, between 1 and MAX_TOP_K."""
    wanted = settings.top_k if top_k is None else top_k
    return max(1, min(int(wanted), MAX_TOP_K))


def search(settings: Settings, text: str, top_k: int | None = None, reader: Reader | None = None) -> SearchResponse:
    """Answer free text with the top_k best sections; never raises for any query text.

    With embeddings the vector tier runs too and RRF fuses both rankings; an unreachable or
    failing server degrades to lexical (tier line, note and `degraded` say so), while a model,
    dimension or prefix mismatch with the index raises VectorIdentityMismatch.
    """
    with borrowed_reader(settings, reader) as reader:
        if reader is None:
            return SearchResponse(tier_line(settings), STATUS_NOT_BUILT, note=not_built_note(settings))
        with tracer().start_as_current_span("search") as span:
            response = _search(settings, reader, text, clamp_top_k(top_k, settings))
            span.set_attribute("knowledge.tier", response.tier)
            span.set_attribute("knowledge.degraded", response.degraded or "")
            span.set_attribute("knowledge.hits", len(response.hits))
            return response


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
            ranking: str | None = None) -> SearchResponse:
    """The top k; each tier reads `fanout` (lexical) or max(depth, KNN_K) (vector) candidates."""
    emb = settings.embeddings
    pinned = pinned_identity(reader.meta)
    tier = tier_line(settings, dimension=pinned.dimension if pinned else None)
    if reader.document_count() == 0:
        return SearchResponse(tier, STATUS_EMPTY, note=NOTE_EMPTY)
    query = build_query(text)
    lexical = [cid for cid, _ in search_ids(reader.conn, query, fanout)] if ranking != VECTOR else []
    note = None
    if not query.terms:
        note = "the query has no searchable terms (words of two or more letters or digits)"
    elif query.dropped:
        note = "dropped terms under two characters: " + ", ".join(query.dropped)
    if emb is None or ranking == LEXICAL:
        return SearchResponse(tier, STATUS_OK, reader.hydrate(lexical[:k]), note, query.dropped)
    from query.vector import KNN_K, embed_query, knn, query_identity  # the HTTP client only with embeddings

    if not query.terms and ranking != VECTOR:
        if emb is not None:
            query_identity(emb, reader.meta, settings.db_path)  # a mismatch is an error even here
        return SearchResponse(tier, STATUS_OK, reader.hydrate(lexical[:k]), note, query.dropped)
    identity = query_identity(emb, reader.meta, settings.db_path)
    try:
        vector = embed_query(emb, identity, text)
    except VectorIdentityMismatch:
        raise
    except EmbeddingError as exc:  # the embed step failed: degrade, and say so everywhere
        if ranking is not None:
            raise  # a forced ranking (evaluation) never degrades silently
        reason = one_line(str(exc), 200)
        notes = [n for n in (note, f"vector tier skipped ({reason}); these results are lexical only") if n]
        return SearchResponse(tier_line(settings, degraded=reason), STATUS_OK, reader.hydrate(lexical[:k]),
                              "; ".join(notes), query.dropped, degraded=reason)
    nearest = [cid for cid, _ in knn(reader.conn, vector, max(depth, KNN_K))]
    ranked = nearest[:k] if ranking == VECTOR else fused_ids([lexical, nearest], k)
    return SearchResponse(tier, STATUS_OK, reader.hydrate(ranked), note, query.dropped)


def to_json(response: SearchResponse, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `search --json` shape."""
    out: dict[str, Any] = {"tier": response.tier, "status": response.status}
    if response.note:
        out["note"] = response.note
    if response.degraded:
        out["degraded"] = response.degraded
    out["results"] = [
        {"citation": h.ref, "path": h.path, "section": h.section, "content": h.content} for h in response.hits
    ]
    if extra:
        out.update(extra)
    return out
