"""match's document sets at scale: complete answers from kept columns, and a server's warm-up of the common words."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from config.settings import Settings
from pipeline.store import Store
from query import match_sets
from query.match_sets import common_words
from query.reader import Reader
from query.service import QueryService
from tests.lent import enumerate_documents
from tests.query.stores import build_store, store_settings

WORDS = [f"w{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(50)]


def _text(rng: random.Random, n: int) -> str:
    weights = [1.0 / (rank + 2) for rank in range(len(WORDS))]  # Zipf: a few words in most sections
    return " ".join(rng.choices(WORDS, weights, k=n))


@pytest.fixture
def zipf_store(tmp_path: Path) -> Iterator[Settings]:
    rng = random.Random(3)
    docs = {}
    for d in range(80):
        sections = [f"## {_text(rng, 2)}\n\n{_text(rng, rng.randint(3, 40))}\n" for _ in range(6)]
        docs[f"docs/{d}.md"] = f"# {_text(rng, 2)}\n\n" + "\n".join(sections)
    settings = build_store(store_settings(tmp_path), docs)
    store = Store(settings.db_path)
    try:
        store.refresh_impacts()  # a run's end lists the common words (pipeline/impacts.py)
    finally:
        store.close()
    yield settings


@pytest.fixture(params=[1, 1 << 40], ids=["numpy", "python"])
def either_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways of intersecting and tallying: numpy from the first document, or never."""
    monkeypatch.setattr(match_sets, "VECTOR_FROM", request.param)


def _reference(reader: Reader, words: list[str], excluded: list[str]) -> dict[str, tuple[int, int, int]]:
    """{path: (body matches, heading matches, first matching ordinal)} by one plain FTS5 query per word and column."""
    chunk = {int(i): (str(p), int(o)) for i, p, o in reader.conn.execute(
        "SELECT c.id, d.path, c.ordinal FROM chunks c JOIN documents d ON d.id = c.document_id")}

    def hits(word: str, column: str) -> list[tuple[str, int]]:
        expression = f'{{{column}}} : "{word}"'
        rows = reader.conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (expression,))
        return [chunk[int(r[0])] for r in rows]

    per_word: list[dict[str, list[int]]] = []
    for word in words:
        found: dict[str, list[int]] = {}
        for at, column in ((0, "body"), (1, "heading_path")):
            for path, ordinal in hits(word, column):
                tally = found.setdefault(path, [0, 0, 1 << 62])
                tally[at] += 1
                tally[2] = min(tally[2], ordinal)
        per_word.append(found)
    paths = set.intersection(*(set(f) for f in per_word))
    for word in excluded:
        paths -= {p for column in ("body", "heading_path") for p, _ in hits(word, column)}
    return {p: (sum(f[p][0] for f in per_word), sum(f[p][1] for f in per_word), min(f[p][2] for f in per_word))
            for p in paths}


@pytest.mark.parametrize("words", [["waa", "wab"], ["waa", "wab", "wac"], ["wab", "wbq"], ["waa", "wbx"]])
def test_a_match_lists_exactly_the_documents_holding_every_word_with_their_counts(zipf_store: Settings,
                                                                                  words: list[str],
                                                                                  either_path: None) -> None:
    with Reader(zipf_store) as reader:
        expected = _reference(reader, words, [])
        for _ in range(2):  # computed, then from the kept columns
            result = enumerate_documents(zipf_store, " ".join(words), None, reader=reader)
            assert {d.path: (d.body_matches, d.heading_matches, d.ordinal) for d in result.documents} == expected
            assert result.matched == len(expected)


def test_an_exclusion_and_a_limit_keep_the_answer_complete_and_its_order_by_matches_then_path(
        zipf_store: Settings, either_path: None) -> None:
    with Reader(zipf_store) as reader:
        expected = _reference(reader, ["waa"], ["wak"])
        order = sorted(expected, key=lambda p: (-expected[p][0], -expected[p][1], p))
        assert expected
        for limit in (1, 5, 17, None):
            result = enumerate_documents(zipf_store, "waa -wak", limit, reader=reader)
            assert result.matched == len(expected)
            assert [d.path for d in result.documents] == order[:limit]
        by_path = enumerate_documents(zipf_store, "waa -wak", 7, sort="path", reader=reader)
        assert [d.path for d in by_path.documents] == sorted(expected)[:7]


def test_a_servers_warm_up_keeps_the_common_words_so_its_first_match_of_them_runs_no_document_query(
        zipf_store: Settings) -> None:
    with Reader(zipf_store) as reader:
        common = common_words(reader.conn)
    assert {"waa", "wab"} <= set(common)
    service = QueryService.shared(zipf_store)
    try:
        service.warm().join(timeout=60)
        statements: list[str] = []
        with service.index.reader() as reader:  # the warm-up's columns hang on the service's ReadIndex
            assert reader is not None
            reader.conn.set_trace_callback(statements.append)
            result = enumerate_documents(zipf_store, "waa wab", None, reader=reader)
        assert result.matched > 0
        assert not [s for s in statements if "MATCH" in s]  # the documents and the reports were both kept
    finally:
        service.close()
