"""Verbatim protection: sections holding an identifier or quoted phrase of the query are lifted in the fusion.

A query written like code (`ERR_CONN_RESET`, `TestClient`, `config.yaml`, `"connection reset by
peer"`; see query/terms.py verbatim_phrases: an acronym or a capitalised word alone is not code)
asks for the sections holding that text. Fusion can bury them: an embedding model sees an
identifier as one rare token or as unrelated fragments, so the vector tier ranks other sections
first and RRF lets those overtake. In the hybrid ranking the lexical candidates holding any such
phrase (in the exact, unstemmed table, case folded: one identifier whole, as written, so `or_` is
not "or") are therefore a third ranked list of the fusion, in their lexical order: each gains
1/(RRF_K + its rank among them), as much as a tier's vote. That is evidence the fusion weighs, not
a place: a section both tiers rank high keeps its place above a verbatim one that only the lexical
tier found deep down, and a query whose "identifier" is everywhere (a gene name in every abstract)
lifts nothing above the rest. --explain names the rule on every lifted hit (`verbatim +0.0164`).
Queries without such phrases are untouched. `protect` is the older rule (the held sections placed
first, unconditionally), kept for bench/bench_verbatim.py to compare against.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pipeline.db import Connection
from query.fusion import RRF_K
from query.terms import quote

VERBATIM = "verbatim"  # the stage's name in --explain

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


def lift(fused: Sequence[tuple[int, float]], lexical: Sequence[int],
         held: set[int]) -> tuple[list[tuple[int, float]], dict[int, str]]:
    """(fused with each held id's score raised by 1/(RRF_K + its rank among the held, in lexical order),
    re-sorted; each lifted id's note). A held id missing from fused joins it with the lift alone."""
    order = [cid for cid in dict.fromkeys(lexical) if cid in held]
    gain = {cid: 1.0 / (RRF_K + rank) for rank, cid in enumerate(order, start=1)}
    scores = dict(fused)
    for cid, extra in gain.items():
        scores[cid] = scores.get(cid, 0.0) + extra
    entries = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return entries, {cid: f"+{extra:.4f}" for cid, extra in gain.items()}
