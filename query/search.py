"""search: the lexical tier (and, with embeddings, the vector tier fused by RRF) with honest statuses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from config.settings import MAX_TOP_K, Settings
from query.lexical import FANOUT, build_query, search_ids
from query.reader import Hit, Reader, open_reader
from query.tier import tier_line

STATUS_OK = "ok"
STATUS_NOT_BUILT = "index_not_built"
STATUS_EMPTY = "index_empty"

NOTE_NOT_BUILT = "no index has been built yet; run `knowledge index` to build it"
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
    """Answer free text with the top_k best sections; never raises for any query text."""
    own = reader is None
    reader = reader or open_reader(settings)
    if reader is None:
        return SearchResponse(tier_line(settings), STATUS_NOT_BUILT, note=NOTE_NOT_BUILT)
    try:
        return _search(settings, reader, text, clamp_top_k(top_k, settings))
    finally:
        if own:
            reader.close()


def _search(settings: Settings, reader: Reader, text: str, k: int) -> SearchResponse:
    if reader.document_count() == 0:
        return SearchResponse(tier_line(settings), STATUS_EMPTY, note=NOTE_EMPTY)
    query = build_query(text)
    ranked = [cid for cid, _ in search_ids(reader.conn, query, FANOUT)]
    note = None
    if not query.terms:
        note = "the query has no searchable terms (words of two or more letters or digits)"
    elif query.dropped:
        note = "dropped terms under two characters: " + ", ".join(query.dropped)
    hits = reader.hydrate(ranked[:k])
    return SearchResponse(tier_line(settings), STATUS_OK, hits, note, query.dropped)


def to_json(response: SearchResponse, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `search --json` shape."""
    out: dict[str, Any] = {"tier": response.tier, "status": response.status}
    if response.note:
        out["note"] = response.note
    out["results"] = [
        {"citation": h.ref, "path": h.path, "section": h.section, "content": h.content} for h in response.hits
    ]
    if extra:
        out.update(extra)
    return out
