"""Answers kept across readers for as long as the store holds the same data.

`knowledge match` spends nearly all its time turning each term's matching chunks into documents
(a join of every matching chunk with its document): ~90k chunks for "the" at 100k chunks, and
the same words come back query after query. A server opens a Reader per request, so a cache on a
connection would die with it; this one (Generations) hangs on the ReadIndex that lends the Readers
(query/caches.py: `Generation.of(reader)`), per store file, and is valid for one *generation* of
the store:

- a sentinel connection per store file (read-only, never writing) reads `PRAGMA data_version`,
  which changes whenever any other connection, of this process or another, commits to the file;
- the file's (device, inode) is checked at every poll, so a store reset (a new file at the same
  path) starts a new sentinel and an empty cache; the sentinel holds the old file open, so its
  inode cannot be reused meanwhile.

A value is stored only when the generation read before computing it equals the one read after,
so it never holds a mix of two generations, and it is served only while the generation is that
same one. A query that reads the store in several statements takes them in one read transaction
(Reader.snapshot) and confirms the generation once it has begun (Generation.confirm), so the
values it is served belong to the very snapshot its own statements read. The cache is bounded
(MAX_STORES files; MAX_ENTRIES values and MAX_HELD of their sizes a file, least recently used first
out) and thread-safe.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pipeline import db
from pipeline.db import Connection
from pipeline.paths import file_identity

if TYPE_CHECKING:
    from query.reader import Reader

MAX_STORES = 4
MAX_ENTRIES = 4096
MAX_HELD = 2_000_000  # the sizes of a file's values (for match: documents listed, 24 bytes each), summed

T = TypeVar("T")


class _Store:
    """One store file's sentinel, its generation and the values computed in it."""

    def __init__(self, path: Path, identity: tuple[int, int]) -> None:
        self.conn: Connection = db.connect_readonly(path)
        self.identity = identity
        self.pid = os.getpid()
        self.version = -1
        self.values: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self.held = 0

    def poll(self) -> int:
        version = int(self.conn.execute("PRAGMA data_version").fetchone()[0])
        if version != self.version:
            self.version = version
            self.values.clear()
            self.held = 0
        return version

    def add(self, values: dict[Hashable, tuple[Any, int]]) -> None:
        for key, (value, size) in values.items():
            if key in self.values or size > MAX_HELD:
                continue
            self.values[key] = (value, size)
            self.held += size
        while len(self.values) > MAX_ENTRIES or self.held > MAX_HELD:
            _, (_, size) = self.values.popitem(last=False)
            self.held -= size


class Generations:
    """The store files whose values are kept, each with its sentinel: one per ReadIndex (query/caches.py)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stores: OrderedDict[str, _Store] = OrderedDict()

    def poll(self, path: Path) -> tuple[_Store, int] | None:
        """The store's entry and its generation now (None when the file cannot be watched); call under lock."""
        stores = self.stores
        if any(s.pid != os.getpid() for s in stores.values()):
            stores.clear()  # a forked child never uses its parent's connections (nor closes them)
        key = str(path)
        identity = file_identity(path)
        found = stores.get(key)
        if found is not None and found.identity != identity:
            found.conn.close()
            del stores[key]
            found = None
        if identity is None:
            return None
        if found is None:
            try:
                found = _Store(path, identity)
            except Exception:  # noqa: BLE001 - an unreadable store: nothing is cached, the query reports it itself
                return None
            stores[key] = found
            while len(stores) > MAX_STORES:
                _, evicted = stores.popitem(last=False)
                evicted.conn.close()
        stores.move_to_end(key)
        return found, found.poll()

    def forget(self, path: Path) -> None:
        """Close the sentinel of a store file and drop its values."""
        with self.lock:
            found = self.stores.pop(str(path), None)
            if found is not None:
                found.conn.close()

    def close(self) -> None:
        """Close every sentinel and drop every value (the ReadIndex lets its store go)."""
        with self.lock:
            stores, self.stores = list(self.stores.values()), OrderedDict()
        for found in stores:
            if found.pid == os.getpid():
                found.conn.close()


class Generation:
    """The values of one store generation a query may use, and the new ones it may keep."""

    @classmethod
    def of(cls, reader: Reader) -> Generation:
        """The generation of the reader's store, its values kept by the reader's ReadIndex."""
        return cls(reader.caches.of(Generations), reader.settings.db_path)

    def __init__(self, kept: Generations, path: Path) -> None:
        self.kept = kept
        self.path = path
        with kept.lock:
            polled = kept.poll(path)
        self._store = polled[0] if polled else None
        self._version = polled[1] if polled else -1
        self._new: dict[Hashable, tuple[Any, int]] = {}

    def confirm(self) -> None:
        """Use and keep values only if the store is still at the generation read when this one was made.

        Called once the query's read transaction (Reader.snapshot) has begun: the generation was read
        before the snapshot and is read again after it, so when the two agree the snapshot is that
        generation, and values kept for it (computed by other readers) agree with what this reader's
        own statements see. When a commit came between, nothing is served from or kept in the cache.
        """
        store = self._store
        if store is None:
            return
        with self.kept.lock:
            polled = self.kept.poll(self.path)
        if polled is None or polled[0] is not store or polled[1] != self._version:
            self._store = None

    def get(self, key: Hashable, compute: Callable[[], T], size: Callable[[T], int] = lambda _: 1) -> T:
        """The value of key in this generation: kept from an earlier query, or computed now.

        size weighs the value against MAX_HELD. Values are shared between queries and threads:
        callers must not change them.
        """
        store = self._store
        if store is not None:
            with self.kept.lock:
                if store.version == self._version and key in store.values:
                    store.values.move_to_end(key)
                    return store.values[key][0]  # type: ignore[no-any-return]
        if key in self._new:
            return self._new[key][0]  # type: ignore[no-any-return]
        value = compute()
        self._new[key] = (value, size(value))
        return value

    def keep(self) -> None:
        """Store the values computed since the generation was read, if it has not changed since."""
        store = self._store
        if store is None or not self._new:
            return
        with self.kept.lock:
            polled = self.kept.poll(self.path)
            if polled is None or polled[0] is not store or polled[1] != self._version:
                return
            store.add(self._new)
        self._new = {}
