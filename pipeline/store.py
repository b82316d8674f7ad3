"""Writer-side SQL: one short transaction per document or staged batch, touches and removals; reset, compact.

Only the process holding the WriteLock uses a Store. Deleting a document's chunks fires the
triggers that clear its FTS (and vector) rows, so a shrinking file leaves no ghosts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from config.errors import StoreError
from pipeline import db, front_matter, impacts, integrity, migrations, schema, translations
from pipeline.identifiers import identifiers
from pipeline.languages import document_hint
from pipeline.models import Document
from pipeline.paths import PathBase

if TYPE_CHECKING:
    from pipeline.vectors import VectorWriter

RECLAIM_SHARE = 0.2  # a removal of at least this share of the documents gives the space back at once
INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL
CHUNK_ROWS = 500  # chunks per INSERT statement (8 parameters each, well under SQLite's 32,766)


def _now() -> tuple[str, int]:
    ns = time.time_ns()
    stamp = datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
    return stamp, ns


class Store:
    """The writer's handle on knowledge.db: one connection, schema ensured on open."""

    def __init__(self, db_path: Path, base: PathBase | None = None, checkpoints: bool = True) -> None:
        self.db_path = db_path
        self.conn = db.open_writer(db_path)
        self.checkpoints = checkpoints
        if not checkpoints:  # Litestream checkpoints the WAL itself, after it has copied the frames (docs/replicas.md)
            self.conn.execute("PRAGMA wal_autocheckpoint = 0")
        if not schema.table_names(self.conn):
            schema.create(self.conn)
        if base is not None:  # the writer of an index run: bring an older format up to date (pipeline/migrations.py)
            migrations.upgrade(self.conn, self.transaction, base)
        schema.check(self.conn, db_path)
        integrity.preflight(self.conn, db_path)
        # With embeddings: an object with stored(conn, doc_id) -> {text_hash: vector}, called before a
        # document's old chunks are deleted, and write(conn, doc_id, doc, stored), called after its new
        # chunks are inserted; both run inside the document's transaction (see pipeline.vectors).
        self.vector_hook: VectorWriter | None = None

    def checkpoint(self) -> bool:
        """At the end of a run: the WAL copied into the file and truncated, even while readers stay open (a
        brief wait for those mid-read); whether it was. Left to Litestream when it checkpoints (False)."""
        return self.checkpoints and db.checkpoint(self.conn)

    def close(self) -> None:
        """Close the connection (checkpointing the WAL)."""
        self.conn.close()
        db.assert_modes(self.db_path)

    @contextmanager
    def transaction(self) -> Iterator[db.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any error; damage is raised as StoreDamaged."""
        with db.translating_damage(self.db_path):
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def apply(self, doc: Document) -> str:
        """Write one document in one transaction; return "added" or "updated"."""
        return self.apply_group([doc])[0]

    def apply_group(self, docs: Sequence[Document]) -> list[str]:
        """Write documents in one transaction; return "added" or "updated" for each, in order.

        Nothing is written when any of them fails (the error is raised after the rollback). The
        chunks of consecutive documents go in with one INSERT statement: FTS5 writes its pending
        terms to disk as a new segment at the start of every statement that writes to it, so a
        statement per chunk made a segment (and its merges) per chunk for every FTS table (see
        bench/RESULTS.md, "The writer floor"). Chunk ids are those of one document at a time: the
        chunks waiting for the statement are inserted before a document's old chunks are deleted.
        """
        stamp, ns = _now()
        outcomes: list[str] = []
        with self.transaction() as conn:
            waiting: list[tuple[int, Document, dict[str, bytes]]] = []
            for doc in docs:
                row = conn.execute("SELECT id FROM documents WHERE path = ?", (doc.path,)).fetchone()
                values = (doc.root, doc.source, doc.title, doc.sha256, doc.size, doc.mtime_ns, len(doc.chunks), stamp,
                          ns, front_matter.to_json(doc.fields), doc.policy,
                          *(doc.language or document_hint(doc.fields, doc.title, (c.body for c in doc.chunks))))
                kept: dict[str, bytes] = {}
                if row is None:
                    cur = conn.execute(
                        "INSERT INTO documents(root, source, title, sha256, size, mtime_ns, chunk_count, indexed_at,"
                        " indexed_ns, fields, policy, text_lang, text_lang_source, path)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (*values, doc.path),
                    )
                    assert cur.lastrowid is not None  # set by every one-row INSERT
                    doc_id, outcome = cur.lastrowid, "added"
                else:
                    doc_id, outcome = row[0], "updated"
                    self._insert_chunks(conn, waiting)
                    waiting = []
                    if self.vector_hook is not None:
                        kept = self.vector_hook.stored(conn, doc_id)
                    conn.execute("DELETE FROM chunks WHERE document_id = ?", (doc_id,))
                    conn.execute("DELETE FROM document_fields WHERE document_id = ?", (doc_id,))
                    conn.execute(
                        "UPDATE documents SET root = ?, source = ?, title = ?, sha256 = ?, size = ?, mtime_ns = ?,"
                        " chunk_count = ?, indexed_at = ?, indexed_ns = ?, fields = ?, policy = ?, text_lang = ?,"
                        " text_lang_source = ? WHERE id = ?",
                        (*values, doc_id),
                    )
                conn.executemany(
                    "INSERT INTO document_fields(document_id, key, value) VALUES (?, ?, ?)",
                    [(doc_id, key, value) for key, value in front_matter.filter_values(doc.fields)],
                )
                waiting.append((doc_id, doc, kept))
                outcomes.append(outcome)
            self._insert_chunks(conn, waiting)
            translations.mark_stale(conn)
        return outcomes

    def _insert_chunks(self, conn: db.Connection, waiting: list[tuple[int, Document, dict[str, bytes]]]) -> None:
        """Insert the chunks of the waiting documents, in order, CHUNK_ROWS a statement; then their vectors."""
        first = next_chunk_id(conn)
        rows = [(first + n, *row) for n, row in enumerate(
            (doc_id, c.ordinal, c.heading_path, c.body, c.text_hash, c.cjk, identifiers(c.body),
             identifiers(c.heading_path)) for doc_id, doc, _ in waiting for c in doc.chunks)]
        for start in range(0, len(rows), CHUNK_ROWS):
            part = rows[start : start + CHUNK_ROWS]
            conn.execute(
                "INSERT INTO chunks(id, document_id, ordinal, heading_path, body, text_hash, cjk, body_identifiers,"
                " heading_identifiers) VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(part)),
                [value for row in part for value in row],
            )
        if rows:
            schema.write_meta(conn, {schema.CHUNK_HIGH_KEY: str(first + len(rows) - 1)})
        if self.vector_hook is not None:
            for doc_id, doc, kept in waiting:
                self.vector_hook.write(conn, doc_id, doc, kept)

    def regroup(self, conventions: translations.Conventions) -> int:
        """Assign every document's language and translation group anew (pipeline/translations.py), in one
        transaction; the documents whose language or group changed. The writer runs it when a run finishes
        and after a removal; nothing is done when no document was written since a pass under the same
        conventions."""
        if translations.current(self.conn, conventions):
            return 0
        with self.transaction() as conn:
            return translations.assign(conn, conventions)

    def touch(self, path: str, size: int, mtime_ns: int) -> bool:
        """Record a new stat for a document whose content is unchanged; False if it is unknown."""
        _, ns = _now()
        with self.transaction() as conn:
            cur = conn.execute(
                "UPDATE documents SET size = ?, mtime_ns = ?, indexed_ns = ? WHERE path = ?",
                (size, mtime_ns, ns, path),
            )
        return bool(cur.rowcount > 0)

    def remove(self, paths: Iterable[str]) -> list[str]:
        """Delete the named documents (one transaction each); return the paths that existed.

        Removing at least RECLAIM_SHARE of the documents gives their space back at once (reclaim).
        """
        removed: list[str] = []
        for path in paths:
            with self.transaction() as conn:
                cur = conn.execute("DELETE FROM documents WHERE path = ?", (path,))
                if cur.rowcount:
                    translations.mark_stale(conn)
            if cur.rowcount:
                removed.append(path)
        # Counted only when something went: forgetting a file that was never stored (a binary file
        # skipped on every run) costs one indexed DELETE, not a count of the whole table.
        if removed and len(removed) >= (self.document_count() + len(removed)) * RECLAIM_SHARE:
            self.reclaim()
        return removed

    def forget(self, path: str) -> bool:
        """Delete the document at path, which can no longer be indexed (binary, not UTF-8, too large,
        a symlink, not a regular file); its chunks leave every FTS and vector table with it. False
        when it was not indexed."""
        return bool(self.remove([path]))

    def reclaim(self) -> bool:
        """Merge every FTS index and return free pages to the file system; False when the file cannot shrink.

        FTS5 keeps a deleted row as a tombstone until its segments merge, so most of a removed
        document's space is freed only by the merge ('optimize'). The free pages then leave the
        file through `incremental_vacuum` in a store created with auto_vacuum = INCREMENTAL; in an
        older store they stay free for reuse until `knowledge vacuum` rewrites (and converts) it.
        """
        with self.transaction() as conn:
            for table in schema.FTS_TABLES:
                conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
        if int(self.conn.execute("PRAGMA auto_vacuum").fetchone()[0]) != INCREMENTAL:
            return False
        with db.translating_damage(self.db_path):
            self.conn.execute("PRAGMA incremental_vacuum").fetchall()  # each step frees one page: run it out
        return True

    def refresh_impacts(self) -> bool:
        """Make the common terms' impact lists and the posting columns again when the run changed enough rows
        (pipeline/impacts.py, pipeline/postings.py), each in one transaction; whether either was made."""
        from pipeline import postings  # numpy: loaded by the writer, never by a read command

        vocabulary = impacts.Vocabulary(self.conn, floor=postings.POSTINGS_FROM)  # one walk of the index for both
        with self.transaction() as conn:
            lists = impacts.refresh(conn, vocabulary=vocabulary)
        with self.transaction() as conn:
            return postings.refresh(conn, vocabulary=vocabulary) or lists

    def document_count(self) -> int:
        """Number of documents stored."""
        return int(self.conn.execute("SELECT count(*) FROM documents").fetchone()[0])

    def totals(self) -> tuple[int, int]:
        """The documents stored and their chunks, as a finished run reports them."""
        files, chunks = self.conn.execute("SELECT count(*), coalesce(sum(chunk_count), 0) FROM documents").fetchone()
        return int(files), int(chunks)


def next_chunk_id(conn: db.Connection) -> int:
    """The id the next chunk gets: above every id ever given (schema.CHUNK_HIGH_KEY), so no id is reused and the
    rows above a stamp (pipeline/impacts.py, pipeline/postings.py) are exactly those written since."""
    high = schema.meta_value(conn, schema.CHUNK_HIGH_KEY)
    top = int(conn.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0])
    return max(top, int(high) if high and high.isdigit() else 0) + 1


@dataclass(frozen=True)
class Emptied:
    """What `reset` removed: None counts when the old file could not be read (damaged)."""

    documents: int | None
    chunks: int | None
    existed: bool


def reset(db_path: Path) -> Emptied:
    """Replace the store with an empty one holding the schema; the caller holds the write lock.

    A symlink at the file or a sidecar is refused (UnsafePathError), never unlinked. A damaged
    file is removed too: its counts are then unknown (None).
    """
    candidates = (db_path, *(Path(f"{db_path}{s}") for s in db.SIDECARS))
    for candidate in candidates:
        db.refuse_symlink(candidate)
    existed = db_path.is_file()
    documents, chunks = _counts(db_path) if existed else (0, 0)
    for candidate in candidates:
        if candidate.exists():
            os.unlink(candidate)
    Store(db_path).close()
    return Emptied(documents, chunks, existed)


def _counts(db_path: Path) -> tuple[int | None, int | None]:
    try:
        conn = db.connect_readonly(db_path)
    except StoreError:
        return None, None
    try:
        row = conn.execute("SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks)").fetchone()
        return int(row[0]), int(row[1])
    except db.DatabaseError:
        return None, None
    finally:
        conn.close()


def compact(db_path: Path) -> tuple[int, int]:
    """Rewrite the store without free pages (bytes before, after); the caller holds the write lock.

    Every FTS table is merged first (dropping the tombstones of deleted rows), then VACUUM rewrites
    the file, switching a store created before auto_vacuum to INCREMENTAL on the way, so later
    large removals give their space back by themselves (Store.reclaim).
    """
    before = _size(db_path)
    conn = db.open_writer(db_path)
    try:
        with db.translating_damage(db_path):
            for table in schema.FTS_TABLES:
                conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # takes effect with this VACUUM
            conn.execute("VACUUM")
    finally:
        conn.close()
    return before, _size(db_path)


def _size(db_path: Path) -> int:
    return sum(p.stat().st_size for p in (db_path, Path(f"{db_path}-wal")) if p.exists())
