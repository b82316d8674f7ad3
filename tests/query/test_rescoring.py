"""bm25() computed outside FTS5 from the store's statistics: the score FTS5 gives each row, to the bit."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from config.settings import Settings
from pipeline import impacts
from pipeline.bm25 import BM25
from query.lexical import rescoring
from query.lexical.frequency import frequencies
from query.reader import Reader
from query.terms import build_query
from tests.query.stores import build_store, store_settings

WORDS = [f"w{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(50)]
# Forms the porter stemmer folds together, letters unicode61 folds or splits otherwise than a regex,
# capitals: each must be counted as FTS5 counts it.
ODD = ["Running", "runs", "run", "café", "CAFÉ", "naïve", "x²", "e\u0301t\u0301e", "İstanbul", "ǅemal", "a·b",
       "ﬁle", "Ⅻ", "WAA", "Wab"]
SCORED = ("SELECT rowid, bm25(chunks_fts, 1.0, 2.0) AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
          " ORDER BY score, rowid LIMIT 200")


def _docs(seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    pool = WORDS + ODD
    weights = [1.0 / (rank + 2) for rank in range(len(pool))]
    docs = {}
    for d in range(60):
        sections = [f"## {' '.join(rng.choices(pool, weights, k=3))}\n\n"
                    f"{' '.join(rng.choices(pool, weights, k=rng.randint(3, 80)))}\n" for _ in range(6)]
        docs[f"docs/{d}.md"] = f"# {' '.join(rng.choices(pool, weights, k=2))}\n\n" + "\n".join(sections)
    return docs


@pytest.fixture
def odd_store(tmp_path: Path) -> Settings:
    return build_store(store_settings(tmp_path), _docs(1))


def _check(reader: Reader, texts: list[str]) -> int:
    """Assert every row's Python score equals FTS5's bm25 for each query text; the rows compared."""
    stats = impacts.table_stats(reader.conn)
    assert stats is not None
    compared = 0
    for text in texts:
        query = build_query(text)
        _, held = frequencies(reader.conn, query.terms)
        if not query.expression or any(held.get(t) is None for t in query.terms):
            continue  # nothing to match, or a term FTS5 splits in two: shaping leaves those to FTS5
        idfs = [BM25.idf(stats.rows, int(held[t] or 0)) for t in query.terms]
        expected = [(int(r[0]), float(r[1])) for r in reader.conn.execute(SCORED, (query.expression,))]
        counts = rescoring.row_counts(reader.conn, query.terms, [cid for cid, _ in expected], (1.0, 2.0))
        assert [(cid, BM25.score(idfs, counts[cid].freq, counts[cid].tokens, stats.avgdl))
                for cid, _ in expected] == expected, text
        compared += len(expected)
    return compared


def test_every_rows_score_outside_fts5_equals_its_bm25_exactly(odd_store: Settings) -> None:
    rng = random.Random(3)
    texts = [" ".join(rng.sample(WORDS + ODD, rng.randint(1, 5))) for _ in range(80)] + ODD
    statements: list[str] = []
    with Reader(odd_store) as reader:
        reader.conn.set_trace_callback(statements.append)
        try:
            assert _check(reader, texts) > 2000
        finally:
            reader.conn.set_trace_callback(None)
    # rows whose text unicode61 splits otherwise than letter/digit runs were counted by FTS5 itself
    assert any("highlight(" in s for s in statements)


def test_scores_follow_a_write_on_the_same_connection(odd_store: Settings) -> None:
    with Reader(odd_store) as reader:
        _check(reader, ["waa wab", "café run"])
        build_store(odd_store, _docs(2))  # every document rewritten: counts, lengths and averages move
        assert _check(reader, ["waa wab", "café run", "wac wad wae"]) > 100


def test_varints_read_sqlites_encoding() -> None:
    assert impacts.varints(bytes([0x05, 0x81, 0x00, 0x7F])) == [5, 128, 127]
    assert impacts.varints(bytes([0xFF] * 8 + [0x01])) == [(1 << 64) - 255]
