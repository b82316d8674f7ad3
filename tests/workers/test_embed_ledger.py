"""The embedding backlog contract, the same for InMemoryLedger and RedisLedger (real Redis)."""

from __future__ import annotations

V1, V2, V3 = b"\x00\x00\x80?" * 2, b"\x00\x00\x00@" * 2, b"\x00\x00@@" * 2


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


def test_the_backlog_refuses_new_chunks_over_the_limit_but_never_a_key_it_already_holds(ledger) -> None:
    ledger.start("r1", {})
    assert ledger.queue_embeds("r1", "b-1", items("d1", 0, 1, 2), limit=2) == [0, 1, 2]  # 0 pending: admitted
    assert ledger.queue_embeds("r1", "b-2", items("d2", 0), limit=2) is None  # 3 pending > 2
    assert ledger.queue_embeds("r1", "b-2", [], limit=2) == []  # nothing to add is never refused
    assert ledger.queue_embeds("r1", "b-1", items("d1", 0, 1, 2), limit=0) == [0, 1, 2]  # a redelivery
    state = ledger.backlog_state("r1", "b-1")
    assert (state.appended, state.embedded, state.pending, state.queued, state.done) == (3, 0, 3, True, False)
    assert not ledger.backlog_state("r1", "b-3").queued
    ledger.ingest_done("r1", "b-1")
    assert ledger.backlog_state("r1", "b-1").done


def test_an_embedded_batch_counts_once_and_frees_its_items(ledger) -> None:
    ledger.start("r1", {})
    ledger.queue_embeds("r1", "b-1", items("d1", 0, 1, 2, 3))
    ledger.batch_embedded("r1", 0, 2)
    ledger.batch_embedded("r1", 0, 2)  # a redelivered embed message counts nothing more
    state = ledger.backlog_state("r1", "")
    assert (state.appended, state.embedded) == (4, 2)
    assert ledger.embed_items("r1", 0, 4) == items("d1", 2, 3)
    assert ledger.queue_embeds("r1", "b-2", items("d2", 0), limit=2) == [4]  # 2 pending: admitted
    assert ledger.queue_embeds("r1", "b-3", items("d3", 0), limit=2) is None  # 3 pending: refused
    assert ledger.backlog_state("r1", "").pending == 3


def test_documents_with_every_vector_count_as_unwritten_until_settled(ledger) -> None:
    ledger.start("r1", {})
    ledger.expect_vectors("r1", {"d1": 1, "d2": 2})
    assert ledger.put_vectors("r1", [("d1", 0, V1), ("d2", 0, V2)], []) == ["d1"]
    assert ledger.put_vectors("r1", [], ["d1"]) == ["d1"]  # found complete again: still one document
    assert ledger.backlog_state("r1", "").unwritten == 1
    ledger.drop_vectors("r1", "d1")
    assert ledger.backlog_state("r1", "").unwritten == 0


def test_parked_messages_wake_oldest_first_and_a_woken_one_parked_again_goes_first(ledger) -> None:
    ledger.start("r1", {})
    token = ledger.park("r1", "b-1", [["f1"], False], 100.0, 15.0)
    assert token  # no ticker yet: the caller starts one
    assert ledger.park("r1", "b-2", [["f2"], True], 101.0, 15.0) is None  # the ticker is recent
    assert ledger.park("r1", "b-1", [["f1"], False], 102.0, 15.0) is None  # parked once
    ledger.park("r1", "b-3", [["f3"], False], 103.0, 15.0)
    assert ledger.unpark("r1", 2, 104.0) == [[["f1"], False], [["f2"], True]]
    assert ledger.backlog_state("r1", "").woken == 2
    ledger.park("r1", "b-2", [["f2"], True], 105.0, 15.0)  # woken, refused again
    assert ledger.unpark("r1", 5, 106.0) == [[["f2"], True], [["f3"], False]]
    assert ledger.unpark("r1", 5, 107.0) == []
    assert ledger.queue_embeds("r1", "b-3", []) == []  # admitted: parked no more


def test_the_ticker_resends_stale_wakes_and_stops_when_nothing_is_parked(ledger) -> None:
    ledger.start("r1", {})
    token = ledger.park("r1", "b-1", [["f1"], False], 100.0, 15.0)
    assert ledger.tick("r1", "someone-else", 101.0, 60.0) is None  # a superseded ticker stops
    assert ledger.tick("r1", token, 101.0, 60.0) == []  # parked, nothing stale
    assert ledger.unpark("r1", 1, 102.0) == [[["f1"], False]]  # ... and the sender dies
    assert ledger.tick("r1", token, 150.0, 60.0) == []
    assert ledger.tick("r1", token, 170.0, 60.0) == [[["f1"], False]]  # stale: send it again
    assert ledger.tick("r1", token, 180.0, 60.0) == []  # woken again at 170
    ledger.queue_embeds("r1", "b-1", [])  # it arrived
    assert ledger.tick("r1", token, 190.0, 60.0) is None  # nothing parked: stop
    assert ledger.park("r1", "b-2", [["f2"], False], 191.0, 15.0)  # the next parking starts a new one


def test_dropping_the_backlog_forgets_parked_messages(ledger) -> None:
    ledger.start("r1", {})
    ledger.park("r1", "b-1", [["f1"], False], 100.0, 15.0)
    ledger.drop_backlog("r1")
    assert ledger.unpark("r1", 5, 101.0) == []


def test_the_backlog_counts_admitted_messages(ledger) -> None:
    ledger.start("r1", {})
    ledger.queue_embeds("r1", "b-1", items("d1", 0, 1))
    ledger.queue_embeds("r1", "b-2", [])
    assert ledger.queue_embeds("r1", "b-3", items("d3", 0), limit=1) is None
    assert ledger.backlog_state("r1", "").admitted == 2
