"""check and rebuild on a store with vectors (the loopback embeddings server): orphan and missing vectors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from config.settings import Settings
from pipeline import db, integrity, repair, schema, vector_codes, vectors
from tests.conftest import damage_store, write_tree
from tests.embedserver import EmbedServer
from tests.workers.helpers import index


@pytest.fixture
def settings(workdir: Path, make_settings: Callable[..., Settings], server: EmbedServer) -> Settings:
    write_tree(workdir, {f"docs/n{i}.md": f"# Note {i}\n\nnote {i} about topic{i % 5}\n\n## More\n\nmore {i}\n"
                         for i in range(12)})
    built = make_settings(paths=["docs"], embeddings={"base_url": server.base_url, "model": "hashed-bow",
                                                      "timeout": 2})
    assert index(built).state == "complete"
    return built


def write(settings: Settings, *statements: str) -> None:
    damage_store(settings.db_path, *statements)


def count(settings: Settings, table: str) -> int:
    conn = db.connect_readonly(settings.db_path)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def filed(settings: Settings) -> set[int]:
    conn = db.connect_readonly(settings.db_path)
    try:
        return vector_codes.filed_ids(conn)
    finally:
        conn.close()


def test_a_store_with_vectors_checks_ok(settings: Settings) -> None:
    report = integrity.check_store(settings.db_path)
    assert report.ok and report.complete
    assert count(settings, schema.VECTORS) == count(settings, "chunks") == 24


def test_an_orphan_vector_is_found_and_dropped_by_rebuild(settings: Settings) -> None:
    blob = vectors.to_blob([0.25] * 16)
    write(settings, f"INSERT INTO {schema.VECTORS}(chunk_id, embedding) VALUES (99999, X'{blob.hex()}')")
    report = integrity.check_store(settings.db_path)
    assert {(f.where, f.repair) for f in report.findings} >= {(schema.VECTORS, integrity.REBUILD)}
    repaired = repair.rebuild_store(settings.db_path)
    assert any("dropped 1 vectors" in a for a in repaired.actions)
    assert repaired.after.ok and count(settings, schema.VECTORS) == 24


def test_a_missing_vector_is_found_left_for_the_next_run_which_embeds_it(settings: Settings) -> None:
    write(settings, f"DELETE FROM {schema.VECTORS} WHERE chunk_id = (SELECT min(id) FROM chunks)")
    report = integrity.check_store(settings.db_path)
    missing = [f for f in report.findings if f.repair == integrity.INDEX]
    assert missing and "1 sections in 1 documents have no vector" in missing[0].problem
    repaired = repair.rebuild_store(settings.db_path)
    assert any("next `knowledge index`" in a for a in repaired.actions)
    assert [f.repair for f in repaired.after.findings] == [integrity.INDEX]
    assert index(settings).state == "complete"
    assert integrity.check_store(settings.db_path).ok and count(settings, schema.VECTORS) == 24


def test_companion_rows_out_of_step_are_refilled_from_the_vectors(settings: Settings) -> None:
    lists = schema.LISTS  # three entries cut from the front of a list: their vectors have no code
    write(settings, f"UPDATE {lists} SET codes = substr(codes, 1 + 3 * (length(codes) / (length(ids) / 8))),"
                    f" ids = substr(ids, 25) WHERE id = (SELECT min(id) FROM {lists})",
          f"DROP TRIGGER {schema.VECTORS_TRIGGER}")
    found = {f.where for f in integrity.check_store(settings.db_path).findings}
    assert found == {schema.CODES, schema.VECTORS_TRIGGER}
    assert len(filed(settings)) == 21
    repaired = repair.rebuild_store(settings.db_path)
    assert repaired.after.ok and len(filed(settings)) == 24


def test_search_and_index_meet_a_damaged_store_with_one_line(
    settings: Settings, run_cli: Callable[..., tuple[int, str, str]],
) -> None:
    write(settings, "INSERT INTO chunks_fts(chunks_fts) VALUES('delete-all')")
    code, _, err = run_cli("search", "topic1")
    assert code == 1 and "Traceback" not in err and "`knowledge rebuild`" in err
    assert run_cli("rebuild")[0] == 0
    code, out, _ = run_cli("search", "topic1")
    assert code == 0 and "docs/n1.md" in out
