"""Store migrations: the table covers every older format once, in order, and `knowledge index` runs it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline import db, formats, migrations, schema, vector_codes
from tests.conftest import write_tree

RunCli = Callable[..., tuple[int, str, str]]
DOCS = {"docs/a.md": "# A\n\nalpha\n", "docs/fm.md": "---\nowner: alice\n---\n# Owned\n\nbravo\n",
        "docs/ident.md": "# Validators\n\nDecorate it with model_validator.\n",
        "docs/words.md": "# Words\n\nThe model validator runs after the model.\n"}

# Format 4's exact table: plain unicode61 over chunks itself, kept in step by these trigger bodies.
_FORMAT_4_EXACT = ("CREATE VIRTUAL TABLE chunks_fts_exact USING fts5(body, heading_path, content='chunks',"
                   " content_rowid='id', tokenize='unicode61')")
_FORMAT_4_TRIGGERS = {
    "chunks_ai": "AFTER INSERT ON chunks BEGIN {new} END",
    "chunks_ad": "AFTER DELETE ON chunks BEGIN {old} END",
    "chunks_au": "AFTER UPDATE ON chunks BEGIN {old} {new} END",
}
_FORMAT_4_NEW = (
    "INSERT INTO chunks_fts(rowid, body, heading_path) VALUES (new.id, new.body, new.heading_path);"
    " INSERT INTO chunks_fts_exact(rowid, body, heading_path) VALUES (new.id, new.body, new.heading_path);"
    " INSERT INTO chunks_fts_cjk(rowid, cjk) SELECT new.id, new.cjk WHERE new.cjk != '';")
_FORMAT_4_OLD = (
    "INSERT INTO chunks_fts(chunks_fts, rowid, body, heading_path) VALUES ('delete', old.id, old.body,"
    " old.heading_path); INSERT INTO chunks_fts_exact(chunks_fts_exact, rowid, body, heading_path)"
    " VALUES ('delete', old.id, old.body, old.heading_path); INSERT INTO chunks_fts_cjk(chunks_fts_cjk, rowid,"
    " cjk) SELECT 'delete', old.id, old.cjk WHERE old.cjk != '';")


def _as_format_6(conn: db.Connection, workdir: Path) -> None:
    """Undo 6 -> 7: no impact lists."""
    for table in (schema.IMPACTS, schema.IMPACT_FLOORS):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("DELETE FROM meta WHERE key LIKE 'impacts_%'")


def _as_format_7(conn: db.Connection, workdir: Path) -> None:
    """Undo 7 -> 8: one row per vector code instead of one per list (a store with the companions)."""
    as_code_rows(conn)


def as_code_rows(conn: db.Connection) -> None:
    """Take a store's list rows back to format 7's one row per code (`int8-ivf-2`), when it has them."""
    if not schema.exists(conn, schema.LISTS):
        return
    rows = [(lst * vector_codes.LIST_SPAN + cid, cid, code)
            for cid, (lst, code) in vector_codes.filed(conn).items()]
    conn.execute(f"DELETE FROM {schema.CODES}")
    conn.executemany(f"INSERT INTO {schema.CODES}(key, chunk_id, code) VALUES (?, ?, ?)", rows)
    conn.execute(f"DROP TABLE {schema.LISTS}")
    schema.write_meta(conn, {schema.VECTOR_CODES_KEY: vector_codes.ROW_SCHEME})


def _as_format_9(conn: db.Connection, workdir: Path) -> None:
    """Undo 9 -> 10: no posting columns, their trigger or the record of the highest chunk id given."""
    conn.execute(f"DROP TRIGGER {schema.GONE_TRIGGER}")
    for table in (schema.POSTINGS, schema.POSTINGS_SIZES, schema.POSTINGS_GONE):
        conn.execute(f"DROP TABLE {table}")
    for key in (schema.CHUNK_HIGH_KEY, schema.POSTINGS_TOP_KEY, schema.POSTINGS_STAMP_KEY, schema.POSTINGS_WEIGHTS_KEY):
        schema.delete_meta(conn, key)


def _as_format_8(conn: db.Connection, workdir: Path) -> None:
    """Undo 8 -> 9: no language or translation group per document."""
    conn.execute("DROP INDEX documents_translation_group")
    for column in schema.LANGUAGE_COLUMNS:
        conn.execute(f"ALTER TABLE documents DROP COLUMN {column}")
    schema.delete_meta(conn, schema.COMMON_LANGUAGE_KEY)


def _as_format_5(conn: db.Connection, workdir: Path) -> None:
    """Undo 5 -> 6: no chunk policy per document."""
    conn.execute("ALTER TABLE documents DROP COLUMN policy")


def _as_format_4(conn: db.Connection, workdir: Path) -> None:
    """Undo 4 -> 5: no identifier columns, the exact table plain unicode61 over chunks (identifiers split)."""
    schema.drop_fts_triggers(conn)
    schema.drop_exact(conn)
    for column in schema.IDENTIFIER_COLUMNS:
        conn.execute(f"ALTER TABLE chunks DROP COLUMN {column}")
    conn.execute(_FORMAT_4_EXACT)
    conn.execute("INSERT INTO chunks_fts_exact(chunks_fts_exact) VALUES ('rebuild')")
    conn.execute("CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts_exact, 'row')")
    for name, body in _FORMAT_4_TRIGGERS.items():
        conn.execute(f"CREATE TRIGGER {name} " + body.format(new=_FORMAT_4_NEW, old=_FORMAT_4_OLD))


def _as_format_3(conn: db.Connection, workdir: Path) -> None:
    """Undo 3 -> 4: the bit codes, float copies and their trigger beside the vectors, and their scheme."""
    conn.execute("CREATE VIRTUAL TABLE chunks_vec_bits USING vec0(chunk_id INTEGER PRIMARY KEY,"
                 " part INTEGER PARTITION KEY, code bit[96])")
    conn.execute("CREATE TABLE chunks_vec_f32 (chunk_id INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")
    conn.execute("CREATE TRIGGER chunks_vec_bits_ad AFTER DELETE ON chunks BEGIN "
                 "DELETE FROM chunks_vec_bits WHERE chunk_id = old.id; "
                 "DELETE FROM chunks_vec_f32 WHERE chunk_id = old.id; END")
    schema.write_meta(conn, {schema.VECTOR_CODES_KEY: "thermometer-4-step0.5-partitions16"})


def _as_format_2(conn: db.Connection, workdir: Path) -> None:
    """Undo 2 -> 3: no fields column or table, the front-matter block indexed as the first section's text."""
    (doc_id,) = conn.execute("SELECT id FROM documents WHERE path = 'docs/fm.md'").fetchone()
    conn.execute("UPDATE chunks SET ordinal = ordinal + 100 WHERE document_id = ?", (doc_id,))
    conn.execute("INSERT INTO chunks(document_id, ordinal, heading_path, body, text_hash) VALUES (?, 0, '', ?, 'x')",
                 (doc_id, "---\nowner: alice\n---"))
    conn.execute("DROP TABLE document_fields")
    conn.execute("ALTER TABLE documents DROP COLUMN fields")


