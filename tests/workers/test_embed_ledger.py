"""The embedding backlog contract, the same for InMemoryLedger and RedisLedger (real Redis)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from workers.ledger import InMemoryLedger
from workers.redis_ledger import RedisLedger

V1, V2, V3 = b"\x00\x00\x80?" * 2, b"\x00\x00\x00@" * 2, b"\x00\x00@@" * 2


@pytest.fixture(params=["memory", "redis"])
def ledger(request: pytest.FixtureRequest) -> Iterator[object]:
    """Each ledger implementation in turn (Redis on a fresh namespace)."""
    if request.param == "memory":
        yield InMemoryLedger()
        return
    client: redis.Redis = request.getfixturevalue("redis_client")
    namespace: str = request.getfixturevalue("redis_namespace")
    yield RedisLedger(client, namespace)


def items(doc: str, *ordinals: int) -> list[list[object]]:
    return [[doc, f"docs/{doc}.md", o, f"text {doc} {o}"] for o in ordinals]


def test_queued_items_get_consecutive_positions_once_per_ingest_key(ledger) -> None:
    ledger.start("r1", {})
    assert ledger.queue_embeds("r1", "b-1", items("d1", 0, 1, 2)) == [0, 1, 2]
    assert ledger.queue_embeds("r1", "b-2", items("d2", 0) + items("d3", 4)) == [3, 4]
    assert ledger.queue_embeds("r1", "b-1", items("d1", 0, 1, 2)) == [0, 1, 2]  # a redelivery appends nothing
    assert ledger.queue_embeds("r1", "b-1", []) == [0, 1, 2]
    assert ledger.queue_embeds("r1", "b-3", []) == []
    assert ledger.embed_items("r1", 2, 5) == [["d1", "docs/d1.md", 2, "text d1 2"], *items("d2", 0), *items("d3", 4)]
    assert ledger.embed_items("r1", 4, 9) == items("d3", 4) and ledger.embed_items("r1", 5, 9) == []


def test_all_ingests_are_done_only_after_the_expected_count(ledger) -> None:
    ledger.start("r1", {})
    ledger.queue_embeds("r1", "b-1", items("d1", 0, 1))
    assert ledger.ingest_done("r1", "b-1") == (False, 2)  # the count is not known yet
    ledger.expect_ingests("r1", 2)
    assert ledger.ingest_done("r1", "b-1") == (False, 2)  # a repeat counts once
    assert ledger.ingest_done("r1", "b-2") == (True, 2)
    assert ledger.ingest_done("r1", "b-2") == (True, 2)


def test_a_document_is_complete_only_when_every_expected_vector_is_present(ledger) -> None:
    ledger.start("r1", {})
    ledger.expect_vectors("r1", {"d1": 2, "d2": 1})
    assert ledger.put_vectors("r1", [("d1", 0, V1)], []) == []
    assert ledger.put_vectors("r1", [("d1", 0, V1)], []) == []  # presence per chunk: no counting down
    assert ledger.present_vectors("r1", [("d1", 0), ("d1", 1), ("d2", 0)]) == [True, False, False]
    assert sorted(ledger.put_vectors("r1", [("d1", 1, V2), ("d2", 0, V3)], [])) == ["d1", "d2"]
    assert ledger.put_vectors("r1", [], ["d1", "nobody"]) == ["d1"]  # a redelivery finds it complete again
    assert ledger.vectors("r1", "d1") == {0: V1, 1: V2}


def test_a_settled_document_ignores_late_vectors_and_reads_as_present(ledger) -> None:
    ledger.start("r1", {})
    ledger.expect_vectors("r1", {"d1": 1})
    ledger.put_vectors("r1", [("d1", 0, V1)], [])
    ledger.drop_vectors("r1", "d1")
    assert ledger.vectors("r1", "d1") == {}
    assert ledger.present_vectors("r1", [("d1", 0), ("d1", 5)]) == [True, True]
    assert ledger.put_vectors("r1", [("d1", 0, V2)], ["d1"]) == []
    assert ledger.vectors("r1", "d1") == {}


def test_dropping_the_backlog_frees_it(ledger) -> None:
    ledger.start("r1", {})
    ledger.queue_embeds("r1", "b-1", items("d1", 0))
    ledger.expect_vectors("r1", {"d1": 2})
    ledger.put_vectors("r1", [("d1", 0, V1)], [])
    ledger.drop_backlog("r1")
    assert ledger.embed_items("r1", 0, 64) == [] and ledger.vectors("r1", "d1") == {}
