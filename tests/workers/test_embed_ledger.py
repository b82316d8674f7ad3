"""The embedding backlog contract, the same for InMemoryLedger and RedisLedger (real Redis)."""

from __future__ import annotations

V1, V2, V3 = b"\x00\x00\x80?" * 2, b"\x00\x00\x00@" * 2, b"\x00\x00@@" * 2


def items(doc: str, *ordinals: int) -> list[list[object]]:
    return [[doc, f"docs/{doc}.md", o, f"text {doc} {o}"] for o in ordinals]


def test_queued_items_get_consecutive_positions_once_per_ingest_key(ledger) -> None:
    ledger.start("r1", {})
    assert ledger.backlog.queue_embeds("r1", "b-1", items("d1", 0, 1, 2)) == [0, 1, 2]
    assert ledger.backlog.queue_embeds("r1", "b-2", items("d2", 0) + items("d3", 4)) == [3, 4]
    assert ledger.backlog.queue_embeds("r1", "b-1", items("d1", 0, 1, 2)) == [0, 1, 2]  # a redelivery appends nothing
    assert ledger.backlog.queue_embeds("r1", "b-1", []) == [0, 1, 2]
    assert ledger.backlog.queue_embeds("r1", "b-3", []) == []
    assert ledger.backlog.embed_items("r1", 2, 5) == [["d1", "docs/d1.md", 2, "text d1 2"], *items("d2", 0),
                                                      *items("d3", 4)]
    assert ledger.backlog.embed_items("r1", 4, 9) == items("d3", 4) and ledger.backlog.embed_items("r1", 5, 9) == []


def test_all_ingests_are_done_only_after_the_expected_count(ledger) -> None:
    ledger.start("r1", {})
    ledger.backlog.queue_embeds("r1", "b-1", items("d1", 0, 1))
    assert ledger.backlog.ingest_done("r1", "b-1") == (False, 2)  # the count is not known yet
    ledger.backlog.expect_ingests("r1", 2)
    assert ledger.backlog.ingest_done("r1", "b-1") == (False, 2)  # a repeat counts once
    assert ledger.backlog.ingest_done("r1", "b-2") == (True, 2)
    assert ledger.backlog.ingest_done("r1", "b-2") == (True, 2)


def test_a_document_is_complete_only_when_every_expected_vector_is_present(ledger) -> None:
    ledger.start("r1", {})
    ledger.backlog.expect_vectors("r1", {"d1": 2, "d2": 1})
    assert ledger.backlog.put_vectors("r1", [("d1", 0, V1)], []) == []
    assert ledger.backlog.put_vectors("r1", [("d1", 0, V1)], []) == []  # presence per chunk: no counting down
    assert ledger.backlog.present_vectors("r1", [("d1", 0), ("d1", 1), ("d2", 0)]) == [True, False, False]
    assert sorted(ledger.backlog.put_vectors("r1", [("d1", 1, V2), ("d2", 0, V3)], [])) == ["d1", "d2"]
    assert ledger.backlog.put_vectors("r1", [], ["d1", "nobody"]) == ["d1"]  # a redelivery finds it complete again
    assert ledger.backlog.vectors("r1", "d1") == {0: V1, 1: V2}


def test_a_settled_document_ignores_late_vectors_and_reads_as_present(ledger) -> None:
    ledger.start("r1", {})
    ledger.backlog.expect_vectors("r1", {"d1": 1})
    ledger.backlog.put_vectors("r1", [("d1", 0, V1)], [])
    ledger.backlog.drop_vectors("r1", "d1")
    assert ledger.backlog.vectors("r1", "d1") == {}
    assert ledger.backlog.present_vectors("r1", [("d1", 0), ("d1", 5)]) == [True, True]
    assert ledger.backlog.put_vectors("r1", [("d1", 0, V2)], ["d1"]) == []
    assert ledger.backlog.vectors("r1", "d1") == {}


