"""The read side's handle on the store: read-only, format-checked, with the status of the index.

A query answers "not built" with one status and note (Status.INDEX_NOT_BUILT, not_built_note()) rather than
an error. Readers are opened by query/read_index.py alone (ReadIndex lends them, with its Caches); every core
takes the Reader it is given and never opens one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from config.errors import IndexNotBuilt
from config.settings import Settings
from pipeline import db, schema
from pipeline.db import Connection
from pipeline.paths import under
from query.caches import Caches
from query.lexical.stats import LexicalStats

if TYPE_CHECKING:
    from query.explain import Explain

SOURCE_BATCH = 500  # documents read at a time by iter_sources



def not_built_note(settings: Settings) -> str:
    """The note of every "not built" answer: the store path that was checked and the fix."""
    return str(IndexNotBuilt.at(settings.db_path))


@dataclass(frozen=True)
class Translation:
    """The same page in another language: its language and the section of it a hit cites."""

    lang: str
    path: str
    ordinal: int
    section: str

    @property
    def index_ref(self) -> str:
        """The raw citation token of the section."""
        return f"{self.path}#{self.ordinal}"


@dataclass(frozen=True)
class Hit:
    """One hydrated chunk."""

    chunk_id: int
    path: str
    ordinal: int
    section: str
    content: str
    score: float | None = None  # higher is better; its scale is the ranking's (BM25, RRF or -distance)
    explain: Explain | None = None  # the tiers' ranks and scores, when asked for (query/explain.py)
    lang: str | None = None  # its document's language ('' unknown), set by a search the language stage ranked
    translations: tuple[Translation, ...] = ()  # the same page in other languages, folded into this hit

    @property
    def index_ref(self) -> str:
        """The raw citation token `<path>#<ordinal>`, which `knowledge show` takes back."""
        return f"{self.path}#{self.ordinal}"

    @property
    def short_ref(self) -> str:
        """A stable 6-character handle of the raw token: base32 of its SHA-256, lower-cased."""
        return short_ref(self.index_ref)


def short_ref(token: str) -> str:
    """The 6-character handle of a raw `<path>#<ordinal>` token: base32 of its SHA-256, lower-cased."""
    import base64
    import hashlib  # OpenSSL only for the answers that carry the handle (JSON), not a plain listing

    digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
    return base64.b32encode(digest).decode()[:6].lower()


SHORT_REF = re.compile(r"[a-z2-7]{6}")  # the shape of Hit.short_ref (base32's alphabet, lower-cased)
MAX_AMBIGUOUS = 10  # candidates an ambiguous short ref's refusal names


def is_short_ref(token: str) -> bool:
    """Whether a token is shaped like a hit's 6-character ref (either case)."""
    return SHORT_REF.fullmatch(token.strip().lower()) is not None


def ambiguous_note(token: str, candidates: list[str]) -> str:
    """The refusal of a short ref that several sections share, naming them."""
    named = ", ".join(candidates[:MAX_AMBIGUOUS]) + (", ..." if len(candidates) > MAX_AMBIGUOUS else "")
    return (f"{token.strip()!r} is ambiguous: it is the short ref of {len(candidates)} sections ({named}); "
            "pass the citation token `<path>#<ordinal>` of the one you mean")


MAX_ORDINAL = 2**63 - 1  # SQLite's integers stop here: a larger ordinal names no section


def parse_ref(token: str) -> tuple[str, int] | None:
    """(path, ordinal) of a `<path>#<ordinal>` token, or None if it is not one (or names no storable ordinal)."""
    path, sep, ordinal = token.rpartition("#")
    if not sep or not path or not (ordinal.isascii() and ordinal.isdigit()) or int(ordinal) > MAX_ORDINAL:
        return None
    return path, int(ordinal)


