"""SnapshotIndex: a read-only replica's store, the newest verified generation of a published directory.

`knowledge serve --snapshots DIR` reads generations that `knowledge publish` wrote (pipeline/publish.py).
Each generation served has a ReadIndex of its own, its file opened immutable (it is never modified).
A poller looks at DIR every poll interval; a generation newer than the one served is verified
(manifest, size, SHA-256), warmed (one Reader opened and its format checked) and swapped in under a
lock: a request lends from the generation current when it starts and finishes on it; a retired
generation's Readers are closed when its last request gives its Reader back. A generation that
fails verification is refused, logged once and never tried again, and the last good one keeps
serving. With no generation yet, requests answer index_not_built and the first one to appear is
picked up.

The generation a request was answered from is kept per thread (a /v1 handler runs its request in
one worker thread) so the HTTP layer can stamp it on the answer.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.errors import KnowledgeError
from config.instruments import STAGE, instruments
from config.settings import Settings
from pipeline import db
from pipeline import publish as snapshots
from query.read_index import ReadIndex
from query.reader import Reader
from query.terminal import name

log = logging.getLogger("knowledge.replica")


@dataclass
class _Served:
    """One generation being served: its manifest, its ReadIndex and the requests still reading it."""

    manifest: snapshots.Manifest
    index: ReadIndex
    users: int = 0
    retired: bool = False


class SnapshotIndex(ReadIndex):
    """The ReadIndex of a replica: lends from the newest verified generation, swapping newer ones in."""

    def __init__(self, settings: Settings, directory: Path, keep: int = 0) -> None:
        super().__init__(settings, keep)
        self.directory = directory
        self.refused: set[int] = set()
        self._served: _Served | None = None
        self._swap = threading.Lock()
        self._polling = threading.Lock()  # one poll at a time: the poller's and a puller's after an install
        self._local = threading.local()
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        self.pull_status: Callable[[], dict[str, Any]] | None = None  # with --pull-from: the Puller's record

    @property
    def generation(self) -> int | None:
        """The generation new requests read (None before the first)."""
        served = self._served
        return served.manifest.generation if served else None

    def answered_from(self) -> int | None:
        """The generation this thread's last request read (else the current one), forgotten once asked."""
        generation = getattr(self._local, "generation", -1)
        self._local.generation = -1
        return self.generation if generation == -1 else generation

    def health(self) -> dict[str, Any]:
        """generation, age_s and the manifest's counts of the generation served (generation None before one)."""
        served = self._served
        pulls = {"pull": self.pull_status()} if self.pull_status is not None else {}
        if served is None:
            return {"generation": None, "snapshots": str(self.directory), **pulls}
        m = served.manifest
        return {"generation": m.generation, "age_s": round(max(time.time() - m.created, 0.0), 3),
                "documents": m.documents, "chunks": m.chunks, "bytes": m.bytes, **pulls}

    def sample(self) -> tuple[int, float] | None:
        """(generation, age in seconds) of the generation served, for the metrics (None before the first)."""
        served = self._served
        if served is None:
            return None
        return served.manifest.generation, max(time.time() - served.manifest.created, 0.0)

    @contextmanager
    def reader(self) -> Iterator[Reader | None]:
        """A Reader of the current generation for one request (None before the first generation)."""
        with self._swap:
            served = self._served
            if served is not None:
                served.users += 1
        self._local.generation = served.manifest.generation if served else None
        if served is None:
            yield None
            return
        try:
            with served.index.reader() as reader:
                yield reader
        finally:
            with self._swap:
                served.users -= 1
                drained = served.retired and served.users == 0
            if drained:
                served.index.close()

    def poll(self) -> int | None:
        """Swap in the newest generation newer than the one served that verifies; the generation served."""
        with self._polling:
            return self._poll()

    def _poll(self) -> int | None:
        current = self.generation or 0
        for number in snapshots.generations(self.directory):
            if number <= current:
                break
            if number in self.refused:
                continue
            try:
                self._swap_in(snapshots.verify(self.directory, number))
            except (KnowledgeError, OSError, db.DatabaseError) as exc:  # refused; the one served goes on
                self.refused.add(number)
                instruments().snapshot_refused.add(1, {STAGE: "verify"})
                reason = name(str(exc))  # it quotes the manifest, written elsewhere: never raw to a terminal
                log.warning("refused generation %d of %s: %s", number, name(str(self.directory)), reason)
                print(f"knowledge: warning: refused generation {number}: {reason}; still serving generation "
                      f"{self.generation}", file=sys.stderr, flush=True)
                continue
            break
        return self.generation

    def _swap_in(self, manifest: snapshots.Manifest) -> None:
        """Open, warm and swap in a verified generation; the old one closes once drained."""
        store = snapshots.generation_dir(self.directory, manifest.generation)
        settings = dataclasses.replace(self.settings, directory=str(store.resolve()))
        db.treat_as_immutable(settings.db_path)
        index = ReadIndex(settings, self.keep)
        with index.reader() as reader:  # warm: open a Reader (the format check, sqlite-vec) before traffic
            if reader is None:
                raise snapshots.SnapshotRefused(f"generation {manifest.generation}: its file vanished")
            reader.version()
        with self._swap:
            old, self._served = self._served, _Served(manifest, index)
            drained = old is not None and old.users == 0
            if old is not None:
                old.retired = True
        if drained and old is not None:
            old.index.close()
        print(name(f"knowledge: serving generation {manifest.generation} ({manifest.documents} documents, "
                   f"{manifest.chunks} chunks) from {self.directory}"), file=sys.stderr, flush=True)

    def start(self, interval: float) -> None:
        """Poll now, then every interval seconds in a daemon thread until close()."""
        instruments().snapshot_refused.add(0, {STAGE: "verify"})  # the series exists at 0: increase() sees the first
        self.poll()

        def run() -> None:
            while not self._stop.wait(interval):
                try:
                    self.poll()
                except Exception:  # a transient error (the directory unmounted): try again next time
                    log.exception("polling %s failed", self.directory)

        self._poller = threading.Thread(target=run, name="knowledge-snapshots", daemon=True)
        self._poller.start()

    def close(self) -> None:
        """Stop polling and close the generation served."""
        self._stop.set()
        with self._swap:
            served, self._served = self._served, None
        if served is not None:
            served.index.close()
        super().close()
