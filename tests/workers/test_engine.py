"""The in-process engine: each maintenance operation under its write lock, and a refusal while another holds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.errors import IndexNotBuilt, StoreBusy
from config.settings import Settings
from pipeline import integrity
from pipeline.lock import WriteLock
from tests.conftest import damage_store, write_tree
from tests.query.stores import DOCS, build_store, store_settings
from workers.engine import InProcessEngine, open_engine
from workers.operations import Check
from workers.run import RunRequest


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return build_store(store_settings(tmp_path), DOCS)


def stored_paths(settings: Settings) -> list[str]:
    from pipeline import db

    conn = db.connect_readonly(settings.db_path)
    try:
        return [row[0] for row in conn.execute("SELECT path FROM documents ORDER BY path")]
    finally:
        conn.close()


def test_rebuild_exits_busy_while_a_run_holds_the_lock_and_check_says_what_did_not_run(settings: Settings) -> None:
    lock = WriteLock(settings.store_dir)
    lock.acquire("a run")
    try:
        with pytest.raises(StoreBusy) as caught, open_engine(settings) as engine:
            engine.rebuild()
        assert caught.value.exit_code == 75
        with open_engine(settings) as engine:  # check goes through the engine: the lock taken only when free
            report = engine.apply(Check())
        assert not report.ok and not report.damaged and not report.complete and report.blocked == "busy"
        assert [s.name for s in report.steps if s.status == integrity.NOT_RUN] == ["fts"]
    finally:
        lock.release()


def test_every_operation_is_refused_with_75_naming_the_command_while_another_holds_the_lock(
        settings: Settings) -> None:
    lock = WriteLock(settings.store_dir)
    lock.acquire("knowledge index")
    try:
        for name, call in (("rm", lambda e: e.remove(["docs/a.md"])), ("rebuild", lambda e: e.rebuild()),
                           ("vacuum", lambda e: e.vacuum()), ("reset", lambda e: e.reset()),
                           ("vectors switch", lambda e: e.shadow_writer())):
            with pytest.raises(StoreBusy) as caught, open_engine(settings) as engine:
                call(engine)
            message = str(caught.value)
            assert caught.value.exit_code == 75 and "another writer holds the store lock" in message
            assert f"`knowledge {name}` needs the store to itself" in message
    finally:
        lock.release()
    assert stored_paths(settings) == sorted(DOCS)


def test_the_operations_change_the_store_and_release_the_lock(settings: Settings) -> None:
    victim, *rest = sorted(DOCS)
    with open_engine(settings) as engine:
        assert engine.remove([victim, "docs/never.md"]) == [victim]
    assert stored_paths(settings) == rest
    damage_store(settings.db_path, "DROP TABLE chunks_fts_cjk")
    with open_engine(settings) as engine:
        repaired = engine.rebuild()
    assert repaired.actions and repaired.after.ok and integrity.check_store(settings.db_path).ok
    with open_engine(settings) as engine:
        before, after = engine.vacuum()
    assert before > 0 and after > 0
    with open_engine(settings) as engine:
        emptied = engine.reset()
    assert (emptied.existed, emptied.documents) == (True, len(rest))
    assert stored_paths(settings) == []
    lock = WriteLock(settings.store_dir)
    lock.acquire("after")  # every engine let go of it
    lock.release()


def test_without_a_store_rm_removes_nothing_and_rebuild_and_vacuum_say_it_is_not_built(tmp_path: Path) -> None:
    settings = store_settings(tmp_path / "none")
    with open_engine(settings) as engine:
        assert engine.remove(["docs/a.md"]) == []
        for call in (engine.rebuild, engine.vacuum):
            with pytest.raises(IndexNotBuilt):
                call()
    assert not settings.store_dir.exists()  # nothing was created on the way


def test_a_reset_inside_a_running_engine_leaves_its_pipeline_writing_into_the_new_store(
        workdir: Path, make_settings) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha\n", "docs/b.md": "# B\n\nbeta\n"})
    settings = make_settings(paths=["docs"])
    with InProcessEngine(settings) as engine:
        assert engine.run(RunRequest()).counts["added"] == 2
        assert engine.reset().documents == 2
        again = engine.run(RunRequest())
    assert again.state == "complete" and again.counts["added"] == 2
    assert stored_paths(settings) == ["docs/a.md", "docs/b.md"]


@pytest.mark.redis
def test_with_a_broker_a_whole_store_operation_holds_the_run_lock_and_waits_for_no_run(settings: Settings) -> None:
    from config.errors import RunInProgress
    from config.loader import settings_from_mapping
    from tests.workers.conftest import REDIS_URL, delete_namespace, require_redis
    from workers.broker import namespace
    from workers.ledger.redis_ledger import RedisLedger

    client = require_redis()
    brokered = settings_from_mapping({"broker": {"url": REDIS_URL}}, store_base=settings.store_base)
    ledger = RedisLedger(client, namespace(brokered))
    try:
        assert ledger.run_lock.acquire("20260101-000000-abcdef") is None  # a run in progress, queued in Redis
        for call in (lambda e: e.rebuild(), lambda e: e.vacuum(), lambda e: e.reset()):
            with pytest.raises(RunInProgress, match="run 20260101-000000-abcdef is in progress") as caught, \
                    open_engine(brokered) as engine:
                call(engine)
            assert caught.value.exit_code == 75
        assert stored_paths(settings) == sorted(DOCS)
        with open_engine(brokered) as engine:  # rm needs no run lock: it is applied between a run's writes
            assert engine.remove(["docs/api.md"]) == ["docs/api.md"]
        ledger.run_lock.release("20260101-000000-abcdef")
        with open_engine(brokered) as engine:
            assert engine.reset().documents == len(DOCS) - 1
        assert ledger.run_lock.holder() is None  # the reset let go of it
        lock = WriteLock(settings.store_dir)
        lock.acquire("knowledge index")  # held, but not by a writer: refused at once, as without a broker
        try:
            with pytest.raises(StoreBusy, match="`knowledge rm` needs the store to itself"), \
                    open_engine(brokered) as engine:
                engine.remove(["docs/guide.md"])
        finally:
            lock.release()
    finally:
        delete_namespace(client, namespace(brokered))
        client.close()


def test_in_process_a_detached_run_is_a_usage_error_that_touches_nothing(tmp_path: Path) -> None:
    from config.errors import UsageError

    write_tree(tmp_path, {"docs/a.md": "# A\n\nalpha\n"})
    settings = store_settings(tmp_path / "store")
    request = RunRequest(paths=(str(tmp_path / "docs"),))
    with pytest.raises(UsageError, match="--detach needs a broker") as caught, open_engine(settings) as engine:
        engine.detach(request, request.targets(settings))
    assert caught.value.exit_code == 2 and not settings.store_dir.exists()
