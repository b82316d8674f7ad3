"""The lexical engine: one seam (query/lexical/plan.py) and the strategies behind it; query/lexical/tier.py answers."""

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
