"""The shared query service: Readers kept across requests, never answering from a store that changed under them."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from config.errors import QueryError
from query.requests import MatchRequest, SearchRequest, ShowRequest
from query.service import KEEP_READERS, QueryService
from query.status import Status
from tests.query.stores import build_store, store_settings


@pytest.fixture
def shared(tmp_path: Path):
    settings = build_store(store_settings(tmp_path), {"docs/a.md": "# A\n\nalpha beta\n"})
    service = QueryService.shared(settings)
    try:
        yield settings, service
    finally:
        service.close()


def _paths(service: QueryService, words: str) -> list[str]:
    return [h.path for h in service.search(SearchRequest(words)).hits]


def test_a_kept_reader_serves_the_next_request(shared) -> None:
    _, service = shared
    assert _paths(service, "alpha") == ["docs/a.md"]
    kept = list(service.index._idle)
    assert len(kept) == 1
    assert service.show(ShowRequest("docs/a.md#0")).status == Status.OK
    assert [k.reader for k in service.index._idle] == [kept[0].reader]  # the same connection, not a new one


def test_a_kept_reader_sees_what_the_writer_committed_since(shared) -> None:
    settings, service = shared
    assert service.enumerate(MatchRequest("gamma")).result.matched == 0
    build_store(settings, {"docs/b.md": "# B\n\nalpha gamma\n"})
    assert service.enumerate(MatchRequest("gamma")).result.matched == 1
    assert sorted(_paths(service, "alpha")) == ["docs/a.md", "docs/b.md"]
    assert service.stats().facts["documents"] == 2


def test_a_removed_store_answers_not_built_and_a_reset_one_is_read_afresh(shared, tmp_path: Path) -> None:
    settings, service = shared
    assert _paths(service, "alpha") == ["docs/a.md"]
    shutil.rmtree(settings.db_path.parent)
    assert service.search(SearchRequest("alpha")).status == Status.INDEX_NOT_BUILT
    assert service.sources().status == Status.INDEX_NOT_BUILT
    assert not service.index._idle
    build_store(store_settings(tmp_path), {"docs/x.md": "# X\n\nalpha\n", "docs/y.md": "# Y\n\nalpha\n"})
    assert sorted(_paths(service, "alpha")) == ["docs/x.md", "docs/y.md"]
    assert [d["path"] for d in service.sources().documents] == ["docs/x.md", "docs/y.md"]


def test_a_request_that_raised_leaves_no_reader_behind(shared) -> None:
    _, service = shared
    assert service.enumerate(MatchRequest("alpha")).result.matched == 1
    with pytest.raises(QueryError):
        service.enumerate(MatchRequest("alpha OR beta"))
    assert len(service.index._idle) == 1  # a refused query leaves the connection as it was: kept
    with pytest.raises(RuntimeError), service.index.reader():
        raise RuntimeError("the request failed midway")
    assert service.index._idle == []
    assert service.enumerate(MatchRequest("alpha")).result.matched == 1


def test_concurrent_requests_each_get_their_own_reader_and_at_most_keep_are_kept(shared) -> None:
    _, service = shared
    barrier = threading.Barrier(KEEP_READERS + 2, timeout=20)
    seen: list[int] = []
    errors: list[BaseException] = []

    def request() -> None:
        try:
            with service.index.reader() as reader:
                assert reader is not None
                seen.append(id(reader))
                barrier.wait()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=request) for _ in range(KEEP_READERS + 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors and len(set(seen)) == KEEP_READERS + 2
    assert len(service.index._idle) == KEEP_READERS


def test_a_one_shot_service_keeps_nothing(tmp_path: Path) -> None:
    settings = build_store(store_settings(tmp_path), {"docs/a.md": "# A\n\nalpha beta\n"})
    service = QueryService(settings)
    assert _paths(service, "alpha") == ["docs/a.md"]
    assert service.index._idle == []


def test_an_empty_answer_checks_the_store_once_per_version_and_damage_committed_later_is_still_found(
        shared) -> None:
    from config.errors import StoreDamaged
    from pipeline import db

    settings, service = shared
    assert _paths(service, "alpha") == ["docs/a.md"]
    statements: list[str] = []
    service.index._idle[0].reader.conn.set_trace_callback(statements.append)
    for words in ("zebra", "yak", "xylophone"):  # three searches that find nothing, on the kept Reader
        answer = service.search(SearchRequest(words))
        assert answer.status == Status.OK and not answer.hits
    counted = [s for s in statements if "count(*)" in s]
    assert len([s for s in counted if "_docsize" in s]) == 1, counted  # the FTS row check: once, not per search
    assert not [s for s in counted if "FROM documents" in s], counted  # counted by the first search already
    writer = db.open_writer(settings.db_path)
    try:
        writer.execute("INSERT INTO chunks_fts(chunks_fts) VALUES('delete-all')")  # the porter index emptied
    finally:
        writer.close()
    with pytest.raises(StoreDamaged, match="chunks_fts indexes 0 of 1 sections"):
        service.search(SearchRequest("alpha"))


def test_a_warm_up_keeps_one_primed_reader_for_the_first_request(shared) -> None:
    _, service = shared
    service.warm().join(timeout=60)
    kept = [k.reader for k in service.index._idle]
    assert len(kept) == 1
    assert _paths(service, "alpha") == ["docs/a.md"]
    assert [k.reader for k in service.index._idle] == kept  # the first request was lent the warmed Reader


def test_a_request_during_the_warm_up_is_answered_not_held_or_refused(shared) -> None:
    _, service = shared
    started, release = threading.Event(), threading.Event()

    def slow_prime(reader: object) -> None:  # a warm-up that takes long: it waits for the test
        started.set()
        release.wait(timeout=60)

    warming = service.index.warm(slow_prime)
    assert started.wait(timeout=60)
    try:
        assert _paths(service, "alpha") == ["docs/a.md"]  # answered while the warm-up still holds its Reader
        assert warming.is_alive()
    finally:
        release.set()
    warming.join(timeout=60)
    assert len(service.index._idle) == 2  # the request's Reader and the warmed one are both kept


def test_what_the_read_side_keeps_hangs_on_the_read_index_and_goes_with_it(shared) -> None:
    _, service = shared
    assert service.enumerate(MatchRequest("alpha")).result.matched == 1
    with service.index.reader() as reader:
        assert reader is not None and reader.caches is service.index.caches  # every lent Reader carries them
    assert "Generations" in service.index.caches.kinds()
    service.close()
    assert service.index.caches.kinds() == []
