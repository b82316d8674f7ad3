"""The tier line every command prints first."""

from __future__ import annotations

from urllib.parse import urlsplit

from config.settings import RerankSettings, Settings

LEXICAL = "tier: lexical (FTS5) - no embeddings configured"


def stored_dimension(settings: Settings) -> int | None:
    """The vector dimension pinned in the store, when there is a store with one (read-only, best effort)."""
    from pipeline import db, schema, vectors  # the store is only touched when embeddings are configured

    if not settings.db_path.is_file():
        return None
    try:
        conn = db.connect_readonly(settings.db_path)
    except Exception:  # noqa: BLE001 - the tier line never fails a command; the command reports the store
        return None
    try:
        pinned = vectors.pinned_identity(schema.read_meta(conn))
        return pinned.dimension if pinned else None
    except Exception:  # noqa: BLE001 - same
        return None
    finally:
        conn.close()


def tier_line(settings: Settings, degraded: str | None = None, dimension: int | None = None) -> str:
    """The tier line for these settings; degraded names why the vector tier was not used.

    Without an explicit dimension the one pinned in the store is shown (`?` before the first
    vector run). A configured reranker adds `; rerank: <model> (top N)` (a search replaces it with
    what the stage did: query/search.py).
    """
    line = _tiers(settings, degraded, dimension)
    return line if settings.rerank is None else f"{line}; {rerank_configured(settings.rerank)}"


def reranker_name(config: RerankSettings) -> str:
    """How the tier line names the reranker: its model, else its endpoint's host."""
    return config.model or urlsplit(config.url).netloc or config.url


def rerank_configured(config: RerankSettings) -> str:
    """The tier line's rerank part before a search ran (`knowledge stats`, the CLI's first line)."""
    return f"rerank: {reranker_name(config)} (top {config.top_n})"


def _tiers(settings: Settings, degraded: str | None, dimension: int | None) -> str:
    """The tier line's first part: lexical, hybrid or degraded."""
    emb = settings.embeddings
    if emb is None:
        return LEXICAL
    if degraded:
        return f"tier: hybrid -> DEGRADED to lexical (embeddings unreachable: {degraded})"
    if dimension is None:
        dimension = stored_dimension(settings)
    dim = "?" if dimension is None else str(dimension)
    return f"tier: hybrid (FTS5 + vectors, RRF) - model={emb.model} dim={dim}"