class Reader:
    """A read-only connection to knowledge.db, with the schema's temp views; raises IndexNotBuilt when there is none.

    caches is what its ReadIndex keeps across requests (query/caches.py); without one (a Reader opened
    outside a ReadIndex) it keeps a Caches of its own, let go when it closes.
    """

    def __init__(self, settings: Settings, caches: Caches | None = None) -> None:
        self.settings = settings
        self.caches = caches if caches is not None else Caches()
        self._owns_caches = caches is None
        # What the lexical strategies keep between queries (query/lexical/stats.py), kept with the caches.
        self.lexical = self.caches.of(LexicalStats)
        self.conn: Connection = db.connect_readonly(settings.db_path, schema.READER_TEMP_DDL)
        self._intact_at: int | None = None  # the store version require_intact last found intact
        self._documents: tuple[int, int] | None = None  # (store version, document count)
        try:
            with db.translating_damage(settings.db_path):
                schema.check(self.conn, settings.db_path)
                self.meta = schema.read_meta(self.conn)
        except Exception:
            self.conn.close()
            raise

    def close(self) -> None:
        """Close the connection (and the caches it kept on its own)."""
        self.conn.close()
        if self._owns_caches:
            self.caches.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction: every statement inside sees the store as it was when the block began, so
        ids read by one statement are still there for the next, whatever the writer commits meanwhile.

        Nested use joins the outer snapshot.
        """
        with db.read_snapshot(self.conn):
            self.conn.execute("SELECT 1 FROM documents LIMIT 1").fetchall()  # the snapshot starts here (or is joined)
            yield

    def version(self) -> int:
        """The store's version as this connection sees it: `PRAGMA data_version`, moved by every other commit."""
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def recheck(self) -> None:
        """Check the store's format again and re-read its meta, as a fresh open would (after the store changed)."""
        with db.translating_damage(self.settings.db_path):
            schema.check(self.conn, self.settings.db_path)
            self.meta = schema.read_meta(self.conn)

    @contextmanager
    def instances(self) -> Iterator[Connection]:
        """A read-only connection of its own with the instance vocabularies (schema.INSTANCES_DDL), closed on exit.

        They are temp views on a connection of their own: a Reader does not pay for creating them at
        every open, and no read-only connection ever turns writable.
        """
        bulk = db.connect_readonly(self.settings.db_path, schema.INSTANCES_DDL)
        try:
            yield bulk
        finally:
            bulk.close()

    def require_intact(self) -> None:
        """Raise StoreDamaged when an FTS index lost rows.

        Called when an answer comes back empty, so an emptied index is never mistaken for "no
        document holds these words". The check counts every row of chunks and of two FTS tables;
        a store found intact is not counted again until its version (`PRAGMA data_version`, moved
        by every commit of another connection) moves, so a kept Reader (`knowledge serve`) pays
        for it once per store version, not once per empty answer.
        """
        version = self.version()
        if self._intact_at == version:
            return
        gaps = schema.fts_row_gaps(self.conn)
        if gaps:
            raise db.damaged(self.settings.db_path, "; ".join(gaps))
        self._intact_at = version

    def has_documents(self) -> bool:
        """Whether the index holds any document (one row read, where a count reads them all)."""
        if self._documents is not None and self._documents[0] == self.version():
            return self._documents[1] > 0
        return bool(self.conn.execute("SELECT EXISTS (SELECT 1 FROM documents)").fetchone()[0])

    def document_count(self) -> int:
        """Documents in the index (counted once per store version, as require_intact checks)."""
        version = self.version()
        if self._documents is None or self._documents[0] != version:
            self._documents = version, int(self.conn.execute("SELECT count(*) FROM documents").fetchone()[0])
        return self._documents[1]

    def hydrate(self, ids: list[int], scores: Mapping[int, float] | None = None) -> list[Hit]:
        """Hits for chunk ids in the given order (with their scores), in one query; vanished ids are skipped."""
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self.conn.execute(
            "SELECT c.id, d.path, c.ordinal, c.heading_path, c.body FROM chunks c"
            f" JOIN documents d ON d.id = c.document_id WHERE c.id IN ({marks})",
            ids,
        ).fetchall()
        scores = scores or {}
        by_id = {r[0]: Hit(r[0], r[1], r[2], r[3], r[4], scores.get(r[0])) for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    def short_refs(self, token: str) -> list[str]:
        """The citation tokens `<path>#<ordinal>` whose 6-character ref is token, sorted (none when it is not
        shaped like one). Every section's token is hashed: one pass over the chunks' keys."""
        wanted = token.strip().lower()
        if SHORT_REF.fullmatch(wanted) is None:
            return []
        import base64
        import hashlib

        sha, b32, upper = hashlib.sha256, base64.b32encode, wanted.upper().encode()
        found: list[str] = []
        with db.translating_damage(self.settings.db_path):
            rows = self.conn.execute(
                "SELECT d.path || '#' || c.ordinal FROM chunks c JOIN documents d ON d.id = c.document_id")
            for (ref,) in rows:  # 5 bytes of the digest are its first 8 base32 characters
                if b32(sha(ref.encode("utf-8", "surrogateescape")).digest()[:5])[:6] == upper:
                    found.append(ref)
        return sorted(found)

    def documents_of(self, ids: list[int]) -> dict[int, int]:
        """{chunk id: its document id} of the chunks that exist, in one query."""
        rows = self.conn.execute(
            "SELECT id, document_id FROM chunks WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),))
        return {int(r[0]): int(r[1]) for r in rows}

    def chunk(self, path: str, ordinal: int) -> Hit | None:
        """The chunk a citation names, or None."""
        with db.translating_damage(self.settings.db_path):
            row = self.conn.execute(
                "SELECT c.id, d.path, c.ordinal, c.heading_path, c.body FROM chunks c"
                " JOIN documents d ON d.id = c.document_id WHERE d.path = ? AND c.ordinal = ?",
                (path, ordinal),
            ).fetchone()
        return Hit(*row) if row else None

    def document(self, path: str) -> list[Hit]:
        """Every chunk of the document stored at path, in order (empty when there is none)."""
        rows = self.conn.execute(
            "SELECT c.id, d.path, c.ordinal, c.heading_path, c.body FROM chunks c"
            " JOIN documents d ON d.id = c.document_id WHERE d.path = ? ORDER BY c.ordinal",
            (path,),
        ).fetchall()
        return [Hit(*row) for row in rows]

    def stored_paths(self, candidates: list[str]) -> set[str]:
        """Those of candidates that are stored document paths."""
        found: set[str] = set()
        for start in range(0, len(candidates), 500):
            part = candidates[start:start + 500]
            marks = ",".join("?" * len(part))
            found |= {str(r[0]) for r in self.conn.execute(f"SELECT path FROM documents WHERE path IN ({marks})", part)}
        return found

    def paths_under(self, directory: str) -> list[str]:
        """The stored file paths at or beneath a directory (stored spelling), sorted."""
        rows = self.conn.execute("SELECT path FROM documents WHERE source = 'file' ORDER BY path").fetchall()
        return [str(path) for (path,) in rows if under(str(path), directory)]

    def sources(self) -> list[dict[str, Any]]:
        """Every document with its chunk count, time of indexing and front-matter fields, by path."""
        with db.translating_damage(self.settings.db_path):
            rows = self.conn.execute(
                "SELECT path, title, chunk_count, indexed_at, root, size, fields, lang, lang_source,"
                " translation_group FROM documents ORDER BY path"
            ).fetchall()
        return [
            {"path": p, "title": t, "chunks": c, "indexed_at": at, "root": r, "size": s,
             "fields": json.loads(f) if f else {}, "lang": lang, "lang_source": told,
             "translation_group": group or None}
            for p, t, c, at, r, s, f, lang, told, group in rows
        ]

    def iter_sources(self, where: str = "1", args: Sequence[object] = (), limit: int | None = None,
                     offset: int = 0) -> Iterator[dict[str, Any]]:
        """The documents a WHERE clause over `documents` selects, as sources() shapes them, in path order from
        offset, at most limit of them: read from the path index a batch at a time, as the caller takes them."""
        with db.translating_damage(self.settings.db_path):
            rows = self.conn.execute(
                "SELECT path, title, chunk_count, indexed_at, root, size, fields, lang, lang_source, translation_group"
                f" FROM documents WHERE {where} ORDER BY path LIMIT ? OFFSET ?",
                (*args, -1 if limit is None else limit, offset))
            while batch := rows.fetchmany(SOURCE_BATCH):
                for p, t, c, at, r, s, f, lang, told, group in batch:
                    yield {"path": p, "title": t, "chunks": c, "indexed_at": at, "root": r, "size": s,
                           "fields": json.loads(f) if f else {}, "lang": lang, "lang_source": told,
                           "translation_group": group or None}

    def iter_sources_json(self, where: str = "1", args: Sequence[object] = (), limit: int | None = None,
                          offset: int = 0) -> Iterator[str]:
        """iter_sources' documents as JSON text, each built by SQLite (`mapped` null): a listing of 100,000
        documents is then written without a Python object per field."""
        with db.translating_damage(self.settings.db_path):
            rows = self.conn.execute(
                "SELECT json_object('path', path, 'title', title, 'chunks', chunk_count, 'indexed_at', indexed_at,"
                " 'root', root, 'size', size, 'fields', json(coalesce(fields, '{}')), 'lang', lang,"
                " 'lang_source', lang_source, 'translation_group', nullif(translation_group, ''), 'mapped', NULL)"
                " FROM documents"
                f" WHERE {where} ORDER BY path LIMIT ? OFFSET ?", (*args, -1 if limit is None else limit, offset))
            while batch := rows.fetchmany(SOURCE_BATCH):
                for (row,) in batch:
                    yield str(row)

    def stats(self) -> dict[str, Any]:
        """Counts and facts about the index."""
        with db.translating_damage(self.settings.db_path):
            docs, chunks, last = self.conn.execute(
                "SELECT count(*), coalesce(sum(chunk_count), 0), max(indexed_at) FROM documents"
            ).fetchone()
        path = self.settings.db_path
        on_disk = sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())
        return {
            "store": str(path),
            "documents": int(docs),
            "chunks": int(chunks),
            "last_indexed": last,
            "bytes_on_disk": on_disk,
            "format_version": int(self.meta.get(schema.FORMAT_VERSION_KEY, 0)),
            "sqlite_version": db.sqlite_version(),
        }
