"""The store's fingerprints as a run reads them: a page at a time, in the order of the path index.

A run over a large tree must not hold a fingerprint per stored document. StoredFingerprints reads
the documents under one walked root in path order (byte order, the order the walker yields its
files: pipeline/walker.py), PAGE rows per statement, so a survey merges the two streams holding
one page; single paths (web pages, skipped files, files outside their root's spelling) are looked
up in batches. Each statement is a read of its own: no read transaction stays open while the walk
runs, so the writer's checkpoints are never held back. The next page starts after the last path
read, so documents the writer adds meanwhile (files this run already walked, behind that path)
are never read as stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pipeline import db, schema
from pipeline.fingerprint import StoredStat
from pipeline.paths import HERE

PAGE = 2000  # rows per statement: a few hundred KB at most
LOOKUP = 500  # paths per IN (...) lookup, well under SQLite's 32,766 parameters
_COLUMNS = "SELECT path, sha256, size, mtime_ns, indexed_ns, {policy} FROM documents"

Row = tuple[str, StoredStat]


class StoredFingerprints:
    """Read access to the stored fingerprints of one store (an empty store when conn is None)."""

    def __init__(self, conn: db.Connection | None, page: int = PAGE) -> None:
        self.conn = conn
        self.page = max(1, page)
        # a store not yet migrated to format 6 (read by a dry run) records no policy: none is older
        pinned = conn is not None and schema.has_policy_column(conn)
        self._columns = _COLUMNS.format(policy="policy" if pinned else "''")

    def under(self, root: str) -> Iterator[Row]:
        """The stored documents at or under root (a stored spelling), in path order; never a web page.

        Under `.` (the base itself) that is every relative path: the absolute ones, which sort
        together between `/` and `0`, are left out.
        """
        if self.conn is None:
            return
        if root == HERE:
            yield from self._range("", "/")
            yield from self._range("0", None)
            return
        if root.rstrip("/"):  # the filesystem root has no document of its own
            yield from self.lookup([root]).items()
        prefix = root.rstrip("/")
        yield from self._range(prefix + "/", prefix + "0")  # "0" follows "/" in byte order

    def _range(self, low: str, high: str | None) -> Iterator[Row]:
        """The documents with low <= path < high (no upper bound when high is None), page by page."""
        assert self.conn is not None
        bound = "" if high is None else " AND path < ?"
        after: tuple[str, ...] = () if high is None else (high,)
        op = ">="
        key = low
        while True:
            rows = self.conn.execute(f"{self._columns} WHERE path {op} ?{bound} ORDER BY path LIMIT ?",
                                     (key, *after, self.page)).fetchall()
            for path, sha, size, mtime, indexed, policy in rows:
                if "://" not in path:
                    yield path, StoredStat(sha, size, mtime, indexed, policy)
            if len(rows) < self.page:
                return
            op, key = ">", rows[-1][0]

    def lookup(self, paths: Iterable[str]) -> dict[str, StoredStat]:
        """The fingerprints of those of paths that are stored."""
        found: dict[str, StoredStat] = {}
        if self.conn is None:
            return found
        wanted = list(dict.fromkeys(paths))
        for start in range(0, len(wanted), LOOKUP):
            part = wanted[start:start + LOOKUP]
            marks = ",".join("?" * len(part))
            rows = self.conn.execute(f"{self._columns} WHERE path IN ({marks})", part)
            for path, sha, size, mtime, indexed, policy in rows:
                found[path] = StoredStat(sha, size, mtime, indexed, policy)
        return found
