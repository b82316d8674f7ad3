"""Verbatim protection: sections holding an identifier or quoted phrase of the query keep their lexical place.

A query written like code (`ERR_CONN_RESET`, `kube-proxy`, `"connection reset by peer"`; see
query/terms.py verbatim_phrases) asks for the sections holding that text. Fusion can bury them: an
embedding model sees an identifier as one rare token or as unrelated fragments, so the vector tier
ranks other sections first and RRF lets those overtake. In the hybrid ranking the lexical candidates
holding any such phrase (the phrase of its word runs in order, in the exact, unstemmed table; case
folded) are therefore placed first, in their lexical order, ahead of the rest of the fused list. So
each of them ranks in hybrid no lower than in lexical. Queries without such phrases are untouched.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pipeline.db import Connection
from query.terms import quote


def verbatim_ids(conn: Connection, phrases: Sequence[str], candidates: Sequence[int]) -> set[int]:
    """The candidate chunk ids whose body or heading holds any of the phrases (exact table)."""
    if not phrases or not candidates:
        return set()
    rows = conn.execute(
        "SELECT rowid FROM chunks_fts_exact WHERE chunks_fts_exact MATCH ?"
        " AND +rowid IN (SELECT value FROM json_each(?))",
        (" OR ".join(quote(p) for p in phrases), json.dumps(list(candidates))),
    )
    return {int(r[0]) for r in rows}


def protect(fused: Sequence[tuple[int, float]], lexical: Sequence[int],
            held: set[int]) -> list[tuple[int, float]]:
    """fused with the held ids first, in their lexical order, each keeping its fused score."""
    if not held:
        return list(fused)
    scores = dict(fused)
    first = [cid for cid in dict.fromkeys(lexical) if cid in held]
    placed = set(first)
    return [(cid, scores.get(cid, 0.0)) for cid in first] + [(cid, s) for cid, s in fused if cid not in placed]
