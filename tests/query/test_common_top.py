"""Queries of common words answered from the impact lists: the full query's rows and scores while the stamp holds."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from config.settings import Settings
from pipeline import schema
from pipeline.store import Store
from query.lexical import COLUMN_WEIGHTS, search_ids
from query.lexical.frequency import frequencies, listed_counts
from query.lexical.impact_lists import common_top_k
from query.reader import Reader
from query.terms import build_query
from tests.pipeline.test_impacts import _docs
from tests.query.stores import end_run, store_settings

FULL = ("SELECT rowid, bm25(chunks_fts, 1.0, 2.0) AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
        " ORDER BY score, rowid LIMIT ?")


@pytest.fixture
def listed(tmp_path: Path) -> Settings:
    settings = store_settings(tmp_path)
    end_run(settings, _docs(1, 150))
    return settings


def _full(reader: Reader, text: str, limit: int) -> list[tuple[int, float]]:
    return [(int(r[0]), float(r[1])) for r in reader.conn.execute(FULL, (build_query(text).expression, limit))]


def _common_queries(reader: Reader, seed: int, n: int) -> list[str]:
    terms = sorted(str(t) for (t,) in reader.conn.execute(f"SELECT term FROM {schema.IMPACT_FLOORS}"))
    rng = random.Random(seed)
    repeated = [" ".join(w for w in rng.sample(terms, 2) for _ in range(rng.randint(1, 3))) for _ in range(n // 4)]
    return [*terms, *(" ".join(rng.sample(terms, rng.randint(2, 3))) for _ in range(n)), *repeated]


def test_common_word_queries_answer_as_the_full_query_row_for_row_and_score_for_score(listed: Settings) -> None:
    answered = {1: 0, 2: 0}
    with Reader(listed) as reader:
        for text in _common_queries(reader, 2, 80):
            for limit in (1, 10, 50):
                found = common_top_k(reader.conn, build_query(text), limit, COLUMN_WEIGHTS)
                if found is None:
                    continue
                assert found.exact and found.rows == _full(reader, text, limit), (text, limit)
                answered[min(2, len(text.split()))] += 1
        assert search_ids(reader.conn, build_query("waa"), 50) == _full(reader, "waa", 50)
    assert answered[1] > 5 and answered[2] > 20  # one-word lists and bounded multi-word answers both served


def test_after_a_small_run_new_rows_join_and_every_score_is_todays(listed: Settings) -> None:
    fresh = {"docs/new.md": "# waa waa waa\n\nwaa waa wab waa\n"}  # a row written after the stamp, best for waa
    assert not end_run(listed, fresh)  # too small a change to make the lists again
    with Reader(listed) as reader:
        new_ids = {int(r[0]) for r in reader.conn.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.path = 'docs/new.md'")}
        found = common_top_k(reader.conn, build_query("waa"), 10, COLUMN_WEIGHTS)
        assert found is not None and not found.exact
        assert new_ids & {cid for cid, _ in found.rows}
        expression = build_query("waa").expression
        for cid, value in found.rows:
            assert reader.conn.execute("SELECT bm25(chunks_fts, 1.0, 2.0) FROM chunks_fts WHERE chunks_fts MATCH ?"
                                       " AND rowid = ?", (expression, cid)).fetchone()[0] == value


def test_without_lists_or_with_exclusions_the_query_is_left_to_fts5(listed: Settings) -> None:
    with Reader(listed) as reader:
        assert common_top_k(reader.conn, build_query("waa -wab"), 10, COLUMN_WEIGHTS) is None
        assert common_top_k(reader.conn, build_query("waa wgr"), 10, COLUMN_WEIGHTS) is None  # a rare word
    store = Store(listed.db_path)
    try:
        with store.transaction() as conn:
            conn.execute(f"DELETE FROM {schema.IMPACT_FLOORS}")
    finally:
        store.close()
    with Reader(listed) as reader:
        assert common_top_k(reader.conn, build_query("waa"), 10, COLUMN_WEIGHTS) is None


def test_a_fresh_reader_takes_the_common_terms_counts_from_the_lists_and_they_are_the_vocabularys(
        listed: Settings) -> None:
    def vocabulary_counts(reader: Reader, terms: list[str]) -> dict[str, int]:
        return {t: int(reader.conn.execute(f"SELECT doc FROM {schema.PORTER_VOCAB} WHERE term = ?",
                                           (t,)).fetchone()[0]) for t in terms}

    with Reader(listed) as reader:
        terms = sorted(listed_counts(reader.conn))
        assert terms and {t: n for t, n in frequencies(reader.conn, tuple(terms))[1].items()} == vocabulary_counts(
            reader, terms)
    assert not end_run(listed, {"docs/new.md": "# waa\n\nwaa wab\n"})  # the stamp no longer holds
    with Reader(listed) as reader:
        assert listed_counts(reader.conn) == {}
        assert dict(frequencies(reader.conn, tuple(terms))[1]) == vocabulary_counts(reader, terms)
