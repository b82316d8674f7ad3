"""The tier line every command prints first."""

from __future__ import annotations

from config.settings import Settings

LEXICAL = "tier: lexical (FTS5) - no embeddings configured"


def tier_line(settings: Settings, degraded: str | None = None, dimension: int | None = None) -> str:
    """The tier line for these settings; degraded names why the vector tier was not used."""
    emb = settings.embeddings
    if emb is None:
        return LEXICAL
    if degraded:
        return f"tier: hybrid -> DEGRADED to lexical (embeddings unreachable: {degraded})"
    dim = "?" if dimension is None else str(dimension)
    return f"tier: hybrid (FTS5 + vectors, RRF) - model={emb.model} dim={dim}"