def test_dropping_the_backlog_frees_it(ledger) -> None:
    ledger.start("r1", {})
    ledger.backlog.queue_embeds("r1", "b-1", items("d1", 0))
    ledger.backlog.expect_vectors("r1", {"d1": 2})
    ledger.backlog.put_vectors("r1", [("d1", 0, V1)], [])
    ledger.backlog.drop_backlog("r1")
    assert ledger.backlog.embed_items("r1", 0, 64) == [] and ledger.backlog.vectors("r1", "d1") == {}


def test_the_backlog_refuses_new_chunks_over_the_limit_but_never_a_key_it_already_holds(ledger) -> None:
    ledger.start("r1", {})
    assert ledger.backlog.queue_embeds("r1", "b-1", items("d1", 0, 1, 2), limit=2) == [0, 1, 2]  # 0 pending: admitted
    assert ledger.backlog.queue_embeds("r1", "b-2", items("d2", 0), limit=2) is None  # 3 pending > 2
    assert ledger.backlog.queue_embeds("r1", "b-2", [], limit=2) == []  # nothing to add is never refused
    assert ledger.backlog.queue_embeds("r1", "b-1", items("d1", 0, 1, 2), limit=0) == [0, 1, 2]  # a redelivery
    state = ledger.backlog.backlog_state("r1", "b-1")
    assert (state.appended, state.embedded, state.pending, state.queued, state.done) == (3, 0, 3, True, False)
    assert not ledger.backlog.backlog_state("r1", "b-3").queued
    ledger.backlog.ingest_done("r1", "b-1")
    assert ledger.backlog.backlog_state("r1", "b-1").done


def test_an_embedded_batch_counts_once_and_frees_its_items(ledger) -> None:
    ledger.start("r1", {})
    ledger.backlog.queue_embeds("r1", "b-1", items("d1", 0, 1, 2, 3))
    ledger.backlog.batch_embedded("r1", 0, 2)
    ledger.backlog.batch_embedded("r1", 0, 2)  # a redelivered embed message counts nothing more
    state = ledger.backlog.backlog_state("r1", "")
    assert (state.appended, state.embedded) == (4, 2)
    assert ledger.backlog.embed_items("r1", 0, 4) == items("d1", 2, 3)
    assert ledger.backlog.queue_embeds("r1", "b-2", items("d2", 0), limit=2) == [4]  # 2 pending: admitted
    assert ledger.backlog.queue_embeds("r1", "b-3", items("d3", 0), limit=2) is None  # 3 pending: refused
    assert ledger.backlog.backlog_state("r1", "").pending == 3


def test_documents_with_every_vector_count_as_unwritten_until_settled(ledger) -> None:
    ledger.start("r1", {})
    ledger.backlog.expect_vectors("r1", {"d1": 1, "d2": 2})
    assert ledger.backlog.put_vectors("r1", [("d1", 0, V1), ("d2", 0, V2)], []) == ["d1"]
    assert ledger.backlog.put_vectors("r1", [], ["d1"]) == ["d1"]  # found complete again: still one document
    assert ledger.backlog.backlog_state("r1", "").unwritten == 1
    ledger.backlog.drop_vectors("r1", "d1")
    assert ledger.backlog.backlog_state("r1", "").unwritten == 0


def test_a_document_settled_by_a_step_killed_midway_stops_counting_as_unwritten_at_the_next_put(ledger) -> None:
    ledger.start("r1", {})
    ledger.backlog.expect_vectors("r1", {"d1": 1})
    assert ledger.backlog.put_vectors("r1", [("d1", 0, V1)], []) == ["d1"]
    ledger.store.set_add("run:r1:emb:settled", ["d1"], 60)  # drop_vectors killed after its first step
    assert ledger.backlog.backlog_state("r1", "").unwritten == 1
    assert ledger.backlog.put_vectors("r1", [("d1", 0, V2)], ["d1"]) == []
    assert ledger.backlog.backlog_state("r1", "").unwritten == 0 and ledger.backlog.vectors("r1", "d1") == {0: V1}
