"""Frequency-aware shaping: common terms only re-score the rarer terms' rows, and the answer stays exact."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from config.settings import Settings
from query.lexical import search_ids, shaping
from query.lexical.plan import Answer
from query.reader import Reader
from query.terms import build_query
from tests.query.stores import build_store, store_settings, zipf_docs

WORDS = [f"w{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(400)]
FULL = ("SELECT rowid, bm25(chunks_fts, 1.0, 2.0) AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
        " ORDER BY score, rowid LIMIT ?")
SCORE_OF = "SELECT bm25(chunks_fts, 1.0, 2.0) FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid = ?"


def _docs(seed: int, count: int = 100) -> dict[str, str]:
    return zipf_docs(WORDS, seed, count)


@pytest.fixture
def zipf_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setattr(shaping, "SHAPE_ABOVE", 0)  # a small store: shape whatever the common terms hold
    return build_store(store_settings(tmp_path), _docs(1))


def _queries(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    queries = [" ".join([*rng.sample(WORDS[:8], rng.randint(1, 3)), *rng.sample(WORDS[8:300], rng.randint(1, 2))])
               for _ in range(n)]
    repeated = [" ".join(w for w in [*rng.sample(WORDS[:8], 1), *rng.sample(WORDS[8:300], 2)]
                         for _ in range(rng.randint(1, 3))) for _ in range(n // 4)]
    return [*queries, *repeated, f"{WORDS[0]} {WORDS[45]} -{WORDS[1]}", f"{WORDS[2]} {WORDS[3]} {WORDS[50]}",
            f"{WORDS[0]} {WORDS[0]} {WORDS[0]} {WORDS[60]}"]


def _full(reader: Reader, text: str, limit: int) -> list[tuple[int, float]]:
    return [(int(r[0]), float(r[1])) for r in reader.conn.execute(FULL, (build_query(text).expression, limit))]


Answers = dict[str, tuple[Answer, list[tuple[int, float]]]]


def _answers(reader: Reader, limit: int, share: float = shaping.COMMON_SHARE) -> Answers:
    found = {}
    for text in _queries(2, 150):
        shaped = shaping.shaped_top_k(reader.conn, build_query(text), limit, (1.0, 2.0), share)
        if shaped is not None:
            found[text] = (shaped, _full(reader, text, limit))
    return found


def test_a_proven_shaped_answer_is_the_full_querys_row_for_row_and_score_for_score(zipf_store: Settings) -> None:
    with Reader(zipf_store) as reader:
        for limit in (5, 20):
            answers = _answers(reader, limit)
            proven = [text for text, (shaped, _) in answers.items() if shaped.exact]
            assert len(proven) > 30, limit  # the bound proved many answers, at both depths
            for text in proven:
                shaped, full = answers[text]
                assert shaped.rows == full, (text, limit)


def test_an_unproven_answer_still_carries_each_rows_own_bm25(zipf_store: Settings) -> None:
    with Reader(zipf_store) as reader:
        answers = _answers(reader, 20, share=0.05)  # more terms count as common: the bound fails more often
        unproven = [(text, shaped) for text, (shaped, _) in answers.items() if not shaped.exact]
        assert unproven
        for text, shaped in unproven:
            expression = build_query(text).expression
            for cid, score in shaped.rows:
                assert reader.conn.execute(SCORE_OF, (expression, cid)).fetchone()[0] == score, text


def test_the_lexical_tier_serves_proven_answers_before_and_after_a_write(zipf_store: Settings) -> None:
    texts = _queries(3, 60)
    with Reader(zipf_store) as reader:
        for round_ in range(2):
            proven = 0
            for text in texts:
                shaped = shaping.shaped_top_k(reader.conn, build_query(text), 10, (1.0, 2.0))
                if shaped is None or not shaped.exact:
                    continue
                proven += 1
                assert search_ids(reader.conn, build_query(text), 10) == shaped.rows == _full(reader, text, 10), text
            assert proven > 10
            if not round_:
                build_store(zipf_store, _docs(4, 60))  # documents 0-59 rewritten: every frequency moves


def test_queries_shaping_cannot_serve_are_left_to_fts5(zipf_store: Settings) -> None:
    with Reader(zipf_store) as reader:
        conn = reader.conn
        assert shaping.shaped_top_k(conn, build_query(WORDS[0]), 10, (1.0, 2.0)) is None  # one term
        rare = build_query(f"{WORDS[350]} {WORDS[355]}")
        assert shaping.shaped_top_k(conn, rare, 10, (1.0, 2.0)) is None  # no common term
        assert shaping.shaped_top_k(conn, build_query(f"{WORDS[0]} {WORDS[1]}"), 10, (1.0, 2.0)) is None  # no rare term
