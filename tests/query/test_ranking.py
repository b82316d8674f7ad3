"""Hybrid ranking beyond plain RRF: document diversity in every surface, and the vector tier's feedback pass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from config.settings import Settings
from pipeline.vectors import VectorIdentity
from query import fusion
from query.feedback import FEEDBACK, moved_query, nearest_with_feedback
from query.lexical import search_ids
from query.reader import Reader
from query.search import VECTOR, search_deep, to_json
from query.serve.http_api import build_app
from query.terms import build_query
from query.vector import KNN_K, embed_query, knn, query_identity
from tests.conftest import write_tree
from tests.embedserver import EmbedServer
from tests.lent import search
from tests.query.stores import build_store, store_settings
from tests.query.test_http_api import AUTH, TOKEN, Running, get
from tests.query.test_hybrid import index_hybrid, settings_of, write_config
from tests.query.test_mcp import over_stdio, payload
from tests.query.test_mcp import write_config as write_mcp_config

BIG = "docs/retention.md"
DOCS = {
    BIG: "".join(f"## {name}\n\nRetention of {name.lower()}: the retention period and retention rules.\n\n"
                 for name in ("Logs", "Backups", "Audit", "Metrics")),
    "docs/storage.md": "# Storage\n\nBucket retention is set per bucket.\n",
    "docs/policy.md": "# Policy\n\nThe retention policy is reviewed every year by the owners.\n",
    "docs/queues.md": "# Queues\n\nMessages wait in a queue until a worker takes them.\n",
}


def paths(results: list[dict[str, Any]]) -> list[str]:
    return [r["path"] for r in results]


def assert_diverse(results: list[dict[str, Any]]) -> None:
    """Two sections of the big document, then the others, then the big document's rest (demoted, not dropped)."""
    assert paths(results)[:2] == [BIG, BIG]
    assert set(paths(results)[2:4]) == {"docs/storage.md", "docs/policy.md"}
    assert paths(results)[4:] == [BIG, BIG]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("ranking")
    return build_store(store_settings(base, expose={"mcp": {"builtins": ["knowledge_search"]}}), DOCS).store_dir


def test_one_document_cannot_fill_all_k_slots_from_the_cli_http_and_mcp(store: Path, tmp_path: Path) -> None:
    settings = store_settings(store.parent.parent, expose={"mcp": {"builtins": ["knowledge_search"]}})
    with Reader(settings) as reader:  # lexically, the big document's four sections all rank first
        lexical = search_ids(reader.conn, build_query("retention"))
        assert paths(to_json(search(settings, "retention", 6))["results"]) != paths(
            [{"path": h.path} for h in reader.hydrate([cid for cid, _ in lexical])])
        assert {h.path for h in reader.hydrate([cid for cid, _ in lexical[:4]])} == {BIG}
    found = to_json(search(settings, "retention", 6, explain=True))["results"]
    assert_diverse(found)
    assert [r["explain"]["demoted"] for r in found] == [False] * 4 + [True] * 2
    assert found[4]["score"] > found[2]["score"]  # a demoted hit keeps its own score
    assert paths(to_json(search(settings, "retention", 3))["results"]) == paths(found)[:3]  # first k of a longer list
    with Running(build_app(settings, "127.0.0.1", TOKEN, warn=lambda m: None)) as url:
        assert_diverse(get(url, "/v1/search", AUTH, q="retention", top_k=6).json()["results"])
    config = write_mcp_config(tmp_path, store, expose={"mcp": {"builtins": ["knowledge_search"]}})

    async def body(client: Client) -> dict[str, Any]:
        return payload(await client.call_tool("knowledge_search", {"query": "retention", "top_k": 6}))

    assert_diverse(over_stdio(config, body, tmp_path / "err.log")["results"])


def test_the_terminal_says_a_hit_was_demoted(store: Path, tmp_path: Path, run_cli, workdir: Path) -> None:
    (workdir / "knowledge.yaml").write_text(f"knowledge:\n  directory: {store}\n", encoding="utf-8")
    code, out, err = run_cli("search", "--explain", "--top-k", "6", "retention")
    assert code == 0, out + err
    assert out.count("demoted (its document has 2 sections above)") == 2


