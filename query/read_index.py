"""ReadIndex: the store as the read side holds it, one Reader lent per request and kept for the next.

A one-shot command (the CLI) keeps nothing: each request opens a Reader and closes it. A server
(`knowledge serve`) keeps up to `keep` idle Readers, so a request pays for no open (the sqlite-vec
load, the temp views, the format check) and what the lexical engine keeps (`lexical`: the document
frequencies and decoded posting columns of query/lexical/) outlive the request; query/generation.py's
answers are kept per store file already. A kept Reader is checked before it is lent again:

- the store file it was opened on must still be the one at the path (a reset or a removed store
  leaves it behind: it is closed, and the request opens afresh or answers "not built");
- when the store's version (`PRAGMA data_version`, changed by every commit of another connection)
  moved since its last use, the format is checked again and the meta (the pinned vector identity)
  re-read, exactly as a fresh open would.

A Reader whose request raised is closed, never kept (but a QueryError, the caller's fault,
keeps it). Thread-safe: each Reader serves one request at a time.

This is the one module that opens a Reader (tests/test_architecture.py pins it), and every Reader it
opens carries its Caches (query/caches.py): what the read side keeps across requests and Readers
(a generation's match columns, the vector lists, the reranker's connections) hangs on the index,
not on module globals, and goes with close().
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from config.errors import IndexNotBuilt, QueryError
from config.settings import Settings
from pipeline import db
from pipeline.paths import file_identity
from query.caches import Caches
from query.reader import Reader


@dataclass
class _Kept:
    """An idle Reader, the store file it reads and the store version it last saw."""

    reader: Reader
    identity: tuple[int, int] | None
    version: int


class ReadIndex:
    """The read connections of one store: lent per request, up to `keep` of them kept between requests."""

    def __init__(self, settings: Settings, keep: int = 0) -> None:
        self.settings = settings
        self.keep = keep
        self.pid = os.getpid()
        self._idle: list[_Kept] = []
        self._lock = threading.Lock()
        self.caches = Caches()

    def open(self) -> Reader | None:
        """A new Reader of the store with this index's caches, the caller's to close (None: never built)."""
        try:
            return Reader(self.settings, self.caches)
        except IndexNotBuilt:
            return None

    @contextmanager
    def reader(self) -> Iterator[Reader | None]:
        """A Reader for one request, or None when the index was never built.

        A SQLite damage error met inside the block is raised as StoreDamaged naming check and rebuild.
        """
        path = self.settings.db_path
        with db.translating_damage(path):
            kept = self._lend()
        if kept is None:
            yield None
            return
        done = False
        try:
            with db.translating_damage(path):
                yield kept.reader
            done = True
        except QueryError:
            done = True  # the caller's query was refused: the connection is as good as before
            raise
        finally:
            self._give_back(kept, done)

    def warm(self, prime: Callable[[Reader], object] | None = None,
             after: Callable[[Reader], object] | None = None) -> threading.Thread:
        """Open one Reader in the background, run prime on it, and keep it for the first request.

        A server calls this as it starts, so its first request pays neither the open nor the caches'
        filling. A request that comes meanwhile is not held up: the pool is empty, so it opens a
        Reader of its own and answers. A warm-up that fails leaves nothing kept; the first request
        then meets the same failure and reports it as any request does. after, when given, runs
        once the primed Reader is kept, on a Reader of its own (closed after it, never kept): for
        the longer fillings of caches the process keeps (match's common words), which hold no
        request's Reader up.
        """
        def run() -> None:
            with contextlib.suppress(Exception):  # the requests report what went wrong, with context
                with self.reader() as reader:
                    if reader is not None and prime is not None:
                        prime(reader)
            if after is None:
                return
            with contextlib.suppress(Exception):
                other = self.open()
                if other is not None:
                    with other:
                        after(other)

        thread = threading.Thread(target=run, name="knowledge-warm-up", daemon=True)
        thread.start()
        return thread

    def _lend(self) -> _Kept | None:
        """A checked idle Reader, else a new one (None when the index was never built)."""
        path = self.settings.db_path
        identity = file_identity(path)
        while True:
            with self._lock:
                if os.getpid() != self.pid:  # a forked child never uses its parent's connections
                    self._idle, self.pid = [], os.getpid()
                kept = self._idle.pop() if self._idle else None
            if kept is None:
                break
            if kept.identity != identity or identity is None:
                kept.reader.close()
                continue
            try:
                version = kept.reader.version()
                if version != kept.version:
                    kept.reader.recheck()
                    kept.version = version
            except Exception:
                kept.reader.close()
                raise
            return kept
        reader = self.open()
        if reader is None:
            return None
        try:
            return _Kept(reader, file_identity(path), reader.version() if self.keep else -1)
        except Exception:
            reader.close()
            raise

    def _give_back(self, kept: _Kept, done: bool) -> None:
        with self._lock:
            if done and len(self._idle) < self.keep and os.getpid() == self.pid:
                self._idle.append(kept)
                return
        kept.reader.close()

    def close(self) -> None:
        """Close every idle Reader and let go of what the caches kept."""
        with self._lock:
            idle, self._idle = self._idle, []
        for kept in idle:
            kept.reader.close()
        self.caches.close()
