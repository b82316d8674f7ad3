"""The lexical engine: one seam (query/lexical/plan.py) and the strategies behind it; query/lexical/tier.py answers.

The names below are query/lexical/tier.py's, loaded on first use: importing a submodule (LexicalStats, which every
Reader holds) does not load the strategies, so query/reader.py and query/words.py import no cycle."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from query.lexical.tier import (
        COLUMN_WEIGHTS,
        FANOUT,
        HEADING_WEIGHT,
        STRATEGIES,
        WEIGHTS,
        cjk_rankings,
        fuse,
        lexical_top,
        search_ids,
    )

__all__ = ["COLUMN_WEIGHTS", "FANOUT", "HEADING_WEIGHT", "STRATEGIES", "WEIGHTS", "cjk_rankings", "fuse",
           "lexical_top", "search_ids"]


def __getattr__(name: str) -> object:
    """tier.py's public names, imported when first asked for."""
    if name in __all__:
        from query.lexical import tier

        return getattr(tier, name)
    raise AttributeError(f"module 'query.lexical' has no attribute {name!r}")
