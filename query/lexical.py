"""The lexical tier: free text to a safe FTS5 expression, and BM25 over the porter table.

User text reaches FTS5 only through build_query: it keeps runs of letters and digits, drops terms
under two characters (reported), quotes each, caps the list at MAX_TERMS and ORs them, so no query
text can carry FTS5 syntax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MAX_TERMS = 40
FANOUT = 50
HEADING_WEIGHT = 2.0

_TERM = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class LexicalQuery:
    """The FTS5 expression built from free text and the terms it kept or dropped."""

    expression: str
    terms: tuple[str, ...]
    dropped: tuple[str, ...] = field(default=())


def terms_of(text: str) -> tuple[list[str], list[str]]:
    """(kept, dropped) terms of free text: letter/digit runs, kept when 2+ characters, deduplicated."""
    kept: list[str] = []
    dropped: list[str] = []
    seen: set[str] = set()
    for term in _TERM.findall(text):
        key = term.lower()
        if len(term) < 2:
            if key not in dropped:
                dropped.append(key)
            continue
        if key not in seen:
            seen.add(key)
            kept.append(term)
    return kept, dropped


def build_query(text: str) -> LexicalQuery:
    """The OR of quoted terms (at most MAX_TERMS) for text; expression is empty when none remain."""
    kept, dropped = terms_of(text)
    kept = kept[:MAX_TERMS]
    expression = " OR ".join('"' + t.replace('"', '""') + '"' for t in kept)
    return LexicalQuery(expression, tuple(kept), tuple(dropped))


def search_ids(conn: Any, query: LexicalQuery, limit: int = FANOUT) -> list[tuple[int, float]]:
    """(chunk id, bm25 score) best first; lower scores are better in FTS5."""
    if not query.expression:
        return []
    rows = conn.execute(
        f"SELECT rowid, bm25(chunks_fts, 1.0, {HEADING_WEIGHT}) AS score FROM chunks_fts"
        " WHERE chunks_fts MATCH ? ORDER BY score, rowid LIMIT ?",
        (query.expression, limit),
    ).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]