def test_diversify_moves_a_documents_third_section_after_the_rest_in_order() -> None:
    ranked = [(1, 0.9), (2, 0.8), (3, 0.7), (4, 0.6), (5, 0.5), (6, 0.4)]
    documents = {1: 10, 2: 10, 3: 10, 4: 20, 5: 10, 6: 30}
    assert fusion.diversify(ranked, documents) == ([(1, 0.9), (2, 0.8), (4, 0.6), (6, 0.4), (3, 0.7), (5, 0.5)],
                                                   {3, 5})
    assert fusion.diversify(ranked, documents, per_document=1)[0][:3] == [(1, 0.9), (4, 0.6), (6, 0.4)]


def test_the_diversified_top_k_is_the_full_diversity_rule_cut_at_k_reading_only_the_ranks_it_needs() -> None:
    import random

    rng = random.Random(5)
    for _ in range(400):
        ranked = [(cid, 1.0 / (i + 1)) for i, cid in enumerate(rng.sample(range(1, 500), rng.randint(0, 60)))]
        documents = {cid: rng.randint(1, rng.choice((2, 5, 40))) for cid, _ in ranked if rng.random() > 0.05}
        asked: list[int] = []

        def documents_of(ids: list[int], documents: dict[int, int] = documents,
                         asked: list[int] = asked) -> dict[int, int]:
            asked.extend(ids)
            return {cid: documents[cid] for cid in ids if cid in documents}  # a vanished chunk has no document

        k = rng.randint(1, 12)
        assert fusion.diversified_top(ranked, k, documents_of) == fusion.diversify(ranked, documents)[0][:k]
        assert len(asked) == len(set(asked))  # no chunk asked for twice
    one_document = [(cid, 1.0) for cid in range(1, 51)]
    read: list[int] = []

    def own_documents(ids: list[int]) -> dict[int, int]:
        read.extend(ids)
        return {c: c for c in ids}

    top = fusion.diversified_top([(1, 0.9), (2, 0.8), *((c, 0.5) for c in range(10, 58))], 5, own_documents)
    assert [cid for cid, _ in top] == [1, 2, 10, 11, 12] and len(read) == 5  # distinct documents: 5 ranks read
    assert fusion.diversified_top(one_document, 3, lambda ids: {c: 7 for c in ids}) == [(1, 1.0), (2, 1.0), (3, 1.0)]
    assert fusion.diversified_top([], 5, lambda ids: {}) == []


LOGS = "how long are logs kept"


def embedded(reader: Reader, settings: Settings, text: str) -> tuple[VectorIdentity, list[float]]:
    """The store's pinned identity and text's query vector under it."""
    assert settings.embeddings is not None
    identity = query_identity(settings.embeddings, reader.meta, settings.db_path)
    return identity, embed_query(settings.embeddings, identity, text)


@pytest.fixture
def hybrid(workdir: Path, server: EmbedServer, run_cli) -> Path:
    index_hybrid(workdir, server, run_cli, {**DOCS,
                                            "docs/agent.md": "# Agent\n\nThe agent keeps its logs for a week.\n",
                                            "docs/budget.md": "# Budgets\n\nA budget caps the cost of each run.\n"})
    return workdir


def test_the_hybrid_vector_tier_is_its_candidates_re_scored_by_the_query_moved_toward_its_best_fused_sections(
        hybrid: Path, server: EmbedServer) -> None:
    settings = settings_of(hybrid, server)
    text = LOGS
    with Reader(settings) as reader:
        _, query = embedded(reader, settings, text)
        lexical = [cid for cid, _ in search_ids(reader.conn, build_query(text))]
        first = knn(reader.conn, query)
        top = [cid for cid, _ in fusion.rrf([lexical, [cid for cid, _ in first]])[:FEEDBACK]]
        candidates = set(lexical) | {cid for cid, _ in first}
        moved = knn(reader.conn, moved_query(reader.conn, query, top), 1000)  # every section, by the moved query
        second = [(cid, d) for cid, d in moved if cid in candidates][:KNN_K]
        documents = reader.documents_of([cid for cid, _ in second])
    assert [d for _, d in second] != pytest.approx([d for _, d in first])  # the feedback moved the query
    server.reset()
    response = search(settings, text, 20, explain=True)
    assert server.requests == [[text]]  # one embedding call: the feedback pass reuses stored vectors
    expected, _ = fusion.diversify(fusion.rrf([lexical, [cid for cid, _ in second]]), documents)
    assert [h.chunk_id for h in response.hits] == [cid for cid, _ in expected]
    at = {cid: (rank, distance) for rank, (cid, distance) in enumerate(second, start=1)}
    for hit in response.hits:
        why = to_json(response)["results"][response.hits.index(hit)]["explain"]
        assert why["vector"]["feedback"] == FEEDBACK
        assert (why["vector"]["rank"], why["vector"]["distance"]) == (at[hit.chunk_id][0],
                                                                      pytest.approx(at[hit.chunk_id][1], abs=1e-5))
    assert "feedback 3" in response.hits[0].explain.line()  # type: ignore[union-attr]


