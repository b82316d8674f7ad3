"""Every lexical strategy against plain FTS5 on the same corpora: whatever it answers as proven exact is FTS5's
top k of the full query, the same ids and bit-equal scores, repeated words included (one suite run across every
strategy, as dramatiq runs one suite across its brokers)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from config.settings import Settings
from query.lexical import STRATEGIES, shaping
from query.lexical.plan import Request, TopK
from query.lexical.stats import LexicalStats
from query.reader import Reader
from query.terms import build_query
from tests.query.stores import end_run, store_settings, with_columns, zipf_docs

WORDS = [f"w{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(300)]
FULL = ("SELECT rowid, bm25(chunks_fts, 1.0, 2.0) AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
        " ORDER BY score, rowid LIMIT ?")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A Zipf corpus with impact lists and posting columns (made for a small store)."""
    settings = store_settings(Path(tmp_path_factory.mktemp("parity")))
    end_run(settings, zipf_docs(WORDS, 7, 120))
    return with_columns(settings)


def _queries() -> list[str]:
    rng = random.Random(11)
    plain = [" ".join(rng.sample(WORDS[:150], rng.randint(1, 4))) for _ in range(60)]
    common = [" ".join(rng.sample(WORDS[:4], rng.randint(1, 3))) for _ in range(15)]
    mixed = [" ".join([*rng.sample(WORDS[:4], 1), *rng.sample(WORDS[20:200], rng.randint(1, 2))]) for _ in range(25)]
    repeated = [" ".join(w for w in rng.sample(WORDS[:120], rng.randint(1, 3)) for _ in range(rng.randint(1, 4)))
                for _ in range(40)]
    return [*plain, *common, *mixed, *repeated, f"{WORDS[0]} {WORDS[0]} {WORDS[0]} {WORDS[1]}"]


@pytest.mark.parametrize("strategy", STRATEGIES, ids=[s.name for s in STRATEGIES])
def test_every_strategy_answers_as_plain_fts5(corpus: Settings, strategy: TopK,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shaping, "SHAPE_ABOVE", 0)  # a small store: shape whatever the common terms hold
    served = 0
    with Reader(corpus) as reader:
        stats = LexicalStats()
        for text in _queries():
            for limit in (10, 50):
                query = build_query(text)
                request = Request(reader.conn, query, limit, None, stats, unproven=False)
                plan = strategy.plan(request)
                if plan is None:
                    continue
                assert plan.exact, (strategy.name, text)  # nothing inexact is planned where it is not permitted
                answer = plan.run(request)
                if answer is None:
                    continue
                served += 1
                expected = [(int(r[0]), float(r[1])) for r in reader.conn.execute(FULL, (query.expression, limit))]
                assert answer.exact and answer.rows == expected, (strategy.name, text, limit)
    assert served >= 10, strategy.name  # each strategy proves itself on this corpus, not only declines
