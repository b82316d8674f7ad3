"""The pruned BM25 top k: exactly the full query's rows, order and scores, before and after a write."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from config.settings import Settings
from query.lexical import WEIGHTS, search_ids
from query.lexical import pruning as topk
from query.lexical.pruning import exact_top_k, reaching_sets
from query.reader import Reader
from query.terms import build_query
from tests.query.stores import build_store, store_settings, zipf_docs

WORDS = [f"w{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(60)]
FULL = ("SELECT rowid, bm25(chunks_fts, 1.0, 2.0) AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
        " ORDER BY score, rowid LIMIT ?")


def _docs(seed: int, count: int = 100) -> dict[str, str]:
    return zipf_docs(WORDS, seed, count)


@pytest.fixture
def zipf_store(tmp_path: Path) -> Settings:
    return build_store(store_settings(tmp_path), _docs(1))


def _queries(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(WORDS[:40], rng.randint(2, 5))) for _ in range(n)]


def _scoring_statements(reader: Reader, text: str, limit: int) -> tuple[list[tuple[int, float]] | None, int]:
    """exact_top_k's answer and how many bm25 statements it ran (SQLite's own trace of the connection)."""
    statements: list[str] = []
    reader.conn.set_trace_callback(statements.append)
    try:
        found = exact_top_k(reader.conn, build_query(text), limit, WEIGHTS)
    finally:
        reader.conn.set_trace_callback(None)
    return found, sum(1 for s in statements if "bm25(" in s)


def test_the_pruned_top_k_is_the_full_querys_top_k_row_for_row_and_score_for_score(zipf_store: Settings) -> None:
    paths = {1: 0, 2: 0}
    with Reader(zipf_store) as reader:
        for text in _queries(2, 150):
            for limit in (5, 50):
                expression = build_query(text).expression
                full = [(int(r[0]), float(r[1])) for r in reader.conn.execute(FULL, (expression, limit))]
                found, statements = _scoring_statements(reader, text, limit)
                if found is None:
                    continue
                assert found == full, text
                paths[statements] += 1
    assert paths[1] and paths[2]  # both the seed alone and the seed plus a dangerous term's rows were exercised


def test_a_search_after_a_reindex_sees_the_new_text_and_stays_exact(zipf_store: Settings) -> None:
    with Reader(zipf_store) as reader:
        before = {text: search_ids(reader.conn, build_query(text), 10) for text in _queries(3, 40)}
        build_store(zipf_store, _docs(4, 60))  # documents 0-59 rewritten: every frequency moves
        for text in before:
            expression = build_query(text).expression
            full = [(int(r[0]), float(r[1])) for r in reader.conn.execute(FULL, (expression, 10))]
            found, _ = _scoring_statements(reader, text, 10)
            assert found is None or found == full, text
        changed = [t for t in before if search_ids(reader.conn, build_query(t), 10) != before[t]]
        assert changed  # the warm reader answers from the new text, not from what it counted before


def test_queries_pruning_cannot_help_are_left_to_the_full_query(zipf_store: Settings) -> None:
    with Reader(zipf_store) as reader:
        assert exact_top_k(reader.conn, build_query(WORDS[0]), 10, WEIGHTS) is None  # one term
        assert exact_top_k(reader.conn, build_query(" ".join(WORDS[:9])), 10, WEIGHTS) is None  # too many terms
        assert exact_top_k(reader.conn, build_query(f"{WORDS[58]} {WORDS[59]}"), 10, WEIGHTS) is None  # few rows in all


def test_common_terms_seed_from_the_rows_holding_the_most_terms_and_stay_exact(
        zipf_store: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topk, "SEED_ROWS_MAX", 0)  # every pair seed counts as too large: the wider seeds run
    seeds: list[str] = []
    answered = 0
    with Reader(zipf_store) as reader:
        for text in [*_queries(5, 120), " ".join(WORDS[:4]), " ".join(WORDS[:3])]:
            for limit in (1, 5, 50):
                expression = build_query(text).expression
                full = [(int(r[0]), float(r[1])) for r in reader.conn.execute(FULL, (expression, limit))]
                reader.conn.set_trace_callback(seeds.append)
                try:
                    found = exact_top_k(reader.conn, build_query(text), limit, WEIGHTS)
                finally:
                    reader.conn.set_trace_callback(None)
                assert found is None or found == full, (text, limit)
                answered += found is not None
    assert answered > 50  # many queries were answered by the pruned path, not left to the full query
    assert any("LIMIT" in s and " AND " in s and "bm25(" not in s for s in seeds)  # a wider seed was tried


def test_the_reaching_sets_are_the_smallest_sets_whose_bounds_add_up_to_the_floor() -> None:
    bounds = {"rare": 9.0, "mid": 5.0, "common": 2.0, "often": 1.5}
    assert reaching_sets(tuple(bounds), bounds, 8.0) == [("rare",), ("mid", "common", "often")]
    assert reaching_sets(tuple(bounds), bounds, 9.5) == [("rare", "mid"), ("rare", "common"), ("rare", "often")]
    assert reaching_sets(tuple(bounds), bounds, 6.5) == [("rare",), ("mid", "common"), ("mid", "often")]
    assert reaching_sets(tuple(bounds), bounds, 20.0) == []


def test_a_query_repeating_its_terms_is_pruned_as_exactly_as_one_that_does_not(zipf_store: Settings) -> None:
    rng = random.Random(11)
    answered = 0
    with Reader(zipf_store) as reader:
        for text in _queries(9, 200):
            words = text.split()
            repeated = " ".join(words + rng.choices(words, k=rng.randint(1, 4)))  # some terms weigh 2-5 times
            expression = build_query(repeated).expression
            assert expression.count(" OR ") + 1 > len(words)
            for limit in (5, 50):
                full = [(int(r[0]), float(r[1])) for r in reader.conn.execute(FULL, (expression, limit))]
                found = exact_top_k(reader.conn, build_query(repeated), limit, WEIGHTS)
                assert found is None or found == full, (repeated, limit)
                answered += found is not None
    assert answered > 20  # the pruned path answered many of them (the rest it leaves to the full query)
