"""The store's schema and its pinned format version.

documents and chunks are the content; three FTS5 tables index chunks (porter for ranking, exact
words for vocabulary and prefixes, trigram over CJK runs), all kept in step by triggers; meta holds
the format version and the vector identity. chunks_vec (sqlite-vec) exists only with embeddings.
"""

from __future__ import annotations

from typing import Any

from config.errors import IndexNotBuilt, StoreFormatError

FORMAT_VERSION = 1

TABLES = ("meta", "documents", "chunks", "chunks_fts", "chunks_fts_exact", "chunks_fts_cjk", "chunks_vocab")

_DDL = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    id          INTEGER PRIMARY KEY,
    path        TEXT NOT NULL UNIQUE,
    root        TEXT NOT NULL,
    source      TEXT NOT NULL DEFAULT 'file',
    title       TEXT,
    sha256      TEXT NOT NULL,
    size        INTEGER NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    chunk_count INTEGER NOT NULL,
    indexed_at  TEXT NOT NULL,
    indexed_ns  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_root ON documents(root);
CREATE TABLE IF NOT EXISTS chunks (
    id           INTEGER PRIMARY KEY,
    document_id  INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal      INTEGER NOT NULL,
    heading_path TEXT NOT NULL,
    body         TEXT NOT NULL,
    text_hash    TEXT NOT NULL,
    cjk          TEXT NOT NULL DEFAULT '',
    UNIQUE (document_id, ordinal)
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    body, heading_path, content='chunks', content_rowid='id', tokenize='porter unicode61'
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts_exact USING fts5(
    body, heading_path, content='chunks', content_rowid='id', tokenize='unicode61'
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts_cjk USING fts5(
    cjk, content='chunks', content_rowid='id', tokenize='trigram', columnsize=0
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab(chunks_fts_exact, 'row');
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, body, heading_path) VALUES (new.id, new.body, new.heading_path);
    INSERT INTO chunks_fts_exact(rowid, body, heading_path) VALUES (new.id, new.body, new.heading_path);
    INSERT INTO chunks_fts_cjk(rowid, cjk) SELECT new.id, new.cjk WHERE new.cjk != '';
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, body, heading_path)
        VALUES ('delete', old.id, old.body, old.heading_path);
    INSERT INTO chunks_fts_exact(chunks_fts_exact, rowid, body, heading_path)
        VALUES ('delete', old.id, old.body, old.heading_path);
    INSERT INTO chunks_fts_cjk(chunks_fts_cjk, rowid, cjk) SELECT 'delete', old.id, old.cjk WHERE old.cjk != '';
END;
CREATE TRIGGER IF NOT EXISTS chunks_au AFTER UPDATE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, body, heading_path)
        VALUES ('delete', old.id, old.body, old.heading_path);
    INSERT INTO chunks_fts_exact(chunks_fts_exact, rowid, body, heading_path)
        VALUES ('delete', old.id, old.body, old.heading_path);
    INSERT INTO chunks_fts_cjk(chunks_fts_cjk, rowid, cjk) SELECT 'delete', old.id, old.cjk WHERE old.cjk != '';
    INSERT INTO chunks_fts(rowid, body, heading_path) VALUES (new.id, new.body, new.heading_path);
    INSERT INTO chunks_fts_exact(rowid, body, heading_path) VALUES (new.id, new.body, new.heading_path);
    INSERT INTO chunks_fts_cjk(rowid, cjk) SELECT new.id, new.cjk WHERE new.cjk != '';
END;
"""


def table_names(conn: Any) -> set[str]:
    """Names of every table, view and trigger in the file."""
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}


def create(conn: Any) -> None:
    """Create the schema in an empty store and pin the format version (idempotent)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _statements():
            conn.execute(statement)
        conn.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('format_version', ?)", (str(FORMAT_VERSION),)
        )
        conn.execute("COMMIT")
    except Exception:
        conn.execute("ROLLBACK")
        raise


def _statements() -> list[str]:
    parts: list[str] = []
    buf: list[str] = []
    for line in _DDL.strip().splitlines():
        buf.append(line)
        text = "\n".join(buf).strip()
        if text.endswith(";") and (not text.startswith("CREATE TRIGGER") or text.endswith("END;")):
            parts.append(text)
            buf = []
    return parts


def check(conn: Any, db_path: object) -> None:
    """Refuse a store of another format version or shape, naming the way forward."""
    names = table_names(conn)
    if not names:
        raise IndexNotBuilt(f"no index at {db_path}; run `knowledge index` first")
    missing = [t for t in TABLES if t not in names]
    version = None
    if "meta" in names:
        row = conn.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone()
        version = int(row[0]) if row and str(row[0]).isdigit() else None
    if version is None or missing:
        raise StoreFormatError(
            f"{db_path} is not a knowledge store of format {FORMAT_VERSION} "
            f"(missing: {', '.join(missing) or 'format_version'}); run `knowledge reset --force` and re-index"
        )
    if version > FORMAT_VERSION:
        raise StoreFormatError(
            f"{db_path} has format {version}, newer than this knowledge ({FORMAT_VERSION}); upgrade knowledge"
        )
    if version < FORMAT_VERSION:
        raise StoreFormatError(
            f"{db_path} has format {version}, older than this knowledge ({FORMAT_VERSION}); "
            "run `knowledge reset --force` and re-index"
        )


def get_meta(conn: Any) -> dict[str, str]:
    """The meta table as a dict."""
    return {k: v for k, v in conn.execute("SELECT key, value FROM meta")}


def drop_all(conn: Any) -> None:
    """Drop every object (reset): dropping fires no row triggers, so a drifted FTS cannot block it."""
    rows = conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' AND type IN ('table', 'trigger')"
    ).fetchall()
    virtual = [name for kind, name, sql in rows if kind == "table" and (sql or "").startswith("CREATE VIRTUAL")]
    plain = [name for kind, name, sql in rows if kind == "table" and name not in virtual]
    conn.execute("BEGIN IMMEDIATE")
    try:
        for kind, name, _ in rows:
            if kind == "trigger":
                conn.execute(f'DROP TRIGGER IF EXISTS "{name}"')
        for name in virtual + plain:
            conn.execute(f'DROP TABLE IF EXISTS "{name}"')
        conn.execute("COMMIT")
    except Exception:
        conn.execute("ROLLBACK")
        raise
