"""The posting columns the writer keeps: made at the end of a run that changed enough, left by one that did
not, never for a small store, and always answering as FTS5's full query answers."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from bench.lib.corpus import generate
from config.loader import load_settings
from config.settings import Settings
from pipeline import postings, schema
from query.lexical import search_ids
from query.reader import Reader
from query.terms import build_query
from tests.query.stores import end_run, store_settings, zipf_docs

WORDS = [f"w{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(300)]
FULL = ("SELECT rowid, bm25(chunks_fts, 1.0, 2.0) AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
        " ORDER BY score, rowid LIMIT ?")


@pytest.fixture
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Columns for a store of a test's size: every term of 20 rows or more, from the first row on."""
    monkeypatch.setattr(postings, "MIN_ROWS", 1)
    monkeypatch.setattr(postings, "POSTINGS_FROM", 20)



def _stamp(settings: Settings) -> str | None:
    with Reader(settings) as reader:
        return schema.meta_value(reader.conn, schema.POSTINGS_STAMP_KEY)


def _exact(settings: Settings, texts: list[str]) -> None:
    with Reader(settings) as reader:
        for text in texts:
            query = build_query(text)
            expected = [(int(r[0]), float(r[1])) for r in reader.conn.execute(FULL, (query.expression, 20))]
            assert search_ids(reader.conn, query, 20) == expected, text


def _texts(seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(WORDS[:120], rng.randint(1, 3))) for _ in range(30)]


def test_a_run_ends_with_columns_that_a_small_change_keeps_and_a_large_one_makes_again(
        tmp_path: Path, small_thresholds: Any) -> None:
    settings = store_settings(tmp_path)
    docs = zipf_docs(WORDS, 1, 100)
    assert end_run(settings, docs)
    first = _stamp(settings)
    assert first
    assert not end_run(settings, {"docs/0.md": docs["docs/0.md"] + "\nmore wab wac\n"})  # under 5% changed
    assert _stamp(settings) == first
    _exact(settings, _texts(1))  # the rewritten page is read as written since, its old rows as gone
    assert end_run(settings, zipf_docs(WORDS, 2, 40))  # 40 of 100 pages rewritten: made again
    assert _stamp(settings) not in (None, first)
    _exact(settings, _texts(2))


def test_a_store_below_the_size_for_columns_keeps_none(tmp_path: Path) -> None:
    settings = store_settings(tmp_path)
    end_run(settings, zipf_docs(WORDS, 1, 30))
    assert not _stamp(settings)
    with Reader(settings) as reader:
        assert reader.conn.execute(f"SELECT count(*) FROM {schema.POSTINGS}").fetchone()[0] == 0


def test_an_index_run_makes_the_columns_and_search_answers_from_them_as_from_fts5(
        workdir: Path, run_cli: Any, small_thresholds: Any) -> None:
    generate(workdir / "docs", 60, seed=4)
    assert run_cli("index", "docs")[0] == 0
    settings = load_settings(None, None)
    assert _stamp(settings)
    with Reader(settings) as reader:
        words = [t for (t,) in reader.conn.execute(
            f"SELECT term FROM {schema.POSTINGS} WHERE held BETWEEN 20 AND 400 ORDER BY term") if str(t).isalpha()][:12]
    assert len(words) >= 6
    _exact(settings, [" ".join(words[i:i + 2]) for i in range(0, len(words), 2)])
    code, out, _ = run_cli("search", words[0], "--json")
    assert code == 0 and json.loads(out)["results"]
