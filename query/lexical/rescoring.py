"""FTS5's bm25() of chosen rows, computed outside FTS5 from the store's own term statistics, to the bit.

The formula is pipeline/bm25.py's; this module counts its inputs for chosen rows. Every input is read
from what FTS5 itself stores: N and the column totals from the table's averages record, D per column
from its docsize table, n_i from the porter vocabulary (query/lexical/frequency.py).
f_i is counted in Python: the row's text is split into letter/digit runs and each run's stem comes
from SQLite's own porter tokenizer (query/words.py's STEMMER). The split is checked against the
docsize counts FTS5 wrote for that row; a row whose counts differ (text unicode61 splits otherwise)
is counted by FTS5 instead, through highlight() over a MATCH of one term on that rowid. The sum runs
in the expression's phrase order with the same double operations, so the score equals bm25()'s.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.db import Connection
from pipeline.impacts import varints
from query.lexical.stats import LexicalStats
from query.terms import quote
from query.words import STEMMER

MARK = "\x01"
_RUN = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class RowCounts:
    """One row's token count (all columns) and the weighted instance count of each query term."""

    tokens: int
    freq: tuple[float, ...]


def row_counts(conn: Connection, terms: Sequence[str], ids: Sequence[int],
               weights: Sequence[float], stats: LexicalStats | None = None) -> dict[int, RowCounts]:
    """Each id's RowCounts for terms (ids that are not rows of the table are left out); a term given twice (a
    repeated word's phrases) is counted in each place."""
    stems = STEMMER.stems(terms)
    wanted = [stems[t] for t in terms]
    marks = ",".join("?" * len(ids))
    sizes = {int(r[0]): varints(bytes(r[1])) for r in conn.execute(
        f"SELECT id, sz FROM chunks_fts_docsize WHERE id IN ({marks})", tuple(ids))}
    texts = [(int(r[0]), _runs(str(r[1])), _runs(str(r[2]))) for r in conn.execute(
        f"SELECT id, body, heading_path FROM chunks WHERE id IN ({marks})", tuple(ids)) if int(r[0]) in sizes]
    every: set[str] = set().union(*(c for _, body, heading in texts for c in (body, heading)))
    known = (stats or LexicalStats()).stems(every, STEMMER.stems)
    split = _Split(known, set(wanted))
    found: dict[int, RowCounts] = {}
    for cid, *runs in texts:
        size = sizes[cid][:2]
        columns = [split.counted(r) for r in runs]
        if [n for _, n in columns] != size:
            columns = [(_counted_by_fts(conn, cid, terms, wanted, col), size[col]) for col in range(2)]
        freq = tuple(float(sum(w * c.get(stem, 0) for w, (c, _) in zip(weights, columns, strict=True)))
                     for stem in wanted)
        found[cid] = RowCounts(sum(size), freq)
    return found


def _runs(text: str) -> Counter[str]:
    """text's letter/digit runs, counted; an ASCII text lower-cased first (unicode61 folds ASCII case so)."""
    return Counter(_RUN.findall(text.lower() if text.isascii() else text))


class _Split:
    """How unicode61 + porter split the runs of some rows: the runs of a wanted stem, the runs not one token."""

    def __init__(self, known: dict[str, str], wanted: set[str]) -> None:
        self.known = known
        self.wanted = wanted
        self.forms = [(run, stem) for run, stem in known.items() if stem in wanted]
        self.odd = {run for run, stem in known.items() if not stem or " " in stem}

    def counted(self, runs: Counter[str]) -> tuple[Counter[str], int]:
        """(the instances of each wanted stem, the token count) of one column's runs."""
        if self.odd and not self.odd.isdisjoint(runs):
            return _counted(runs, self.wanted, self.known)
        counted: Counter[str] = Counter()
        for run, stem in self.forms:
            n = runs.get(run)
            if n:
                counted[stem] += n
        return counted, sum(runs.values())


def _counted(runs: Counter[str], wanted: set[str], known: dict[str, str]) -> tuple[Counter[str], int]:
    """(the instances of each wanted stem, the token count) of one column's runs, as unicode61 + porter split them."""
    counted: Counter[str] = Counter()
    tokens = 0
    for run, n in runs.items():
        stem = known[run]
        if " " in stem or not stem:
            parts = stem.split()
            tokens += n * len(parts)
            for part in parts:
                if part in wanted:
                    counted[part] += n
            continue
        tokens += n
        if stem in wanted:
            counted[stem] += n
    return counted, tokens


def _counted_by_fts(conn: Connection, cid: int, terms: Sequence[str], wanted: list[str], col: int) -> Counter[str]:
    """The instances of each wanted stem in one column of row cid, as FTS5 itself finds them."""
    counted: Counter[str] = Counter()
    for term, stem in zip(terms, wanted, strict=True):
        row = conn.execute(f"SELECT highlight(chunks_fts, {col}, ?, '') FROM chunks_fts WHERE chunks_fts MATCH ?"
                           " AND rowid = ?", (MARK, quote(term), cid)).fetchone()
        if row is not None and row[0] is not None:
            counted[stem] = max(counted[stem], str(row[0]).count(MARK))
    return counted
