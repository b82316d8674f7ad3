"""The store: file modes, symlink refusal, format pinning, and per-document writes kept in step with FTS."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from config.errors import StoreBusy, StoreFormatError, UnsafePathError
from pipeline import db, schema
from pipeline.chunker import chunk_text
from pipeline.lock import WriteLock
from pipeline.models import Document
from pipeline.store import Store


def _doc(path: str, text: str) -> Document:
    chunked = chunk_text(text)
    return Document(path=path, root="docs", sha256=str(hash(text)), size=len(text), mtime_ns=1,
                    title=chunked.title, chunks=chunked.chunks)


def _fts_count(store: Store, table: str, word: str) -> int:
    return store.conn.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (f'"{word}"',)).fetchone()[0]


def _integrity(store: Store) -> None:
    for table in ("chunks_fts", "chunks_fts_exact", "chunks_fts_cjk"):
        store.conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "store" / "knowledge.db")
    yield s
    s.close()


def test_the_store_directory_is_0700_and_the_file_and_sidecars_0600(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "store" / "knowledge.db"
    s = Store(path)
    s.apply(_doc("docs/a.md", "# A\n\nalpha\n"))
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    for name in ("knowledge.db", "knowledge.db-wal", "knowledge.db-shm"):
        assert stat.S_IMODE((path.parent / name).stat().st_mode) == 0o600, name
    s.close()


@pytest.mark.parametrize("target", ["knowledge.db", "knowledge.db-wal", "knowledge.db-shm"])
def test_a_symlink_at_the_file_or_a_sidecar_is_refused(tmp_path: Path, target: str) -> None:
    directory = tmp_path / "store"
    directory.mkdir(mode=0o700)
    os.symlink(tmp_path / "elsewhere", directory / target)
    with pytest.raises(UnsafePathError, match="symlink"):
        Store(directory / "knowledge.db")


def test_a_symlinked_store_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "store")
    with pytest.raises(UnsafePathError):
        Store(tmp_path / "store" / "knowledge.db")


def test_a_store_of_another_format_version_is_refused_with_the_way_forward(store: Store) -> None:
    store.conn.execute("UPDATE meta SET value = ? WHERE key = 'format_version'", (str(schema.FORMAT_VERSION + 1),))
    with pytest.raises(StoreFormatError, match="upgrade knowledge"):
        schema.check(store.conn, store.db_path)
    store.conn.execute("UPDATE meta SET value = '0' WHERE key = 'format_version'")
    with pytest.raises(StoreFormatError, match="knowledge reset --force"):
        schema.check(store.conn, store.db_path)
    store.conn.execute("DELETE FROM meta")
    with pytest.raises(StoreFormatError, match="knowledge reset --force"):
        schema.check(store.conn, store.db_path)


def test_a_changed_file_is_rechunked_and_its_old_chunks_leave_no_fts_rows(store: Store) -> None:
    assert store.apply(_doc("docs/a.md", "# Old\n\nzebra giraffe\n\n## Two\n\n数据库 more\n")) == "added"
    assert _fts_count(store, "chunks_fts", "zebra") == 1
    assert store.apply(_doc("docs/a.md", "# New\n\nokapi\n")) == "updated"
    for table, word in (("chunks_fts", "zebra"), ("chunks_fts_exact", "giraffe"), ("chunks_fts", "old"),
                        ("chunks_fts_cjk", "数据库")):
        assert _fts_count(store, table, word) == 0, (table, word)
    assert _fts_count(store, "chunks_fts", "okapi") == 1
    assert store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 1
    _integrity(store)


def test_removing_a_document_cascades_to_chunks_and_every_fts_table(store: Store) -> None:
    store.apply(_doc("docs/a.md", "# A\n\nquokka 索引数据\n"))
    assert store.remove(["docs/a.md", "docs/unknown.md"]) == ["docs/a.md"]
    assert store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0
    assert _fts_count(store, "chunks_fts", "quokka") == 0
    assert _fts_count(store, "chunks_fts_cjk", "索引数") == 0
    _integrity(store)


def _rows(store: Store) -> list[tuple]:
    return store.conn.execute("SELECT c.id, d.path, c.ordinal, c.body FROM chunks c JOIN documents d"
                              " ON d.id = c.document_id ORDER BY c.id").fetchall()


def test_a_group_writes_the_same_rows_and_ids_as_one_document_at_a_time(tmp_path: Path) -> None:
    first = [_doc("docs/a.md", "# A\n\nalpha one\n\n## A2\n\nalpha two\n"), _doc("docs/b.md", "# B\n\nbeta 数据库\n"),
             _doc("docs/c.md", "# C\n\ngamma\n\n## C2\n\ngamma two\n\n## C3\n\ngamma three\n")]
    # the second group updates the document holding the highest chunk ids, between two added ones
    second = [_doc("docs/d.md", "# D\n\ndelta\n"), _doc("docs/c.md", "# C\n\nshorter gamma\n"),
              _doc("docs/e.md", "# E\n\nepsilon\n\n## E2\n\nepsilon two\n")]
    one = Store(tmp_path / "one" / "knowledge.db")
    grouped = Store(tmp_path / "grouped" / "knowledge.db")
    try:
        assert [one.apply(d) for d in first] == grouped.apply_group(first) == ["added"] * 3
        assert [one.apply(d) for d in second] == grouped.apply_group(second) == ["added", "updated", "added"]
        assert _rows(one) == _rows(grouped)
        for word, table in (("alpha", "chunks_fts"), ("gamma", "chunks_fts_exact"), ("数据库", "chunks_fts_cjk"),
                            ("epsilon", "chunks_fts")):
            assert _fts_count(one, table, word) == _fts_count(grouped, table, word) > 0
        _integrity(grouped)
    finally:
        one.close()
        grouped.close()


def test_a_group_with_a_document_that_cannot_be_written_writes_none_of_them(store: Store) -> None:
    good = _doc("docs/a.md", "# A\n\nalpha\n")
    bad = _doc("docs/b.md", "# B\n\nbeta\n\n## Two\n\nmore\n")
    bad = replace(bad, chunks=[bad.chunks[0], bad.chunks[0]])  # one section twice: UNIQUE (document_id, ordinal)
    with pytest.raises(db.DatabaseError, match="UNIQUE"):
        store.apply_group([good, bad])
    assert store.document_count() == 0
    assert store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0
    assert _fts_count(store, "chunks_fts", "alpha") == 0
    _integrity(store)


def test_a_reader_is_read_only(store: Store) -> None:
    store.apply(_doc("docs/a.md", "# A\n\ntext\n"))
    reader = db.connect_readonly(store.db_path)
    with pytest.raises(db.DatabaseError):
        reader.execute("DELETE FROM documents")
    reader.close()


def test_a_second_writer_lock_is_refused_with_exit_code_75(tmp_path: Path) -> None:
    with WriteLock(tmp_path / "s"):
        with pytest.raises(StoreBusy) as info:
            WriteLock(tmp_path / "s").acquire()
    assert info.value.exit_code == 75
    with WriteLock(tmp_path / "s"):
        pass


def test_a_store_that_leaves_checkpoints_to_litestream_never_checkpoints_its_wal(tmp_path: Path) -> None:
    db_path = tmp_path / "store" / "knowledge.db"
    Store(db_path).close()
    reader = db.connect_readonly(db_path)  # as Litestream does: a connection of its own, so closes do not checkpoint
    writer = Store(db_path, checkpoints=False)
    try:
        assert writer.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        body = "\n\n".join(f"## Part {i}\n\n" + " ".join(f"w{i}x{j}" for j in range(400)) for i in range(40))
        for n in range(30):  # well past SQLite's 1000-page threshold of WAL
            writer.apply(_doc(f"docs/{n}.md", f"# Doc {n}\n\n{body}"))
        pages = os.path.getsize(f"{db_path}-wal") // 4096
        assert pages > 1000
        busy, log, checkpointed = writer.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert (busy, log) == (0, checkpointed) and log >= 1000  # every frame was still waiting for a checkpoint
    finally:
        writer.close()
        reader.close()
    default = Store(db_path)
    try:
        assert default.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    finally:
        default.close()