def _as_format_1(conn: db.Connection, workdir: Path) -> None:
    """Undo 1 -> 2: paths as walked, so one file is stored twice (relative with ./ and absolute)."""
    conn.execute("INSERT INTO documents(path, root, source, title, sha256, size, mtime_ns, chunk_count, indexed_at,"
                 " indexed_ns) SELECT ?, ?, source, title, sha256, size, mtime_ns, 0, '2000-01-01 00:00:00', 0"
                 " FROM documents WHERE path = 'docs/a.md'",
                 (str(workdir / "docs/a.md"), str(workdir / "docs")))
    conn.execute("UPDATE documents SET path = './docs/a.md' WHERE path = 'docs/a.md'")


# The inverse of each step, by its source format: a store of format N is the current one taken back
# through every step from the current format down to N.
UNDO: dict[int, Callable[[db.Connection, Path], None]] = {
    9: _as_format_9, 8: _as_format_8, 7: _as_format_7, 6: _as_format_6, 5: _as_format_5, 4: _as_format_4,
    3: _as_format_3, 2: _as_format_2, 1: _as_format_1,
}
OLDER = list(range(schema.MIGRATES_FROM, schema.FORMAT_VERSION))


def test_every_format_from_the_oldest_migrated_to_the_current_has_exactly_one_step_in_order() -> None:
    assert [(s.source, s.target) for s in migrations.STEPS] == [(v, v + 1) for v in OLDER]
    assert all(s.does and "\n" not in s.does for s in migrations.STEPS)
    assert [migrations.step_from(v) for v in OLDER] == list(migrations.STEPS)
    assert migrations.step_from(schema.FORMAT_VERSION) is None and migrations.step_from(None) is None
    assert sorted(UNDO) == OLDER  # every step has a store of its source format in the test below


def _downgrade(db_path: Path, workdir: Path, version: int) -> None:
    conn = db.open_writer(db_path)
    try:
        for source in range(schema.FORMAT_VERSION - 1, version - 1, -1):
            UNDO[source](conn, workdir)
        schema.write_meta(conn, {schema.FORMAT_VERSION_KEY: str(version)})
    finally:
        conn.close()


