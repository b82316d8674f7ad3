"""search_deep: the shipped search read past the user cap, per ranking, for evaluation."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.errors import EmbeddingError, UsageError
from config.loader import settings_from_mapping
from config.settings import Settings
from query.lexical import search_ids
from query.reader import Reader
from query.search import HYBRID, LEXICAL, VECTOR, search_deep
from query.terms import build_query
from query.vector import embed_query, knn, query_identity
from tests.conftest import write_tree
from tests.embedserver import EmbedServer
from tests.lent import search

WORDS = ["budget", "queue", "agent", "install", "retention", "policy", "worker", "endpoint"]
# 40 one-section documents that all hold "retention", so a query for it has more than 20 answers.
DOCS = {f"docs/{i:02d}.md": f"# Note {i}\n\nThe retention {WORDS[i % 8]} {WORDS[(i * 3) % 8]} rule {i}.\n"
        for i in range(40)}
QUERIES = ["retention", "budget agent", "queue worker rule", "zzqx unrelated", "policy endpoint retention"]


def hybrid_settings(base: Path, server: EmbedServer, timeout: float = 1) -> Settings:
    emb = {"base_url": server.base_url, "model": "hashed-bow", "timeout": timeout}
    return settings_from_mapping({"paths": ["docs"], "embeddings": emb}, store_base=base)


@pytest.fixture
def indexed(workdir: Path, server: EmbedServer, run_cli) -> Settings:
    write_tree(workdir, DOCS)
    settings = hybrid_settings(workdir, server)
    (workdir / "knowledge.yaml").write_text(
        f"knowledge:\n  paths: [docs]\n  embeddings:\n    base_url: {server.base_url}\n"
        "    model: hashed-bow\n    timeout: 1\n", encoding="utf-8")
    code, out, err = run_cli("index")
    assert code == 0, out + err
    return settings


@pytest.mark.parametrize("k", [1, 5, 20])
def test_up_to_the_user_cap_deep_search_returns_exactly_what_search_returns(indexed: Settings, k: int) -> None:
    lexical = settings_from_mapping({"paths": ["docs"]}, store_base=indexed.store_base)
    with Reader(indexed) as reader:
        for text in QUERIES:
            assert search_deep(indexed, reader, text, k).hits == search(indexed, text, k, reader).hits
            assert search_deep(indexed, reader, text, k, HYBRID).hits == search(indexed, text, k, reader).hits
            assert search_deep(lexical, reader, text, k).hits == search(lexical, text, k, reader).hits
            assert search_deep(indexed, reader, text, k, LEXICAL).hits == search(lexical, text, k, reader).hits


def test_deep_search_reads_past_the_user_cap_in_every_ranking(indexed: Settings) -> None:
    with Reader(indexed) as reader:
        assert len(search(indexed, "retention", 20, reader).hits) == 20
        for ranking in (LEXICAL, VECTOR, HYBRID):
            hits = search_deep(indexed, reader, "retention", 100, ranking).hits
            assert len(hits) == 40 and len({h.chunk_id for h in hits}) == 40, ranking


def test_the_forced_rankings_are_the_lexical_and_knn_orders(indexed: Settings) -> None:
    text = "queue worker rule"
    with Reader(indexed) as reader:
        lexical = [cid for cid, _ in search_ids(reader.conn, build_query(text), 100)]
        assert indexed.embeddings is not None
        identity = query_identity(indexed.embeddings, reader.meta, indexed.db_path)
        nearest = [cid for cid, _ in knn(reader.conn, embed_query(indexed.embeddings, identity, text), 100)]
        assert [h.chunk_id for h in search_deep(indexed, reader, text, 100, LEXICAL).hits] == lexical
        assert [h.chunk_id for h in search_deep(indexed, reader, text, 30, VECTOR).hits] == nearest[:30]


def test_a_vector_ranking_without_embeddings_is_a_usage_error(indexed: Settings) -> None:
    lexical = settings_from_mapping({"paths": ["docs"]}, store_base=indexed.store_base)
    with Reader(lexical) as reader:
        for ranking in (VECTOR, HYBRID, "semantic"):
            with pytest.raises(UsageError):
                search_deep(lexical, reader, "retention", 10, ranking)


def test_a_forced_ranking_raises_where_search_degrades(indexed: Settings, server: EmbedServer) -> None:
    server.faults.fail_next = 100
    with Reader(indexed) as reader:
        assert search(indexed, "retention", 5, reader).degraded is not None
        with pytest.raises(EmbeddingError):
            search_deep(indexed, reader, "retention", 10, HYBRID)
        assert search_deep(indexed, reader, "retention", 10, LEXICAL).hits
