"""A word the query repeats weighs that many times on every lexical path, as docs/ranking.md says: each
strategy's answer to `alpha alpha alpha beta` is FTS5's answer to that expression, row for row and score for
score, never the answer to `alpha beta`."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.settings import Settings
from pipeline import schema
from query.lexical import COLUMN_WEIGHTS, WEIGHTS, search_ids, shaping
from query.lexical.impact_lists import common_top_k
from query.lexical.posting_columns import postings_top_k
from query.lexical.pruning import exact_top_k
from query.reader import Reader
from query.terms import build_query
from tests.pipeline.test_impacts import _docs
from tests.query.stores import end_run, store_settings, with_columns

FULL = ("SELECT rowid, bm25(chunks_fts, 1.0, 2.0) AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
        " ORDER BY score, rowid LIMIT ?")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setattr(shaping, "SHAPE_ABOVE", 0)  # a small store: shape whatever the common terms hold
    settings = store_settings(tmp_path)
    end_run(settings, _docs(1, 150))
    return with_columns(settings)


def _full(reader: Reader, text: str, limit: int) -> list[tuple[int, float]]:
    return [(int(r[0]), float(r[1])) for r in reader.conn.execute(FULL, (build_query(text).expression, limit))]


def _listed_terms(reader: Reader) -> list[str]:
    return sorted(str(t) for (t,) in reader.conn.execute(f"SELECT term FROM {schema.IMPACT_FLOORS}"))


def test_the_impact_lists_weigh_a_repeated_word_as_often_as_it_is_written(store: Settings) -> None:
    with Reader(store) as reader:
        a, b, c = _listed_terms(reader)[:3]
        for text in (f"{a} {a} {a} {b}", f"{a} {a}", f"{b} {a} {b} {c} {c} {c}", f"{c} {c} {c} {c}"):
            for limit in (1, 10, 50):
                found = common_top_k(reader.conn, build_query(text), limit, COLUMN_WEIGHTS)
                assert found is not None, text
                assert found.rows == _full(reader, text, limit), (text, limit)
        assert _full(reader, f"{a} {a} {a} {b}", 10) != _full(reader, f"{a} {b}", 10)  # the repeat matters here


def test_shaping_weighs_a_repeated_word_in_the_candidates_and_the_bound(store: Settings) -> None:
    with Reader(store) as reader:
        common = _listed_terms(reader)[:2]
        served = 0
        for rare in ("wbb", "wcc", "wdd", "wee", "wff"):
            for text in (f"{common[0]} {common[0]} {rare}", f"{rare} {rare} {rare} {common[1]}",
                         f"{common[0]} {rare} {rare} {common[1]} {common[1]}"):
                shaped = shaping.shaped_top_k(reader.conn, build_query(text), 10, COLUMN_WEIGHTS)
                if shaped is None:
                    continue
                served += 1
                if shaped.exact:
                    assert shaped.rows == _full(reader, text, 10), text
                else:  # unproven: still each row's own score under the repeated expression
                    expression = build_query(text).expression
                    for cid, value in shaped.rows:
                        assert reader.conn.execute(
                            "SELECT bm25(chunks_fts, 1.0, 2.0) FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid = ?",
                            (expression, cid)).fetchone()[0] == value, text
        assert served >= 5


def test_the_pruned_plan_and_the_columns_weigh_a_repeated_word(store: Settings) -> None:
    with Reader(store) as reader:
        for text in ("wab wab wab wac", "wad wae wae", "wba wba wbb wbc wbc wbc"):
            query = build_query(text)
            pruned = exact_top_k(reader.conn, query, 10, WEIGHTS)
            if pruned is not None:
                assert pruned == _full(reader, text, 10), text
            scanned = postings_top_k(reader.conn, query, 10)
            if scanned is not None:
                assert scanned.rows == _full(reader, text, 10), text


def test_the_lexical_tier_answers_a_repeated_word_as_fts5_does(store: Settings) -> None:
    with Reader(store) as reader:
        terms = _listed_terms(reader)
        texts = [f"{terms[0]} {terms[0]} {terms[0]} {terms[1]}", f"{terms[1]} {terms[1]}",
                 "wab wab wab wac", f"{terms[0]} {terms[0]} wcd", "wcd wcd wce"]
        for text in texts:
            for limit in (5, 50):
                assert search_ids(reader.conn, build_query(text), limit) == _full(reader, text, limit), (text, limit)
