"""The posting columns answer a keyword query with FTS5's own top k, score for score, before and after the
store changes under them (rows written and deleted since they were made)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from config.settings import Settings
from pipeline import postings
from pipeline.store import Store
from query.filters import Allowed
from query.lexical import search_ids
from query.lexical.posting_columns import postings_top_k
from query.reader import Reader
from query.terms import build_query
from tests.query.stores import build_store, store_settings, zipf_docs

WORDS = [f"w{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(400)]
FULL = ("SELECT rowid, bm25(chunks_fts, 1.0, 2.0) AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
        " ORDER BY score, rowid LIMIT ?")
LEAST = 40  # the columns hold the terms of at least this many rows (a small store's version of POSTINGS_FROM)


def _make_columns(settings: Settings) -> None:
    store = Store(settings.db_path)
    try:
        with store.transaction() as conn:
            assert postings.refresh(conn, force=True, least=LEAST, min_rows=1)
    finally:
        store.close()


@pytest.fixture
def columns_store(tmp_path: Path) -> Settings:
    settings = build_store(store_settings(tmp_path), zipf_docs(WORDS, 3, 120))
    _make_columns(settings)
    return settings


def _queries(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    repeated = [" ".join(w for w in rng.sample(WORDS[2:200], 2) for _ in range(rng.randint(1, 3)))
                for _ in range(n // 4)]
    return [" ".join(rng.sample(WORDS[2:200], rng.randint(1, 4))) for _ in range(n)] + repeated + [
        f"{WORDS[5]} {WORDS[5]} {WORDS[90]}", f"{WORDS[30]} {WORDS[399]}", f"{WORDS[5]} {WORDS[5]} {WORDS[5]}"]


def _agree(settings: Settings, queries: list[str], limit: int = 10) -> int:
    """How many queries the columns served; each served one equals FTS5's full query bit for bit."""
    served = 0
    with Reader(settings) as reader:
        for text in queries:
            query = build_query(text)
            found = postings_top_k(reader.conn, query, limit)
            if found is None:
                continue
            served += 1
            expected = [(int(r[0]), float(r[1])) for r in reader.conn.execute(FULL, (query.expression, limit))]
            assert found.exact and found.rows == expected, text
    return served


def test_a_keyword_query_gets_fts5s_top_k_to_the_bit_from_the_columns(columns_store: Settings) -> None:
    queries = _queries(1, 120)
    assert _agree(columns_store, queries) >= 100


def test_rows_written_and_deleted_since_the_columns_were_made_are_answered_as_fts5_answers(
        columns_store: Settings) -> None:
    store = Store(columns_store.db_path)
    try:
        assert store.remove([f"docs/{d}.md" for d in range(0, 120, 30)])  # some of the columns' rows go (3%)
    finally:
        store.close()
    build_store(columns_store, {f"docs/new-{d}.md": text for d, text in zipf_docs(WORDS, 9, 12).items()})
    with Reader(columns_store) as reader:
        assert reader.conn.execute("SELECT count(*) FROM lexical_gone").fetchone()[0] > 0
    assert _agree(columns_store, _queries(2, 80)) >= 60


def test_chunk_ids_are_never_given_twice_so_the_rows_above_a_stamp_are_the_new_ones(tmp_path: Path) -> None:
    settings = build_store(store_settings(tmp_path), {"docs/a.md": "# A\n\nalpha\n", "docs/b.md": "# B\n\nbeta\n"})
    with Reader(settings) as reader:
        top = reader.conn.execute("SELECT max(id) FROM chunks").fetchone()[0]
    store = Store(settings.db_path)
    try:
        store.remove(["docs/b.md"])  # the highest ids leave
    finally:
        store.close()
    build_store(settings, {"docs/c.md": "# C\n\ngamma\n"})
    with Reader(settings) as reader:
        (low,) = reader.conn.execute("SELECT min(c.id) FROM chunks c JOIN documents d ON d.id = c.document_id"
                                     " WHERE d.path = 'docs/c.md'").fetchone()
    assert low > top


def test_a_query_of_rare_words_or_an_excluded_word_is_left_to_fts5(columns_store: Settings) -> None:
    with Reader(columns_store) as reader:
        assert postings_top_k(reader.conn, build_query(f"{WORDS[399]} {WORDS[398]}"), 10) is None
        assert postings_top_k(reader.conn, build_query(f"{WORDS[20]} -{WORDS[21]}"), 10) is None