def _as_written(run_cli: RunCli, query: str) -> tuple[int, int]:
    code, out, err = run_cli("match", query, "--json")
    assert code == 0, out + err
    (term,) = json.loads(out)["terms"]
    return term["documents_as_written"], term["documents_any_form"]


def _words(run_cli: RunCli, pattern: str) -> list[str]:
    code, out, err = run_cli("words", pattern, "--json")
    assert code == 0, out + err
    return [w["word"] for w in json.loads(out)["words"]]


def _search(run_cli: RunCli, *args: str) -> list[str]:
    code, out, err = run_cli("search", *args, "--json")
    assert code == 0, out + err
    return [r["path"] for r in json.loads(out)["results"]]


@pytest.mark.parametrize("version", OLDER)
def test_a_store_of_each_older_format_is_refused_then_migrated_to_the_current_by_the_next_index(
    version: int, workdir: Path, run_cli: RunCli,
) -> None:
    write_tree(workdir, DOCS)
    assert run_cli("index", "docs")[0] == 0
    db_path = workdir / "knowledge" / "default" / "knowledge.db"
    _downgrade(db_path, workdir, version)
    code, _, err = run_cli("search", "alpha")
    assert code == 1 and f"has format {version}, older than this knowledge" in err
    assert "run `knowledge index` once to migrate it" in err
    code, out, err = run_cli("index", "docs")
    assert code == 0, out + err
    assert "re-chunked" not in out  # each migrated document is pinned to today's policy
    conn = db.connect_readonly(db_path)
    try:
        assert schema.format_version(conn) == schema.FORMAT_VERSION
        assert {p for (p,) in conn.execute("SELECT policy FROM documents")} == {formats.policy_of("a.md")}
        schema.check(conn, db_path)
        assert not {*schema.LEGACY_CODE_TABLES, schema.LEGACY_CODES_TRIGGER} & schema.table_names(conn)
        assert schema.meta_value(conn, schema.VECTOR_CODES_KEY) is None
        assert schema.meta_value(conn, "impacts_stamp")  # the run's end made the impact lists
    finally:
        conn.close()
    code, out, err = run_cli("sources", "--json")
    assert code == 0 and sorted(d["path"] for d in json.loads(out)["documents"]) == sorted(
        ["docs/a.md", "docs/fm.md", "docs/ident.md", "docs/words.md"])
    assert _search(run_cli, "alpha") == ["docs/a.md"]
    assert _as_written(run_cli, "model_validator") == (1, 2)  # the exact table holds the identifier whole
    assert _as_written(run_cli, "model") == (2, 2)  # and still its words
    assert _words(run_cli, "^model_valid") == ["model_validator"]
    assert sorted(_search(run_cli, "model", "validator")) == ["docs/ident.md", "docs/words.md"]
    assert _search(run_cli, "alice") == []  # the front-matter block is a field again, not text
    assert _search(run_cli, "bravo", "--where", "owner=alice") == ["docs/fm.md"]


def test_a_migrated_format_5_store_is_not_re_chunked_by_the_next_index(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, DOCS)
    assert run_cli("index", "docs")[0] == 0
    db_path = workdir / "knowledge" / "default" / "knowledge.db"
    _downgrade(db_path, workdir, 5)
    code, out, err = run_cli("index", "docs", "--dry-run", "--json")  # reads the store as it is: no policy yet
    assert code == 0, out + err
    assert json.loads(out)["rechunked"] == [] and json.loads(out)["updated"] == []
    code, out, err = run_cli("index", "docs", "--json")
    assert code == 0, out + err
    summary = json.loads(out)
    assert (summary["added"], summary["updated"], summary["unchanged"], summary["rechunked"]) == (0, 0, 4, 0)
    code, out, err = run_cli("index", "docs", "--dry-run", "--json")
    assert code == 0 and json.loads(out)["rechunked"] == [] and json.loads(out)["updated"] == []


def test_a_store_older_than_the_oldest_migration_or_newer_than_this_knowledge_is_refused_by_the_index(
    workdir: Path, run_cli: RunCli,
) -> None:
    write_tree(workdir, DOCS)
    assert run_cli("index", "docs")[0] == 0
    db_path = workdir / "knowledge" / "default" / "knowledge.db"
    for version, way in ((schema.MIGRATES_FROM - 1, "run `knowledge reset --force` and re-index"),
                         (schema.FORMAT_VERSION + 1, "upgrade knowledge")):
        conn = db.open_writer(db_path)
        schema.write_meta(conn, {schema.FORMAT_VERSION_KEY: str(version)})
        conn.close()
        code, _, err = run_cli("index", "docs")
        relation = "newer" if version > schema.FORMAT_VERSION else "older"
        assert code == 1 and f"has format {version}, {relation} than this knowledge" in err and way in err
