"""The SQLite door: every connection it opens has sqlite-vec loaded, found without importing its package; the
writer's WAL is bounded and cut back by a checkpoint that waits only briefly for readers."""

from __future__ import annotations

import os
import time
from pathlib import Path

import sqlite_vec

from pipeline import db
from pipeline.store import Store


def test_the_vec_extension_is_the_one_the_sqlite_vec_package_names() -> None:
    assert os.path.normpath(db.vec_extension()) == sqlite_vec.loadable_path()


def test_a_connection_has_the_vec_functions() -> None:
    conn = db.memory_connection()
    assert conn.execute("SELECT vec_length(vec_f32('[1, 2, 3]'))").fetchone()[0] == 3


def _wal_store(tmp_path: Path, checkpoints: bool = True) -> Store:
    store = Store(tmp_path / "store" / "knowledge.db", checkpoints=checkpoints)
    with store.transaction() as conn:
        conn.execute("CREATE TABLE filler(x BLOB)")
        conn.executemany("INSERT INTO filler VALUES (zeroblob(4000))", [()] * 500)
    return store


def test_the_writer_bounds_the_wal_it_leaves_behind(tmp_path: Path) -> None:
    writer = db.open_writer(tmp_path / "store" / "knowledge.db")
    try:
        assert writer.execute("PRAGMA journal_size_limit").fetchone()[0] == db.JOURNAL_SIZE_LIMIT
    finally:
        writer.close()


def test_a_checkpoint_waits_briefly_for_a_reader_mid_read_then_truncates_the_wal_once_it_is_done(
        tmp_path: Path) -> None:
    store = _wal_store(tmp_path)
    wal = Path(f"{store.db_path}-wal")
    reader = db.connect_readonly(store.db_path)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM filler").fetchone()  # a read begun before the next commit
        with store.transaction() as conn:
            conn.execute("INSERT INTO filler VALUES (zeroblob(4000))")
        started = time.monotonic()
        assert db.checkpoint(store.conn, attempts=3, wait_ms=50) is False  # never longer than it was given
        assert time.monotonic() - started < 2 and wal.stat().st_size > 0
        reader.execute("COMMIT")  # the connection stays open, outside any read
        assert store.checkpoint() is True and wal.stat().st_size == 0
        assert reader.execute("SELECT count(*) FROM filler").fetchone()[0] == 501
        assert store.conn.execute("PRAGMA busy_timeout").fetchone()[0] == db.BUSY_TIMEOUT_MS
    finally:
        reader.close()
        store.close()


def test_a_store_left_to_litestream_is_never_checkpointed(tmp_path: Path) -> None:
    store = _wal_store(tmp_path, checkpoints=False)
    try:
        before = Path(f"{store.db_path}-wal").stat().st_size
        assert before > 0 and store.checkpoint() is False
        assert Path(f"{store.db_path}-wal").stat().st_size == before
    finally:
        store.close()
