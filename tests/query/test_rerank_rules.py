"""The reranker within the ranking's rules and under doctor: protection and diversity still hold after it,
and doctor probes the endpoint (reachable, shape, latency, a sane order) without ever failing the run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from config.loader import settings_from_mapping
from query.doctor import FAIL, NOT_CONFIGURED, OK, WARN, rerank_check
from query.serve.http_api import build_app
from tests.conftest import write_tree
from tests.embedserver import EmbedServer
from tests.lent import search
from tests.query.stores import build_store, free_port, store_settings
from tests.query.test_http_api import Running
from tests.rerankserver import RerankServer


@pytest.fixture
def reranker() -> Iterator[RerankServer]:
    with RerankServer() as running:
        yield running


def test_a_section_holding_the_identifier_stays_first_whatever_the_reranker_says(
        workdir: Path, server: EmbedServer, reranker: RerankServer, run_cli) -> None:
    write_tree(workdir, {
        "docs/retry.md": "# Retries\n\nSet retry_limit to bound how often a failed job is retried.\n",
        "docs/jobs.md": "# Jobs\n\nA failed job is retried later; the limit of retries is set per queue.\n",
        "docs/queues.md": "# Queues\n\nEach queue sets how often a failed job may be retried.\n",
        "docs/limits.md": "# Limits\n\nThe limit of a queue bounds how many jobs it holds.\n",
    })
    (workdir / "knowledge.yaml").write_text(
        f"knowledge:\n  paths: [docs]\n  embeddings:\n    base_url: {server.base_url}\n    model: hashed-bow\n",
        encoding="utf-8")
    assert run_cli("index")[0] == 0
    emb = {"base_url": server.base_url, "model": "hashed-bow", "timeout": 1}
    plain = settings_from_mapping({"paths": ["docs"], "embeddings": emb}, store_base=workdir)
    query = "how do I set retry_limit for a failed job"
    before = search(plain, query, 10)
    assert before.hits[0].path == "docs/retry.md" and before.tier.startswith("tier: hybrid")
    reranker.scoring = "reverse"  # the verbatim section was first: the reranker puts it last of the head
    rerank = {"url": reranker.tei_url}
    after = search(settings_from_mapping({"paths": ["docs"], "embeddings": emb, "rerank": rerank},
                                         store_base=workdir), query, 10, explain=True)
    assert after.hits[0].path == "docs/retry.md"  # pinned by exact-match protection, after the reranker ran
    assert after.hits[0].explain is not None and after.hits[0].explain.to_json()["stages"]["rerank"] == 0.0
    rest = [h.chunk_id for h in before.hits[1:]]
    assert [h.chunk_id for h in after.hits[1:]] == rest[::-1]  # the others follow the reranker's order
    assert "; rerank: top " in after.tier and after.tier.startswith("tier: hybrid (FTS5 + vectors, RRF)")


def test_diversity_still_spreads_what_the_reranker_puts_first(tmp_path: Path, reranker: RerankServer) -> None:
    sections = "".join(f"## Part {n}\n\nThe rotation window schedule, part {n}.\n\n" for n in range(1, 5))
    docs = {"docs/rotation.md": f"# Rotation\n\n{sections}",
            **{f"docs/other{n}.md": f"# Other {n}\n\nThe rotation of other {n} logs.\n" for n in range(1, 4)}}
    plain = build_store(store_settings(tmp_path), docs)
    settings = store_settings(tmp_path, rerank={"url": reranker.tei_url})
    answer = search(settings, "rotation window schedule", 10, explain=True)
    scored = [h for h in answer.hits if h.explain is not None and "stages" in h.explain.to_json()]
    assert len(scored) == len(answer.hits) == len(search(plain, "rotation window schedule", 10).hits)
    paths = [h.path for h in answer.hits]
    # the reranker puts the four parts (all three words) first; diversity moves the last two past the others
    assert paths[:2] == paths[5:] == ["docs/rotation.md"] * 2 and sorted(paths[2:5]) == sorted(set(docs) - {paths[0]})
    assert [h.explain.demoted for h in answer.hits if h.explain is not None] == [False] * 5 + [True] * 2


def test_doctor_probes_a_healthy_reranker_in_either_shape(tmp_path: Path, reranker: RerankServer) -> None:
    for url, shape in ((reranker.tei_url, "tei"), (reranker.cohere_url, "cohere")):
        check = rerank_check(store_settings(tmp_path, rerank={"url": url}))
        assert check.name == "rerank" and check.status == OK and not check.fatal
        assert f"{url} answered as {shape} in " in check.detail
        assert "for 3 texts (budget 800 ms for up to 30)" in check.detail


def test_doctor_warns_of_a_reranker_slower_than_the_budget_or_with_a_senseless_order(
        tmp_path: Path, reranker: RerankServer) -> None:
    reranker.slow = 0.3
    slow = rerank_check(store_settings(tmp_path, rerank={"url": reranker.tei_url, "budget_ms": 100}))
    assert slow.status == WARN and slow.detail.endswith("slower than the budget, so searches will skip it")
    reranker.slow, reranker.scoring = 0.0, "reverse"
    senseless = rerank_check(store_settings(tmp_path, rerank={"url": reranker.tei_url}))
    assert senseless.status == WARN and "is the endpoint serving a reranking model?" in senseless.detail


def test_doctor_fails_an_unreachable_or_garbling_reranker_without_failing_the_run(
        tmp_path: Path, reranker: RerankServer, workdir: Path, run_cli) -> None:
    absent = rerank_check(store_settings(tmp_path, rerank={"url": f"http://127.0.0.1:{free_port()}/rerank"}))
    assert absent.status == FAIL and not absent.fatal and "cannot reach" in absent.detail
    reranker.garbage = "nan"
    garbled = rerank_check(store_settings(tmp_path, rerank={"url": reranker.tei_url}))
    assert garbled.status == FAIL and "not a finite number" in garbled.detail
    assert rerank_check(store_settings(tmp_path)).status == NOT_CONFIGURED
    (workdir / "knowledge.yaml").write_text(
        f"knowledge:\n  rerank:\n    url: http://127.0.0.1:{free_port()}/rerank\n", encoding="utf-8")
    code, out, _ = run_cli("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert code == 0 and checks["rerank"]["status"] == FAIL and checks["rerank"]["fatal"] is False


def test_v1_search_carries_the_reranked_order_and_says_when_it_was_skipped(tmp_path: Path,
                                                                         reranker: RerankServer) -> None:
    docs = {f"docs/{n}.md": f"# Page {n}\n\nThe retention of item {n} is set per bucket.\n" for n in range(1, 6)}
    plain = build_store(store_settings(tmp_path), docs)
    before = [h.path for h in search(plain, "retention bucket", 5).hits]
    reranker.scoring = "reverse"
    settings = store_settings(tmp_path, rerank={"url": reranker.cohere_url, "model": "loopback", "budget_ms": 200},
                              expose={"mcp": {"builtins": ["knowledge_search"]}})
    with Running(build_app(settings, "127.0.0.1", None, warn=lambda m: None)) as url:
        answer = httpx.get(f"{url}/v1/search", params={"q": "retention bucket", "explain": "true"}, timeout=10).json()
        assert [r["path"] for r in answer["results"]] == before[::-1]
        assert [r["explain"]["stages"]["rerank"] for r in answer["results"]] == [4.0, 3.0, 2.0, 1.0, 0.0]
        assert answer["rerank"]["status"] == "reranked" and "; rerank: top 5 by loopback (cohere, " in answer["tier"]
        reranker.slow = 1.0
        skipped = httpx.get(f"{url}/v1/search", params={"q": "retention bucket"}, timeout=10).json()
        assert [r["path"] for r in skipped["results"]] == before
        assert skipped["tier"].endswith("; rerank skipped: timeout after 200 ms")
        assert skipped["rerank"]["kind"] == "timeout" and "these results keep the fused order" in skipped["note"]
