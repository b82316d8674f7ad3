"""LexicalStats: what the lexical strategies keep between queries, held by the ReadIndex that serves them.

The document frequencies of each connection (until another connection commits: `PRAGMA data_version`),
the porter stems of the words rows were re-scored over, and the posting columns' decoded arrays: each
term's column, the rows' token counts, filters' row masks and zeroed score accumulators. The decoded
values are keyed by the store file (path, device, inode) and the columns' stamp, so a reset, a swap or
a refresh of the columns leaves nothing stale behind. A ReadIndex (query/read_index.py) owns one and
lends it with every Reader; a Reader opened alone gets its own, which dies with it. Thread-safe.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipeline.db import Connection

if TYPE_CHECKING:  # numpy and the columns only for a store that keeps columns
    import numpy as np
    import numpy.typing as npt

    from pipeline.postings import Column

StoreKey = tuple[str, int, int, str]  # the store file (path, device, inode) and the columns' stamp
COLUMNS_HELD = 320 * 2**20  # the bytes of decoded columns kept (16 a row), least recently used out
KEEP_MASKS = 8  # filters' row masks kept (a byte a chunk id each)
KEEP_ACCUMULATORS = 4  # zeroed accumulators kept (8 bytes a chunk id each): one per concurrent query
STEMS_HELD = 200_000


@dataclass
class FrequencyCache:
    """One connection's document frequencies, valid while its data_version is `version`."""

    version: int = -1
    rows: int = 0
    frequencies: dict[str, int] = field(default_factory=dict)
    columns: bool = False  # the posting columns' row counts are current


class LexicalStats:
    """The lexical engine's kept statistics and decoded structures (module docstring)."""

    def __init__(self, columns_held: int = COLUMNS_HELD) -> None:
        self.columns_held = columns_held
        self.lock = threading.RLock()
        self._frequencies: weakref.WeakKeyDictionary[Connection, FrequencyCache] = weakref.WeakKeyDictionary()
        self._stems: dict[str, str] = {}
        self._columns: OrderedDict[tuple[StoreKey, str], Column | None] = OrderedDict()
        self._held = 0
        self._sizes: dict[StoreKey, npt.NDArray[np.float64]] = {}
        self._masks: dict[tuple[StoreKey, str], npt.NDArray[np.bool_]] = {}
        self._idle: list[npt.NDArray[np.float64]] = []

    def frequency_cache(self, conn: Connection) -> FrequencyCache:
        """conn's frequency cache (created empty); call it under `lock` (then only conn's user touches the cache)."""
        cache = self._frequencies.get(conn)
        if cache is None:
            cache = self._frequencies[conn] = FrequencyCache()
        return cache

    def known_frequencies(self, conn: Connection) -> int:
        """How many document frequencies conn's cache holds."""
        with self.lock:
            cache = self._frequencies.get(conn)
            return len(cache.frequencies) if cache is not None else 0

    def stems(self, runs: Iterable[str], stem: Callable[[set[str]], dict[str, str]]) -> dict[str, str]:
        """The porter stem of every run, those not yet known found in one call of stem (and kept)."""
        wanted = set(runs)
        with self.lock:
            missing = wanted.difference(self._stems)
        if missing:
            found = stem(missing)
            with self.lock:
                if len(self._stems) + len(found) > STEMS_HELD:
                    self._stems.clear()
                self._stems.update(found)
                return {run: self._stems.get(run) or found[run] for run in wanted}
        with self.lock:
            return {run: self._stems[run] for run in wanted}

    @staticmethod
    def store_key(conn: Connection, stamp: str) -> StoreKey | None:
        """The store file (path, device, inode) and the columns' stamp: what a kept value is valid for."""
        db_path = str(conn.execute("PRAGMA database_list").fetchone()[2])
        try:
            info = os.stat(db_path)
        except OSError:
            return None
        return db_path, info.st_dev, info.st_ino, stamp

    def column(self, store: StoreKey, stem: str, load: Callable[[], Column | None]) -> Column | None:
        """A term's column, decoded once by load and kept while the store and stamp hold (columns_held bytes)."""
        key = (store, stem)
        with self.lock:
            if key in self._columns:
                self._columns.move_to_end(key)
                return self._columns[key]
        found = load()
        size = 16 * len(found.ids) if found is not None else 0
        with self.lock:
            if key not in self._columns and size <= self.columns_held:
                if self._columns and next(iter(self._columns))[0] != store:  # another file or stamp
                    self._columns.clear()
                    self._held = 0
                self._columns[key] = found
                self._held += size
                while self._held > self.columns_held:
                    _, dropped = self._columns.popitem(last=False)
                    self._held -= 16 * len(dropped.ids) if dropped is not None else 0
        return found

    def sizes(self, store: StoreKey,
              load: Callable[[], tuple[int, npt.NDArray[np.float64]] | None]) -> tuple[int, Any] | None:
        """The columns' row sizes (top id, token count by id), read once per store and stamp."""
        with self.lock:
            kept = self._sizes.get(store)
        if kept is not None:
            return len(kept) - 1, kept
        found = load()
        if found is None:
            return None
        with self.lock:
            self._sizes.clear()  # one store's sizes at a time: a ReadIndex serves one store
            self._sizes[store] = found[1]
        return found

    def mask(self, store: StoreKey, documents: str,
             make: Callable[[], npt.NDArray[np.bool_]]) -> npt.NDArray[np.bool_]:
        """A filter's rows as a mask by chunk id, made once per store, stamp and allowed documents."""
        key = (store, documents)
        with self.lock:
            kept = self._masks.get(key)
        if kept is not None:
            return kept
        mask = make()
        with self.lock:
            while len(self._masks) >= KEEP_MASKS:
                self._masks.pop(next(iter(self._masks)))
            self._masks[key] = mask
        return mask

    def accumulator(self, top: int, zeros: Callable[[int], npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]:
        """A zeroed score array for ids 0..top: a kept one when long enough, else zeros(top + 1)."""
        with self.lock:
            while self._idle:
                acc = self._idle.pop()
                if len(acc) > top:
                    return acc
        return zeros(top + 1)

    def give_back(self, acc: npt.NDArray[np.float64]) -> None:
        """Keep a zeroed accumulator for the next query (at most KEEP_ACCUMULATORS)."""
        with self.lock:
            if len(self._idle) < KEEP_ACCUMULATORS:
                self._idle.append(acc)
