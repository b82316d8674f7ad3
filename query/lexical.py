"""The lexical tier: free text to a safe FTS5 expression, and BM25 over the porter table.

User text reaches FTS5 only through build_query: it keeps runs of letters and digits, drops terms
under two characters (reported), quotes each, caps the list at MAX_TERMS and ORs them, so no query
text can carry FTS5 syntax.

Chinese, Japanese and Korean runs in the query are also looked up in the trigram table over the
chunks' CJK runs (the trigrams of runs of three or more characters, OR-ed and ranked by BM25;
shorter runs by substring over the CJK column) and fused with the porter ranking by reciprocal rank fusion. A
query without CJK characters takes exactly the porter path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from query.fusion import rrf

MAX_TERMS = 40
FANOUT = 50
HEADING_WEIGHT = 2.0

_TERM = re.compile(r"[^\W_]+")
CJK_RUN = re.compile(
    "[\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u3131-\u318f\u31a0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]+"
)
TRIGRAM = 3


@dataclass(frozen=True)
class LexicalQuery:
    """The FTS5 expression built from free text, the terms it kept or dropped, and its CJK runs."""

    expression: str
    terms: tuple[str, ...]
    dropped: tuple[str, ...] = field(default=())
    cjk: tuple[str, ...] = field(default=())


def terms_of(text: str) -> tuple[list[str], list[str]]:
    """(kept, dropped) terms of free text: letter/digit runs, kept when 2+ characters (or CJK), deduplicated."""
    kept: list[str] = []
    dropped: list[str] = []
    seen: set[str] = set()
    for term in _TERM.findall(text):
        key = term.lower()
        if len(term) < 2 and not CJK_RUN.fullmatch(term):
            if key not in dropped:
                dropped.append(key)
            continue
        if key not in seen:
            seen.add(key)
            kept.append(term)
    return kept, dropped


def cjk_runs_of(text: str) -> list[str]:
    """The distinct runs of CJK characters in text, in order (at most MAX_TERMS)."""
    return list(dict.fromkeys(CJK_RUN.findall(text)))[:MAX_TERMS]


def quote(text: str) -> str:
    """text as one quoted FTS5 string (internal quotes doubled)."""
    return '"' + text.replace('"', '""') + '"'


def build_query(text: str) -> LexicalQuery:
    """The OR of quoted terms (at most MAX_TERMS) for text; expression is empty when none remain."""
    kept, dropped = terms_of(text)
    kept = kept[:MAX_TERMS]
    expression = " OR ".join(quote(t) for t in kept)
    return LexicalQuery(expression, tuple(kept), tuple(dropped), tuple(cjk_runs_of(text)))


def search_ids(conn: Any, query: LexicalQuery, limit: int = FANOUT) -> list[tuple[int, float]]:
    """(chunk id, score) best first, lower scores better: bm25, or negated RRF when CJK runs are fused."""
    porter = _porter_ids(conn, query, limit)
    if not query.cjk:
        return porter
    rankings = [[cid for cid, _ in porter]] + cjk_rankings(conn, query.cjk, limit)
    return fuse(rankings, limit)


def _porter_ids(conn: Any, query: LexicalQuery, limit: int) -> list[tuple[int, float]]:
    if not query.expression:
        return []
    from query.frequency import without_common

    query = without_common(conn, query, limit)
    rows = conn.execute(
        f"SELECT rowid, bm25(chunks_fts, 1.0, {HEADING_WEIGHT}) AS score FROM chunks_fts"
        " WHERE chunks_fts MATCH ? ORDER BY score, rowid LIMIT ?",
        (query.expression, limit),
    ).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


def cjk_rankings(conn: Any, runs: tuple[str, ...] | list[str], limit: int = FANOUT) -> list[list[int]]:
    """Chunk ids ranked per kind of CJK run: one trigram BM25 list, then one list per short run."""
    rankings: list[list[int]] = []
    grams = trigrams(runs)
    if grams:
        rows = conn.execute(
            "SELECT rowid FROM chunks_fts_cjk WHERE chunks_fts_cjk MATCH ?"
            " ORDER BY bm25(chunks_fts_cjk), rowid LIMIT ?",
            (" OR ".join(quote(g) for g in grams), limit),
        ).fetchall()
        rankings.append([int(r[0]) for r in rows])
    for run in (r for r in runs if len(r) < TRIGRAM):
        rows = conn.execute(
            "SELECT id FROM chunks WHERE cjk != '' AND instr(cjk, ?) > 0"
            " ORDER BY (length(cjk) - length(replace(cjk, ?, ''))) * 1.0 / length(cjk) DESC, id LIMIT ?",
            (run, run, limit),
        ).fetchall()
        rankings.append([int(r[0]) for r in rows])
    return rankings


def trigrams(runs: tuple[str, ...] | list[str]) -> list[str]:
    """The distinct trigrams of runs of 3+ characters (at most MAX_TERMS), so an unsegmented sentence finds its words."""
    grams: dict[str, None] = {}
    for run in runs:
        for i in range(len(run) - TRIGRAM + 1):
            grams[run[i : i + TRIGRAM]] = None
    return list(grams)[:MAX_TERMS]


def fuse(rankings: list[list[int]], limit: int) -> list[tuple[int, float]]:
    """The first limit ids of the reciprocal rank fusion of rankings, scores negated (lower is better)."""
    return [(cid, -score) for cid, score in rrf(rankings)[:limit]]
