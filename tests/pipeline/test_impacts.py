"""The impact lists the writer keeps: each common term's best rows by its own bm25, made again when enough changes."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from config.settings import Settings
from pipeline import db, impacts, schema
from tests.query.stores import end_run, store_settings

WORDS = [f"w{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(200)]
ONE_WORD = ("SELECT rowid, bm25(chunks_fts, 1.0, 2.0) AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
            " ORDER BY score, rowid LIMIT ?")


def _docs(seed: int, count: int = 80) -> dict[str, str]:
    rng = random.Random(seed)
    weights = [1.0 / (rank + 2) for rank in range(len(WORDS))]
    return {f"docs/{d}.md": f"# {' '.join(rng.choices(WORDS, weights, k=3))}\n\n"
            + "\n".join(f"## {' '.join(rng.choices(WORDS, weights, k=2))}\n\n"
                        f"{' '.join(rng.choices(WORDS, weights, k=rng.randint(5, 60)))}\n" for _ in range(6))
            for d in range(count)}



@pytest.fixture
def store(tmp_path: Path) -> Settings:
    settings = store_settings(tmp_path)
    assert end_run(settings, _docs(1))
    return settings


def _read(settings: Settings) -> db.Connection:
    return db.connect_readonly(settings.db_path)


def test_the_run_lists_every_common_terms_best_rows_as_a_one_word_query_ranks_them(store: Settings) -> None:
    conn = _read(store)
    try:
        rows = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
        listed = dict(conn.execute(f"SELECT term, held FROM {schema.IMPACT_FLOORS}").fetchall())
        assert listed and all(held > rows * impacts.COMMON_SHARE for held in listed.values())
        assert impacts.Stamp.parse(schema.meta_value(conn, impacts.STAMP_KEY)) == impacts.current_stamp(conn)
        for term, held in listed.items():
            full = [(int(r[0]), -float(r[1])) for r in conn.execute(ONE_WORD, (f'"{term}"', impacts.LIST_ROWS + 1))]
            stored = conn.execute(f"SELECT chunk_id, score FROM {schema.IMPACTS} WHERE term = ? ORDER BY rank",
                                  (term,)).fetchall()
            assert [(int(a), float(b)) for a, b in stored] == full, term
            floor = conn.execute(f"SELECT floor FROM {schema.IMPACT_FLOORS} WHERE term = ?", (term,)).fetchone()[0]
            assert floor == (full[-1][1] if held > impacts.LIST_ROWS else 0.0)
    finally:
        conn.close()


def test_a_small_change_keeps_the_lists_and_a_large_one_makes_them_again(store: Settings) -> None:
    conn = _read(store)
    try:
        first = schema.meta_value(conn, impacts.STAMP_KEY)
    finally:
        conn.close()
    changed = {"docs/0.md": _docs(1)["docs/0.md"] + "\nwaa waa wab\n"}  # one document of 80: under REFRESH_SHARE
    assert not end_run(store, changed)
    conn = _read(store)
    try:
        assert schema.meta_value(conn, impacts.STAMP_KEY) == first
        assert impacts.stale(conn) is False
    finally:
        conn.close()
    assert end_run(store, _docs(2))  # every document rewritten
    conn = _read(store)
    try:
        now = impacts.current_stamp(conn)
        assert now is not None and schema.meta_value(conn, impacts.STAMP_KEY) == now.text() != first
    finally:
        conn.close()
