"""The reranking stage against real loopback servers of both shapes: the order follows their scores,
a slow, failing or garbling server leaves the fused order and every surface says `rerank skipped`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from config.errors import RerankError
from config.settings import Settings
from query.rank import stages
from query.rank.parsed import parse_query
from query.rank.ranked import Context, Ranked
from query.rank.rerank import passage, rerank
from query.rank.tiers import Tiers
from query.read_index import ReadIndex
from query.reader import Hit, Reader
from query.requests import SearchRequest
from query.search import LEXICAL, search_deep, to_json
from query.service import QueryService
from tests.lent import search
from tests.query.stores import build_store, free_port, store_settings
from tests.rerankserver import GARBAGE, RerankServer, hashed_score

QUERY = "retention policy for logs"
DOCS = {
    f"docs/{name}.md": f"# {name.title()}\n\nThe retention policy for {name} {detail}.\n"
    for name, detail in (
        ("logs", "keeps logs a week"), ("backups", "keeps backups and logs a month"),
        ("audit", "keeps audit records a year"), ("metrics", "keeps metrics and their logs"),
        ("traces", "drops traces after a day"), ("events", "keeps events"),
        ("mail", "keeps mail"), ("tickets", "keeps tickets and logs forever"),
    )
}


@pytest.fixture
def reranker() -> Iterator[RerankServer]:
    with RerankServer() as running:
        yield running


@pytest.fixture
def plain(tmp_path: Path) -> Settings:
    """A lexical store of eight retention pages; settings without a reranker."""
    return build_store(store_settings(tmp_path), DOCS)


def with_rerank(base: Settings, **block: object) -> Settings:
    return store_settings(base.store_base, rerank=block)


def fused(settings: Settings, query: str = QUERY) -> list[int]:
    return [h.chunk_id for h in search(settings, query, 20).hits]


def said(hit: Hit) -> dict[str, object]:
    """What the ranking stages said about a hit in --explain (empty: none spoke)."""
    assert hit.explain is not None
    stages_said: dict[str, object] = hit.explain.to_json().get("stages", {})
    return stages_said


def test_a_tei_reranker_that_reverses_the_head_reverses_exactly_the_top_n(plain: Settings,
                                                                           reranker: RerankServer) -> None:
    reranker.scoring = "reverse"
    before = fused(plain)
    assert len(before) == 8
    response = search(with_rerank(plain, url=reranker.tei_url, top_n=5), QUERY, 20, explain=True)
    after = [h.chunk_id for h in response.hits]
    assert after == before[:5][::-1] + before[5:]
    scores = [h.score or 0.0 for h in response.hits]
    assert scores == sorted(scores, reverse=True)  # the fused scale, still higher-is-better down the list
    [sent] = reranker.requests
    assert sent.path == "/rerank" and sent.body["query"] == QUERY and set(sent.body) >= {"texts", "truncate"}
    reader = Reader(plain)
    try:
        assert sent.body["texts"] == [passage(h) for h in reader.hydrate(before[:5])]  # fused order, as embedded
    finally:
        reader.close()
    assert [said(h)["rerank"] for h in response.hits[:5]] == [4.0, 3.0, 2.0, 1.0, 0.0]
    assert all(said(h) == {} for h in response.hits[5:])
    assert re.search(r"; rerank: top 5 by 127\.0\.0\.1:\d+ \(tei, \d+ ms\)$", response.tier)
    assert response.note is None


def test_a_cohere_reranker_permutes_the_head_by_its_scores(plain: Settings, reranker: RerankServer) -> None:
    reranker.scoring = "hashed"
    before = fused(plain)
    response = search(with_rerank(plain, url=reranker.cohere_url, model="bge-reranker-base"), QUERY, 20)
    reader = Reader(plain)
    try:
        texts = {h.chunk_id: passage(h) for h in reader.hydrate(before)}
    finally:
        reader.close()
    expected = sorted(before, key=lambda cid: -hashed_score(QUERY, texts[cid]))
    assert expected != before  # the permutation moves hits
    assert [h.chunk_id for h in response.hits] == expected
    [sent] = reranker.requests
    assert sent.path == "/v1/rerank"
    assert sent.body["model"] == "bge-reranker-base" and sent.body["top_n"] == 8 and len(sent.body["documents"]) == 8
    assert response.tier.endswith("; rerank: top 8 by bge-reranker-base (cohere, " + response.tier.rsplit(", ")[-1])
    assert response.rerank is not None
    assert to_json(response)["rerank"] == {**response.rerank.to_json(), "status": "reranked", "reason": None,
                                           "shape": "cohere", "reranked": 8, "top_n": 30}


def test_auto_takes_the_shape_from_the_path_and_falls_back_once_for_a_cohere_server_at_rerank(
        plain: Settings) -> None:
    with RerankServer(scoring="reverse") as cohere:
        search(with_rerank(plain, url=cohere.cohere_url), QUERY, 5)
        assert [r.path for r in cohere.requests] == ["/v1/rerank"] and "documents" in cohere.requests[0].body
    before = fused(plain)
    with RerankServer(scoring="reverse", cohere_at_rerank=True) as infinity:  # Infinity: the cohere shape at /rerank
        settings = with_rerank(plain, url=infinity.tei_url)
        index = ReadIndex(settings)  # the shape learned hangs on the read index, as a server's does
        with index.reader() as lent:
            first = search(settings, QUERY, 20, lent)
        assert [h.chunk_id for h in first.hits] == before[::-1] and "(cohere, " in first.tier
        assert ["texts" in r.body for r in infinity.requests] == [True, False]  # tei refused with 422, then cohere
        with index.reader() as lent:
            second = search(settings, QUERY, 20, lent)
        index.close()
        assert [h.chunk_id for h in second.hits] == before[::-1]
        assert ["texts" in r.body for r in infinity.requests] == [True, False, False]  # the answering shape is kept


def test_a_server_slower_than_the_budget_leaves_the_fused_order_and_says_skipped(plain: Settings,
                                                                                 reranker: RerankServer) -> None:
    reranker.scoring, reranker.slow = "reverse", 2.0
    before = fused(plain)
    response = search(with_rerank(plain, url=reranker.tei_url, budget_ms=150), QUERY, 20, explain=True)
    assert [h.chunk_id for h in response.hits] == before
    assert response.tier.endswith("; rerank skipped: timeout after 150 ms")
    assert response.note == "rerank skipped (timeout after 150 ms); these results keep the fused order"
    answer = to_json(response)["rerank"]
    assert answer["status"] == "skipped" and answer["kind"] == "timeout" and answer["reranked"] == 0
    assert all(said(h) == {} for h in response.hits)  # no reranker score was used


@pytest.mark.parametrize("garbage", GARBAGE)
def test_a_garbled_answer_leaves_the_fused_order_naming_the_fault(plain: Settings, reranker: RerankServer,
                                                                  garbage: str) -> None:
    reranker.scoring, reranker.garbage = "reverse", garbage
    before = fused(plain)
    response = search(with_rerank(plain, url=reranker.tei_url), QUERY, 20)
    assert [h.chunk_id for h in response.hits] == before
    assert response.rerank is not None and response.rerank.kind == "malformed"
    assert "; rerank skipped: malformed answer: " in response.tier
    reason = response.rerank.skipped or ""
    expected = {"short": "7 scores for 8 texts", "nan": "is nan, not a finite number",
                "out_of_range": "index 8 is out of range for 8 texts", "duplicate": "appears twice",
                "not_json": "not JSON", "not_a_list": "neither a list", "string_score": "'high', not a finite"}
    assert expected[garbage] in reason


def test_an_erroring_or_absent_server_leaves_the_fused_order(plain: Settings, reranker: RerankServer) -> None:
    before = fused(plain)
    reranker.status = 503
    failing = search(with_rerank(plain, url=reranker.tei_url), QUERY, 20)
    assert [h.chunk_id for h in failing.hits] == before and failing.rerank is not None
    assert failing.rerank.kind == "http_status" and "answered HTTP 503: " in failing.tier
    reranker.error_body = b"overloaded\x1b[31m\nfailed: forged line"
    forged = search(with_rerank(plain, url=reranker.tei_url), QUERY, 20).tier
    assert forged.endswith("answered HTTP 503: overloaded failed: forged line") and "\x1b" not in forged
    absent = search(with_rerank(plain, url=f"http://127.0.0.1:{free_port()}/rerank"), QUERY, 20)
    assert [h.chunk_id for h in absent.hits] == before and absent.rerank is not None
    assert absent.rerank.kind == "refused" and "rerank skipped: cannot reach http://127.0.0.1:" in absent.tier


def test_the_api_key_goes_in_the_authorization_header_only(plain: Settings, reranker: RerankServer,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RERANK_TEST_KEY", "s3cret-value")
    settings = with_rerank(plain, url=reranker.tei_url, api_key_env="RERANK_TEST_KEY")
    reranker.status = 401
    refused = to_json(search(settings, QUERY, 5))
    assert reranker.requests[-1].authorization == "Bearer s3cret-value"
    assert "s3cret" not in json.dumps(refused) and refused["rerank"]["kind"] == "http_status"
    reranker.status = 0
    assert search(settings, QUERY, 5).rerank.skipped is None  # type: ignore[union-attr]
    monkeypatch.delenv("RERANK_TEST_KEY")
    unset = search(settings, QUERY, 5)
    assert unset.rerank is not None and unset.rerank.kind == "config"
    assert "knowledge.rerank.api_key_env names $RERANK_TEST_KEY, which is unset or empty" in unset.tier
    assert len(reranker.requests) == 2  # nothing was sent without the key


def test_without_a_rerank_block_the_stage_is_the_identity_and_the_answer_has_no_rerank(
        plain: Settings, reranker: RerankServer) -> None:
    assert stages.STAGES.index(rerank) == stages.STAGES.index(stages.fusion) + 1  # right after fusion
    assert stages.STAGES.index(rerank) < stages.STAGES.index(stages.verbatim)  # before the rules' stages
    reader = Reader(plain)
    try:
        ranking = Ranked(Context(parse_query(QUERY), Tiers("lexical"), reader, plain), ((1, 2.0), (2, 1.0)))
        assert rerank(ranking) is ranking
    finally:
        reader.close()
    answer = to_json(search(plain, QUERY, 5))
    assert "rerank" not in answer and "rerank" not in answer["tier"]
    assert reranker.requests == []


def test_the_cli_the_tools_and_doctor_show_the_rerank_status(plain: Settings, reranker: RerankServer,
                                                             workdir: Path, run_cli) -> None:
    reranker.scoring = "reverse"
    (workdir / "knowledge.yaml").write_text(
        f"knowledge:\n  directory: {plain.store_dir}\n  rerank:\n    url: {reranker.tei_url}\n"
        "    model: loopback\n    top_n: 3\n", encoding="utf-8")
    code, out, _ = run_cli("search", "--explain", QUERY)
    assert code == 0 and re.match(r"tier: lexical .*; rerank: top 3 by loopback \(tei, \d+ ms\)\n", out)
    assert [line.rsplit(", ", 1)[-1] for line in out.splitlines() if "explain:" in line][:3] == [
        "rerank 2.0", "rerank 1.0", "rerank 0.0"]
    code, out, err = run_cli("search", "--json", QUERY)
    assert code == 0 and json.loads(out)["rerank"]["reranked"] == 3 and "rerank: top 3" in err
    tool = QueryService(store_settings(workdir, directory=str(plain.store_dir),
                                       rerank={"url": reranker.tei_url, "budget_ms": 100}))
    reranker.slow = 1.0
    shape = tool.search(SearchRequest(QUERY)).budgeted(tool.settings)
    assert shape["tier"].endswith("rerank skipped: timeout after 100 ms") and shape["rerank"]["status"] == "skipped"
    assert "rerank skipped (timeout after 100 ms); these results keep the fused order" in shape["note"]
    reranker.slow = 0.0
    code, out, _ = run_cli("doctor")
    assert code == 0 and re.search(r"rerank.*answered as tei in \d+ ms for 3 texts", out)
    code, out, _ = run_cli("stats")
    assert code == 0
    assert out.splitlines()[0] == "tier: lexical (FTS5) - no embeddings configured; rerank: loopback (top 3)"


def test_an_evaluation_ranks_through_the_reranker_and_stops_when_it_is_skipped(
        plain: Settings, reranker: RerankServer, workdir: Path, run_cli) -> None:
    reranker.scoring = "reverse"
    settings = with_rerank(plain, url=reranker.tei_url)
    reader = Reader(settings)
    try:
        deep = search_deep(settings, reader, QUERY, 20, LEXICAL)
        assert [h.chunk_id for h in deep.hits] == fused(plain)[::-1] == [h.chunk_id for h in search(
            settings, QUERY, 20).hits]  # evaluation measures what search answers, reranker included
        reranker.status = 500
        with pytest.raises(RerankError, match=r"the reranker was skipped \(.*answered HTTP 500"):
            search_deep(settings, reader, QUERY, 20, LEXICAL)
    finally:
        reader.close()
    (workdir / "knowledge.yaml").write_text(
        f"knowledge:\n  directory: {plain.store_dir}\n  rerank:\n    url: {reranker.tei_url}\n", encoding="utf-8")
    (workdir / "cases.jsonl").write_text('{"query": "retention policy", "expect": "logs"}\n', encoding="utf-8")
    code, _, err = run_cli("eval", "--cases", "cases.jsonl")
    assert code == 1 and "the reranker was skipped" in err and "budget_ms" in err
