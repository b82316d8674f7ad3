"""check and rebuild on a real store: each kind of damage is found, repaired where the truth is in chunks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from config.errors import StoreDamaged
from config.settings import Settings
from pipeline import db, integrity, repair, schema
from pipeline.store import Store, compact, reset
from tests.conftest import damage_store
from tests.query.stores import DOCS, build_store, store_settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return build_store(store_settings(tmp_path), DOCS | {"docs/cjk.md": "# 東京\n\n東京の天気は晴れです。\n"})


def damage(settings: Settings, *statements: str) -> None:
    damage_store(settings.db_path, *statements)


def garble(path: Path, size: int = 64 * 1024) -> None:
    """Write `size` bytes of garbage into the middle of the file."""
    length = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.seek(max(4096, length // 2 - size // 2))
        handle.write(os.urandom(size))


def areas(report: integrity.Report) -> set[tuple[str, str]]:
    return {(f.area, f.where) for f in report.findings}


def test_a_sound_store_passes_every_check(settings: Settings) -> None:
    report = integrity.check_store(settings.db_path)
    assert report.ok and report.complete
    assert [s.name for s in report.steps] == ["file", "schema", "chunks", "fts", "vocabulary", "vectors"]
    full = integrity.check_store(settings.db_path, full=True)
    assert full.ok and "integrity_check" in full.steps[0].detail


def test_an_emptied_fts_index_is_found_and_rebuilt_from_chunks(settings: Settings) -> None:
    damage(settings, "INSERT INTO chunks_fts(chunks_fts) VALUES('delete-all')")
    report = integrity.check_store(settings.db_path)
    assert areas(report) == {("fts", "chunks_fts")} and not report.file_damaged
    repaired = repair.rebuild_store(settings.db_path)
    assert repaired.after.ok and integrity.check_store(settings.db_path).ok


def test_fts_drift_the_row_count_misses_is_found_by_the_content_cross_check(settings: Settings) -> None:
    damage(settings, "DROP TRIGGER chunks_au", "UPDATE chunks SET body = 'rewritten words only' WHERE id = 1")
    report = integrity.check_store(settings.db_path)
    assert ("fts", "chunks_fts") in areas(report) and ("schema", "chunks_au") in areas(report)
    assert repair.rebuild_store(settings.db_path).after.ok


def test_corrupt_fts_segments_are_index_damage_that_rebuild_repairs_not_file_damage(settings: Settings) -> None:
    damage(settings, "UPDATE chunks_fts_data SET block = randomblob(length(block)) WHERE id > 10")
    report = integrity.check_store(settings.db_path)
    assert ("fts", "chunks_fts") in areas(report) and not report.file_damaged
    assert repair.rebuild_store(settings.db_path).after.ok


def test_a_dropped_trigger_is_found_and_recreated(settings: Settings) -> None:
    damage(settings, "DROP TRIGGER chunks_ad")
    assert areas(integrity.check_store(settings.db_path)) == {("schema", "chunks_ad")}
    with pytest.raises(StoreDamaged, match=r"trigger chunks_ad is missing.*knowledge rebuild"):
        Store(settings.db_path)  # a writer would leave FTS ghosts: it refuses
    repaired = repair.rebuild_store(settings.db_path)
    assert any("chunks_ad" in a for a in repaired.actions) and repaired.after.ok
    store = Store(settings.db_path)
    store.remove(["docs/api.md"])
    store.close()
    assert integrity.check_store(settings.db_path).ok


def test_a_dropped_fts_table_and_orphan_chunks_are_repaired(settings: Settings) -> None:
    damage(settings, "PRAGMA foreign_keys = OFF", "DROP TABLE chunks_fts_cjk",
           "DELETE FROM documents WHERE path = 'notes.md'")
    found = areas(integrity.check_store(settings.db_path))
    assert ("schema", "chunks_fts_cjk") in found and ("chunks", "chunks") in found
    repaired = repair.rebuild_store(settings.db_path)
    assert repaired.after.ok, repaired.after.findings


def test_garbage_in_the_file_is_reported_as_file_damage_that_rebuild_will_not_pretend_to_fix(
    settings: Settings,
) -> None:
    build_store(settings, {f"bulk/{i}.md": f"# Bulk {i}\n\n" + f"filler text number {i} " * 400 for i in range(60)})
    garble(settings.db_path)
    report = integrity.check_store(settings.db_path)
    assert not report.ok and report.file_damaged
    with pytest.raises(StoreDamaged, match=r"itself is damaged.*knowledge reset --force.*knowledge index"):
        repair.rebuild_store(settings.db_path)


def test_reset_leaves_an_empty_store_with_its_schema_and_counts_what_it_removed(settings: Settings) -> None:
    conn = db.connect_readonly(settings.db_path)
    chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    conn.close()
    emptied = reset(settings.db_path)
    assert (emptied.documents, emptied.chunks, emptied.existed) == (6, chunks, True)
    store = Store(settings.db_path)
    assert store.document_count() == 0
    store.close()
    assert integrity.check_store(settings.db_path).ok


def test_reset_of_a_damaged_file_still_leaves_a_usable_store(settings: Settings) -> None:
    settings.db_path.write_bytes(b"not a database at all" * 1000)
    emptied = reset(settings.db_path)
    assert emptied.existed and emptied.documents is None
    assert integrity.check_store(settings.db_path).ok


def test_reset_refuses_a_symlink_at_the_store_path_and_leaves_it(tmp_path: Path) -> None:
    settings = store_settings(tmp_path / "a")
    target = tmp_path / "elsewhere.db"
    target.write_bytes(b"precious")
    settings.db_path.parent.mkdir(parents=True)
    settings.db_path.symlink_to(target)
    with pytest.raises(Exception, match="symlink"):
        reset(settings.db_path)
    assert settings.db_path.is_symlink() and target.read_bytes() == b"precious"


BULK = {f"bulk/{i}.md": f"# Bulk {i}\n\n" + f"word{i} filler text {i} " * 300 for i in range(80)}


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def test_removing_most_documents_gives_the_space_back_by_itself(tmp_path: Path) -> None:
    settings = build_store(store_settings(tmp_path), BULK)
    before = size(settings.db_path)
    store = Store(settings.db_path)
    assert store.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # INCREMENTAL from creation
    store.remove([f"bulk/{i}.md" for i in range(72)])
    store.close()
    assert size(settings.db_path) < before / 3
    assert integrity.check_store(settings.db_path).ok


def test_compact_converts_an_older_store_and_gives_its_space_back(tmp_path: Path) -> None:
    settings = store_settings(tmp_path)
    conn = db.open_writer(settings.db_path)  # a store created before auto_vacuum: NONE
    conn.execute("BEGIN IMMEDIATE")
    schema.ensure(conn)
    conn.execute("INSERT INTO meta(key, value) VALUES ('format_version', ?)", (str(schema.FORMAT_VERSION),))
    conn.execute("COMMIT")
    conn.close()
    build_store(settings, BULK)
    before = size(settings.db_path)
    store = Store(settings.db_path)
    store.remove([f"bulk/{i}.md" for i in range(72)])
    assert store.reclaim() is False  # merged, but the free pages stay in the file
    store.close()
    assert size(settings.db_path) > before / 2
    _, after = compact(settings.db_path)
    assert after < before / 3
    store = Store(settings.db_path)
    assert store.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    store.close()
    assert integrity.check_store(settings.db_path).ok
