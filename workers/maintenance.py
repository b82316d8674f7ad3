"""What changes the store outside an index run, applied wherever the store's write lock is held.

HeldStore is the store under this process's write lock: the in-process engine's, a maintenance
command's, or the `knowledge writer`'s for its lifetime (the one place the write lock is taken).
The changes themselves are workers/operations.py's frozen requests (Remove, Rebuild, Vacuum, Reset,
SwitchStep), each applied to a HeldStore: workers/engine.py applies one in this process when it holds
the lock, or sends it to the running writer (workers/channel.py), which applies the same request and
answers the same thing. HeldStore.attempt is `check`'s way in: the lock when it is free, else why not.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager

from config.errors import KnowledgeError, StoreBusy, StoreError, StoreReadOnly
from config.settings import Settings
from pipeline.db import DatabaseError
from pipeline.integrity import BUSY, READ_ONLY
from pipeline.lock import WriteLock
from pipeline.paths import PathBase
from pipeline.store import Store
from workers.runtime import Runtime

WRITER_HOLDER = "knowledge writer"  # what the writer writes into the lock file: the engine recognises it


class HeldStore:
    """The store under this process's write lock: the lock taken by acquire(), the Store opened on first
    use and closed around an operation that rewrites or replaces the file."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.lock = WriteLock(settings.store_dir)
        self.held = False
        self._store: Store | None = None
        self.runtime: Runtime | None = None  # the pipeline running on this store, kept in step on a reopen

    def acquire(self, holder: str) -> None:
        """Take the write lock (StoreBusy, exit 75, when another process holds it); a no-op once held."""
        if not self.held:
            self.lock.acquire(holder)
            self.held = True

    def holder(self) -> str:
        """Who holds the lock, as its holder wrote it ("knowledge writer pid=..."), or ""."""
        return self.lock.holder()

    def store(self) -> Store:
        """The open store (opened, or created, on first use)."""
        if self._store is None:
            self._store = Store(self.settings.db_path, PathBase.at(self.settings.path_base),
                                checkpoints=self.settings.checkpoints == "sqlite")
            if self.runtime is not None:
                self.runtime.store = self._store
        return self._store

    @contextmanager
    def replacing(self) -> Iterator[None]:
        """The Store closed while the file is rewritten or replaced; reopened after for a running pipeline."""
        if self._store is not None:
            self._store.close()
            self._store = None
        if self.runtime is not None:
            self.runtime.store = None
        try:
            yield
        finally:
            if self.runtime is not None:  # a file that no longer opens fails the pipeline's next write instead
                with contextlib.suppress(KnowledgeError, DatabaseError):
                    self.store()

    def run_holder(self) -> str | None:
        """The index run holding the run lock of the pipeline on this store, if any."""
        return self.runtime.ledger.run_lock.holder() if self.runtime is not None else None

    def attempt(self, holder: str) -> str | None:
        """Take the write lock when it is free: None once held, else why not (BUSY, or READ_ONLY for a store on
        a read-only file system); what `check` runs its writing steps by."""
        try:
            self.acquire(holder)
        except StoreReadOnly:
            return READ_ONLY
        except (StoreError, OSError):  # busy, or a directory this user cannot write: check read-only
            return BUSY
        return None

    def close(self) -> None:
        """Close the store and release the lock."""
        if self._store is not None:
            self._store.close()
            self._store = None
        self.lock.release()
        self.held = False


def busy(exc: StoreBusy, command: str) -> StoreBusy:
    """The refusal of a command while another process (a run, another command) holds the store."""
    return StoreBusy(f"{exc}; `{command}` needs the store to itself: run it when that ends")
