"""Length normalisation that counts Chinese, Japanese and Korean text by its characters, for Latin-script queries.

FTS5's tokenizer (unicode61) reads a run of CJK characters with no space in it as one token, so a
translated section, most of whose text is such runs, counts a few tokens where its English original
counts dozens. BM25 divides a term's weight by the section's length against the average, so the
translation "looks short" and outscores the original on the English words it keeps (a code
identifier, a product name): the zh `websockets.md#1` of 10 tokens scored -9.15 where the English
section of 17 tokens scored -9.04.

For a query without CJK runs whose lexical candidates include sections with CJK text, this stage
re-scores every candidate with each CJK run counted as its characters (a run of n characters adds
n - 1 to the section's length, and the average length is taken over the store's recounted text).
FTS5's score is kept and scaled by the ratio of the BM25 recomputed with the recounted lengths to
the BM25 recomputed with FTS5's own, so the only change is the length's (a term's frequency and idf
stay FTS5's). The per-phrase frequencies come from the candidate's text tokenized as the porter
index tokenizes it (letter and digit runs, SQLite's own stemmer), the lengths from FTS5's docsize
and averages records. A query with CJK runs (ranked by a fusion with the trigram table) and a
store without CJK text are left as they are; --explain shows `cjk_length x0.91` on a re-scored
hit.
"""

from __future__ import annotations

import json
import re
import threading
import weakref
from collections.abc import Mapping

from pipeline.bm25 import BM25
from pipeline.db import Connection, OperationalError
from pipeline.impacts import varints
from query.lexical.frequency import frequencies
from query.rank.ranked import Ranked
from query.rank.tiers import Scored
from query.words import STEMMER

CJK_LENGTH = "cjk_length"
_TOKEN = re.compile(r"[^\W_]+")


class StoreTotals:
    """Per connection: (data_version, rows, FTS5's total length, the recounted total length) of the store's text;
    kept by the ReadIndex (query/caches.py)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.totals: weakref.WeakKeyDictionary[Connection, tuple[int, int, float, float]] = \
            weakref.WeakKeyDictionary()

Row = tuple[int, str, str, str, bytes]  # a candidate: chunk id, heading path, body, CJK runs, FTS5 docsize


def extra_length(cjk: str) -> int:
    """What counting a section's CJK runs (space-joined, as chunks.cjk holds them) by character adds to its length."""
    runs = cjk.split()
    return sum(len(run) - 1 for run in runs)


def _store_totals(conn: Connection, kept: StoreTotals) -> tuple[int, float, float] | None:
    """(rows, FTS5's average length, the recounted average length), cached until another connection commits."""
    version = int(conn.execute("PRAGMA data_version").fetchone()[0])
    with kept.lock:
        cached = kept.totals.get(conn)
    if cached is None or cached[0] != version:
        row = conn.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()
        if row is None:
            return None
        averages = varints(bytes(row[0]))
        extra = conn.execute("SELECT coalesce(sum(length(replace(cjk, ' ', '')) - (length(cjk)"
                             " - length(replace(cjk, ' ', '')) + 1)), 0) FROM chunks WHERE cjk != ''").fetchone()[0]
        total = float(sum(averages[1:]))
        cached = (version, averages[0], total, total + float(extra))
        with kept.lock:
            kept.totals[conn] = cached
    _, rows, total, recounted = cached
    if not rows or not total:
        return None
    return rows, total / rows, recounted / rows


def _bm25(tf: Mapping[str, float], idf: Mapping[str, float], repeat: Mapping[str, int], length: float,
          average: float) -> float:
    """FTS5's bm25 (higher is better here) of one row: weighted term frequencies, one length over all columns."""
    return sum(BM25.part(idf[s], f, length, average) * repeat[s] for s, f in tf.items() if f)


def _frequencies(heading: str, body: str, stems: set[str], heading_weight: float) -> dict[str, float]:
    """{stem: its weighted frequency in the row} for the query's stems (body weight 1, heading heading_weight)."""
    found: dict[str, float] = {}
    for text, weight in ((body, 1.0), (heading, heading_weight)):
        words = _TOKEN.findall(text)
        stemmed = STEMMER.stems(set(words))
        for word in words:
            if (stem := stemmed.get(word, "")) in stems:
                found[stem] = found.get(stem, 0.0) + weight
    return found


def cjk_length(ranked: Ranked) -> Ranked:
    """Re-score the lexical candidates with CJK runs counted by character (module docstring)."""
    context = ranked.context
    lexical = context.tiers.lexical
    if not lexical or context.query.cjk or not context.query.terms:
        return ranked
    conn = context.reader.conn
    ids = json.dumps([cid for cid, _ in lexical])
    if conn.execute("SELECT NOT EXISTS (SELECT 1 FROM chunks WHERE id IN (SELECT value FROM json_each(?))"
                    " AND cjk != '')", (ids,)).fetchone()[0]:
        return ranked  # no candidate holds a CJK run: their texts are not read
    rows: list[Row] = [(int(r[0]), str(r[1]), str(r[2]), str(r[3]), bytes(r[4])) for r in conn.execute(
        "SELECT c.id, c.heading_path, c.body, c.cjk, s.sz FROM chunks c JOIN chunks_fts_docsize s ON s.id = c.id"
        " WHERE c.id IN (SELECT value FROM json_each(?))", (ids,))]
    if not any(cjk for _, _, _, cjk, _ in rows):
        return ranked
    try:
        totals = _store_totals(conn, context.reader.caches.of(StoreTotals))
    except OperationalError:
        return ranked
    return ranked if totals is None else _rescore(ranked, lexical, rows, totals[1], totals[2])


def _rescore(ranked: Ranked, lexical: tuple[Scored, ...], rows: list[Row], average: float,
             recounted: float) -> Ranked:
    """The candidates' scores times recounted bm25 / FTS5-length bm25, each recomputed from the row's text."""

    context = ranked.context
    terms = context.query.terms
    stems = STEMMER.stems(terms)
    if any(not s or " " in s for s in stems.values()):
        return ranked  # a term FTS5 reads as a phrase of several tokens: leave the scores to FTS5
    indexed, held = frequencies(context.reader.conn, terms, context.reader.lexical)
    idf = {stems[t]: BM25.idf(indexed, held.get(t) or 0) for t in terms}
    repeat: dict[str, int] = {}
    for t in terms:
        repeat[stems[t]] = repeat.get(stems[t], 0) + context.query.lexical.repeat(t)
    ratio: dict[int, float] = {}
    for cid, heading, body, cjk, size in rows:
        tf = _frequencies(heading, body, set(idf), BM25.weights[1])
        length = float(sum(varints(size)))
        own = _bm25(tf, idf, repeat, length, average)
        if own > 0:
            ratio[cid] = _bm25(tf, idf, repeat, length + extra_length(cjk), recounted) / own
    entries = sorted(((cid, score * ratio.get(cid, 1.0)) for cid, score in lexical), key=lambda e: (-e[1], e[0]))
    translated = {cid for cid, _, _, cjk, _ in rows if cjk}
    notes = {cid: f"x{r:.2f}" for cid, r in ratio.items() if cid in translated and abs(r - 1.0) >= 0.005}
    return ranked.with_lexical(tuple(entries)).noted(CJK_LENGTH, notes)