def test_the_lexical_tier_ranks_through_the_columns_as_through_fts5(columns_store: Settings) -> None:
    with Reader(columns_store) as reader:
        rng = random.Random(3)
        for text in [" ".join(rng.sample(WORDS[20:200], rng.randint(1, 4))) for _ in range(30)]:
            query = build_query(text)
            expected = [(int(r[0]), float(r[1])) for r in reader.conn.execute(FULL, (query.expression, 50))]
            assert search_ids(reader.conn, query, 50) == expected, text


def test_a_span_of_chunk_ids_keeps_its_rows_with_the_whole_tables_idfs_as_fts5_keeps_them(
        columns_store: Settings) -> None:
    with Reader(columns_store) as reader:
        top = int(reader.conn.execute("SELECT max(id) FROM chunks").fetchone()[0])
        served = 0
        for n, text in enumerate(_queries(4, 40)):
            low, high = (n * 37) % (top // 2), (n * 37) % (top // 2) + top // 3
            query = build_query(text)
            found = postings_top_k(reader.conn, query, 10, Allowed("[]", 0, low, high, dense=True))
            if found is None:
                continue
            served += 1
            expected = [(int(r[0]), float(r[1])) for r in reader.conn.execute(
                "SELECT rowid, bm25(chunks_fts, 1.0, 2.0) AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
                " AND rowid BETWEEN ? AND ? ORDER BY score, rowid LIMIT 10", (query.expression, low, high))]
            assert found.rows == expected, (text, low, high)
        assert served >= 30


def test_a_query_with_words_most_sections_hold_is_answered_with_their_scores_too(columns_store: Settings) -> None:
    rng = random.Random(5)
    with Reader(columns_store) as reader:
        for _ in range(40):
            text = " ".join([*rng.sample(WORDS[:3], rng.randint(1, 2)), *rng.sample(WORDS[10:200], rng.randint(1, 2))])
            query = build_query(text)
            expected = [(int(r[0]), float(r[1])) for r in reader.conn.execute(FULL, (query.expression, 50))]
            assert search_ids(reader.conn, query, 50) == expected, text


def test_a_store_whose_column_tables_are_gone_is_searched_through_fts5(columns_store: Settings) -> None:
    from pipeline import db, schema

    conn = db.open_writer(columns_store.db_path)
    try:
        conn.execute(f"DROP TABLE {schema.POSTINGS}")  # the fault: the stamp says columns, the table is gone
    finally:
        conn.close()
    with Reader(columns_store) as reader:
        query = build_query(f"{WORDS[30]} {WORDS[40]}")
        assert postings_top_k(reader.conn, query, 10) is None
        expected = [(int(r[0]), float(r[1])) for r in reader.conn.execute(FULL, (query.expression, 10))]
        assert search_ids(reader.conn, query, 10) == expected


def test_columns_a_re_index_has_outdated_leave_its_queries_to_fts5_until_the_run_ends(columns_store: Settings) -> None:
    build_store(columns_store, {path: text + "\nrewritten\n" for path, text in zipf_docs(WORDS, 3, 120).items()
                                if int(path.split("/")[1].split(".")[0]) < 20})  # a sixth of the rows rewritten
    with Reader(columns_store) as reader:
        query = build_query(f"{WORDS[30]} {WORDS[40]}")
        assert postings_top_k(reader.conn, query, 10) is None
        expected = [(int(r[0]), float(r[1])) for r in reader.conn.execute(FULL, (query.expression, 10))]
        assert search_ids(reader.conn, query, 10) == expected


@pytest.mark.parametrize("path", ["docs/1*.md", "*7*"])
def test_a_filter_keeps_its_documents_rows_whether_they_are_one_span_or_scattered(
        columns_store: Settings, path: str) -> None:
    from query.filters import Filter

    with Reader(columns_store) as reader:
        allowed = Filter.of(paths=[path]).allowed(reader.conn)
        assert allowed is not None and not allowed.empty
        only, args = allowed.rows()
        served = 0
        for text in _queries(6, 30):
            query = build_query(text)
            found = postings_top_k(reader.conn, query, 10, allowed)
            if found is None:
                continue
            served += 1
            expected = [(int(r[0]), float(r[1])) for r in reader.conn.execute(
                "SELECT rowid, bm25(chunks_fts, 1.0, 2.0) AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
                f"{only} ORDER BY score, rowid LIMIT 10", (query.expression, *args))]
            assert found.rows == expected, (text, path)
        assert served >= 20