def test_the_feedback_pass_runs_no_second_knn_it_re_scores_only_what_the_tiers_listed(
        hybrid: Path, server: EmbedServer) -> None:
    settings = settings_of(hybrid, server)
    text = LOGS
    with Reader(settings) as reader:
        identity, query = embedded(reader, settings, text)
        lexical = [cid for cid, _ in search_ids(reader.conn, build_query(text))][:1]
        first = knn(reader.conn, query, 2)
        found = nearest_with_feedback(reader.conn, identity, query, 2, lexical, set())
        assert found is not None
        listed, top = found
        every = knn(reader.conn, moved_query(reader.conn, query, top), 1000)
    candidates = set(lexical) | {cid for cid, _ in first}
    assert len(every) > len(candidates)  # sections outside both tiers exist, and the moved query ranks them
    expected = [(cid, d) for cid, d in every if cid in candidates][:2]
    assert [cid for cid, _ in listed] == [cid for cid, _ in expected]
    assert [d for _, d in listed] == pytest.approx([d for _, d in expected], abs=1e-5)
    assert {cid for cid, _ in listed} <= candidates


def test_a_forced_vector_ranking_is_the_first_pass_alone(hybrid: Path, server: EmbedServer) -> None:
    settings = settings_of(hybrid, server)
    text = LOGS
    with Reader(settings) as reader:
        first = knn(reader.conn, embedded(reader, settings, text)[1], 100)
        documents = reader.documents_of([cid for cid, _ in first])
        ranked = search_deep(settings, reader, text, 100, VECTOR)
    expected, _ = fusion.diversify([(cid, -d) for cid, d in first], documents)
    assert [h.chunk_id for h in ranked.hits] == [cid for cid, _ in expected]


def test_explain_json_of_a_hybrid_hit_names_feedback_and_demotion(hybrid: Path, server: EmbedServer,
                                                                  run_cli) -> None:
    code, out, _ = run_cli("search", "--json", "--explain", "--top-k", "10", "retention")  # every section
    results = json.loads(out)["results"]
    assert code == 0 and all(r["explain"]["vector"]["feedback"] == FEEDBACK for r in results if r["explain"]["vector"])
    assert [r["path"] for r in results].count(BIG) == 4
    assert [r["explain"]["demoted"] for r in results if r["path"] == BIG] == [False, False, True, True]


def test_sections_holding_the_identifier_are_lifted_by_the_fusion_and_diversity_still_applies_to_them(
        workdir: Path, server: EmbedServer, run_cli) -> None:
    write_tree(workdir, {"docs/settings.md": "".join(f"## {n}\n\nSet retention_days for the {n.lower()}.\n\n"
                                                     for n in ("Logs", "Backups", "Audit")),
                         "docs/other.md": "# Other\n\nRetention days are counted from midnight.\n"})
    write_config(workdir, server)
    assert run_cli("index")[0] == 0
    code, out, _ = run_cli("search", "--json", "--explain", "retention_days")
    results = json.loads(out)["results"]
    assert code == 0 and [r["path"] for r in results[:2]] == ["docs/settings.md"] * 2
    held = [r for r in results if r["path"] == "docs/settings.md"]
    assert len(held) == 3 and all(float(r["explain"]["stages"]["verbatim"]) > 0 for r in held)  # each one lifted
    assert [r["explain"]["demoted"] for r in held] == [False, False, True]  # a lift is not a pin: 2 a document
    assert all("verbatim" not in (r["explain"].get("stages") or {}) for r in results if r["path"] != "docs/settings.md")
