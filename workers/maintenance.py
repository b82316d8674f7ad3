"""What changes the store outside an index run, applied wherever the store's write lock is held.

HeldStore is the store under this process's write lock: the in-process engine's, a maintenance
command's, or the `knowledge writer`'s for its lifetime (the one place the write lock is taken).
OPERATIONS are the changes: remove documents, rebuild, vacuum, reset, and one step of a vector
switch. Each takes JSON-able arguments and gives a JSON-able answer, so workers/engine.py applies
it in this process when it holds the lock, or sends it to the running writer (workers/channel.py),
which applies the same function and answers the same thing.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from config import errors
from config.errors import KnowledgeError, PipelineError, StoreBusy
from config.settings import Settings
from pipeline import shadow
from pipeline.db import DatabaseError
from pipeline.lock import WriteLock
from pipeline.paths import PathBase
from pipeline.repair import rebuild_store
from pipeline.store import Store, compact, reset
from pipeline.vectors import VectorIdentity
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

    def apply(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        """Apply one operation here (the lock held); its answer. Errors propagate as raised."""
        self.acquire(f"knowledge {op}")
        return OPERATIONS[op](self, args)

    def close(self) -> None:
        """Close the store and release the lock."""
        if self._store is not None:
            self._store.close()
            self._store = None
        self.lock.release()
        self.held = False


Operation = Callable[[HeldStore, dict[str, Any]], dict[str, Any]]


def _remove(held: HeldStore, args: dict[str, Any]) -> dict[str, Any]:
    store = held.store()
    removed = store.remove([str(p) for p in args["paths"]])
    store.regroup(held.settings.languages)
    return {"removed": removed}


def _rebuild(held: HeldStore, args: dict[str, Any]) -> dict[str, Any]:
    with held.replacing():
        return rebuild_store(held.settings.db_path).to_json()


def _vacuum(held: HeldStore, args: dict[str, Any]) -> dict[str, Any]:
    with held.replacing():
        before, after = compact(held.settings.db_path)
    return {"before": before, "after": after}


def _reset(held: HeldStore, args: dict[str, Any]) -> dict[str, Any]:
    with held.replacing():
        emptied = reset(held.settings.db_path)
    return {"documents": emptied.documents, "chunks": emptied.chunks, "existed": emptied.existed}


def _switch(held: HeldStore, args: dict[str, Any]) -> dict[str, Any]:
    """One step of a vector switch (start, store, finish, abandon), in its own transaction."""
    step, identity = str(args["step"]), VectorIdentity.from_dict(args["identity"])
    store = held.store()
    if step == "start":
        with store.transaction() as conn:
            shadow.start(conn, identity)
        return {"ok": True}
    if step == "store":
        blobs = [base64.b64decode(v) for v in args["vectors"]]
        with store.transaction() as conn:
            return {"stored": shadow.store_vectors(conn, identity, list(args["ids"]), blobs, list(args["digests"]))}
    if step == "finish":
        holder = held.run_holder()
        if holder is not None:  # a run planned with the pinned identity: it must end first
            done = shadow.progress(store.conn, identity)
            return {"busy": holder, "embedded": done.embedded, "total": done.total}
        with store.transaction() as conn:
            done = shadow.finish(conn, identity)
        return {"embedded": done.embedded, "total": done.total, "swapped": done.swapped}
    if step == "abandon":
        with store.transaction() as conn:
            shadow.abandon(conn)
        return {"ok": True}
    raise PipelineError(f"unknown switch step {step!r}")


OPERATIONS: dict[str, Operation] = {"remove": _remove, "rebuild": _rebuild, "vacuum": _vacuum, "reset": _reset,
                                    "switch": _switch}
# The command each operation serves, for what a refusal says.
COMMANDS = {"remove": "knowledge rm", "rebuild": "knowledge rebuild", "vacuum": "knowledge vacuum",
            "reset": "knowledge reset", "switch": "knowledge vectors switch"}


def answer(held: HeldStore, op: str, args: dict[str, Any]) -> dict[str, Any]:
    """The answer a writer sends back for one operation: its result, or the error it raised (its kind and text)."""
    try:
        return held.apply(op, args)
    except (KnowledgeError, DatabaseError) as exc:
        return {"error": str(exc), "kind": type(exc).__name__}


def raise_for(reply: dict[str, Any]) -> dict[str, Any]:
    """The reply, or the error it carries raised again as the kind the writer raised (PipelineError when unknown)."""
    if "error" not in reply:
        return reply
    kind = getattr(errors, str(reply.get("kind")), None)
    if isinstance(kind, type) and issubclass(kind, KnowledgeError):
        raise kind(str(reply["error"]))
    raise PipelineError(str(reply["error"]))


def busy(exc: StoreBusy, op: str) -> StoreBusy:
    """The refusal of an operation while another process (a run, another command) holds the store."""
    return StoreBusy(f"{exc}; `{COMMANDS[op]}` needs the store to itself: run it when that ends")
