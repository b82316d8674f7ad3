"""The write operations outside an index run, each a frozen request: what `Engine.apply(op)` takes.

`Remove`, `Rebuild`, `Vacuum`, `Reset` and `SwitchStep` change the store where its write lock is held:
in this process (workers/maintenance.py HeldStore), or in the running `knowledge writer`, reached over
the one channel to it (workers/channel.py). Each has a wire form (to_wire / operation_from_wire, as
workers/payloads.py types what crosses the queues), applies itself to a HeldStore into its answer's
wire form, and reads its typed result back from that answer, so the result is the same whichever
process applied it. `Check` is read-mostly: the engine runs it here, with the lock when it is free
(the FTS cross-check writes) and without it otherwise, never through the writer.

What the writer raised crosses the channel by name through ERRORS, an explicit table (as httpx maps
httpcore's errors): a name it does not list comes back as PipelineError.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Protocol, Self, TypeVar

from config import errors
from config.errors import IndexNotBuilt, KnowledgeError, PipelineError
from config.settings import Settings
from pipeline import shadow
from pipeline.db import DatabaseError
from pipeline.integrity import Progress
from pipeline.repair import Repair, rebuild_store
from pipeline.store import Emptied, compact, reset
from pipeline.vectors import VectorIdentity
from workers.ledger.shapes import Wire
from workers.maintenance import HeldStore

R = TypeVar("R", covariant=True)
SWAP_WAIT_S = 600.0  # how long a switch waits for a running index run to end before it swaps


class Operation(Protocol[R]):
    """A change of the store: its name, the command it serves, how long a sender waits for the writer."""

    name: ClassVar[str]
    command: ClassVar[str]
    wait_s: ClassVar[float]
    whole_store: ClassVar[bool]  # rewrites or replaces the file: the run lock is held meanwhile (distributed)

    def to_wire(self) -> Wire: ...

    def needless(self, settings: Settings) -> Wire | None:
        """The answer when the store is absent and nothing needs doing (IndexNotBuilt where it must exist)."""
        ...

    def apply(self, held: HeldStore) -> Wire:
        """Apply it where the write lock is held; the answer's wire form. Errors propagate as raised."""
        ...

    def result(self, answer: Wire) -> R:
        """The typed result of an answer."""
        ...


def _require(settings: Settings) -> None:
    db_path = settings.db_path
    if not db_path.is_file() and not db_path.is_symlink():
        raise IndexNotBuilt.at(db_path)


class _WholeStore:
    """An operation on the whole store with no fields: its wire form is its name alone; by default it needs a
    store to exist (IndexNotBuilt without one) and may wait an hour for the lock."""

    name: ClassVar[str]
    wait_s: ClassVar[float] = 3600.0
    whole_store: ClassVar[bool] = True

    def needless(self, settings: Settings) -> Wire | None:
        _require(settings)
        return None

    def to_wire(self) -> Wire:
        return {"op": self.name}

    @classmethod
    def from_wire(cls, wire: Wire) -> Self:
        return cls()


@dataclass(frozen=True)
class Remove:
    """Delete documents by stored path; the result: those that were indexed."""

    paths: tuple[str, ...]
    name: ClassVar[str] = "remove"
    command: ClassVar[str] = "knowledge rm"
    wait_s: ClassVar[float] = 60.0
    whole_store: ClassVar[bool] = False

    def to_wire(self) -> Wire:
        return {"op": self.name, "paths": list(self.paths)}

    @classmethod
    def from_wire(cls, wire: Wire) -> Remove:
        return cls(tuple(str(p) for p in wire["paths"]))

    def needless(self, settings: Settings) -> Wire | None:
        return None if settings.db_path.is_file() else {"removed": []}

    def apply(self, held: HeldStore) -> Wire:
        store = held.store()
        removed = store.remove(list(self.paths))
        store.regroup(held.settings.languages)
        return {"removed": removed}

    def result(self, answer: Wire) -> list[str]:
        return [str(p) for p in answer["removed"]]


@dataclass(frozen=True)
class Rebuild(_WholeStore):
    """Repair the store's derived parts from its chunks (IndexNotBuilt without a store)."""

    name: ClassVar[str] = "rebuild"
    command: ClassVar[str] = "knowledge rebuild"

    def apply(self, held: HeldStore) -> Wire:
        with held.replacing():
            return rebuild_store(held.settings.db_path).to_json()

    def result(self, answer: Wire) -> Repair:
        return Repair.from_json(answer)


@dataclass(frozen=True)
class Vacuum(_WholeStore):
    """Rewrite the store without free pages (IndexNotBuilt without one); the result: bytes before, after."""

    name: ClassVar[str] = "vacuum"
    command: ClassVar[str] = "knowledge vacuum"

    def apply(self, held: HeldStore) -> Wire:
        with held.replacing():
            before, after = compact(held.settings.db_path)
        return {"before": before, "after": after}

    def result(self, answer: Wire) -> tuple[int, int]:
        return int(answer["before"]), int(answer["after"])


@dataclass(frozen=True)
class Reset(_WholeStore):
    """Replace the store with an empty one holding the schema."""

    name: ClassVar[str] = "reset"
    command: ClassVar[str] = "knowledge reset"
    wait_s: ClassVar[float] = 600.0

    def needless(self, settings: Settings) -> Wire | None:
        return None  # a missing store is reset too: to an empty one

    def apply(self, held: HeldStore) -> Wire:
        with held.replacing():
            emptied = reset(held.settings.db_path)
        return {"documents": emptied.documents, "chunks": emptied.chunks, "existed": emptied.existed}

    def result(self, answer: Wire) -> Emptied:
        return Emptied(answer["documents"], answer["chunks"], bool(answer["existed"]))


@dataclass(frozen=True)
class Switched:
    """A switch step's answer: what it stored, where the switch stands, or the run it waits for (busy)."""

    stored: int = 0
    embedded: int = 0
    total: int = 0
    swapped: bool = False
    busy: str | None = None


@dataclass(frozen=True)
class SwitchStep:
    """One step of a vector switch (start, store, finish, abandon), in its own transaction."""

    step: str
    identity: VectorIdentity
    ids: tuple[int, ...] = ()
    vectors: tuple[bytes, ...] = field(default=(), repr=False)
    digests: tuple[str, ...] = ()
    name: ClassVar[str] = "switch"
    command: ClassVar[str] = "knowledge vectors switch"
    wait_s: ClassVar[float] = 120.0
    whole_store: ClassVar[bool] = False

    def to_wire(self) -> Wire:
        wire: Wire = {"op": self.name, "step": self.step, "identity": self.identity.to_dict()}
        if self.step == "store":
            wire |= {"ids": list(self.ids), "vectors": [base64.b64encode(v).decode("ascii") for v in self.vectors],
                     "digests": list(self.digests)}
        return wire

    @classmethod
    def from_wire(cls, wire: Wire) -> SwitchStep:
        return cls(str(wire["step"]), VectorIdentity.from_dict(wire["identity"]),
                   tuple(int(i) for i in wire.get("ids", ())),
                   tuple(base64.b64decode(v) for v in wire.get("vectors", ())),
                   tuple(str(d) for d in wire.get("digests", ())))

    def needless(self, settings: Settings) -> Wire | None:
        return None

    def apply(self, held: HeldStore) -> Wire:
        store, identity = held.store(), self.identity
        if self.step == "start":
            with store.transaction() as conn:
                shadow.start(conn, identity)
            return {"ok": True}
        if self.step == "store":
            with store.transaction() as conn:
                return {"stored": shadow.store_vectors(conn, identity, list(self.ids), list(self.vectors),
                                                       list(self.digests))}
        if self.step == "finish":
            holder = held.run_holder()
            if holder is not None:  # a run planned with the pinned identity: it must end first
                done = shadow.progress(store.conn, identity)
                return {"busy": holder, "embedded": done.embedded, "total": done.total}
            with store.transaction() as conn:
                done = shadow.finish(conn, identity)
            return {"embedded": done.embedded, "total": done.total, "swapped": done.swapped}
        if self.step == "abandon":
            with store.transaction() as conn:
                shadow.abandon(conn)
            return {"ok": True}
        raise PipelineError(f"unknown switch step {self.step!r}")

    def result(self, answer: Wire) -> Switched:
        return Switched(int(answer.get("stored", 0)), int(answer.get("embedded", 0)), int(answer.get("total", 0)),
                        bool(answer.get("swapped", False)), answer.get("busy"))


@dataclass(frozen=True)
class Check:
    """Find damage in the store (IndexNotBuilt without one); run here, never by the writer."""

    full: bool = False
    progress: Progress | None = field(default=None, compare=False, repr=False)  # told each step as it starts
    name: ClassVar[str] = "check"
    command: ClassVar[str] = "knowledge check"


class EngineShadowWriter:
    """shadow.ShadowWriter over an engine's apply: each step one SwitchStep."""

    def __init__(self, apply: Callable[[SwitchStep], Switched], swap_wait_s: float = SWAP_WAIT_S,
                 pause_s: float = 0.5) -> None:
        self.apply, self.swap_wait_s, self.pause_s = apply, swap_wait_s, pause_s

    def start(self, identity: VectorIdentity) -> None:
        self.apply(SwitchStep("start", identity))

    def store(self, identity: VectorIdentity, ids: list[int], vectors: list[bytes], digests: list[str]) -> None:
        self.apply(SwitchStep("store", identity, tuple(ids), tuple(vectors), tuple(digests)))

    def finish(self, identity: VectorIdentity) -> shadow.Progress:
        deadline = time.monotonic() + self.swap_wait_s
        while True:
            reply = self.apply(SwitchStep("finish", identity))
            if reply.busy is None or time.monotonic() >= deadline:
                return shadow.Progress(identity, reply.embedded, reply.total, reply.swapped)
            time.sleep(self.pause_s)  # an index run holds the run lock: swap after it

    def abandon(self) -> None:
        self.apply(SwitchStep("abandon", VectorIdentity("", 0)))


# Every operation the writer applies for a sender, by the name its wire form carries.
SENT: dict[str, type[Remove | Rebuild | Vacuum | Reset | SwitchStep]] = {
    kind.name: kind for kind in (Remove, Rebuild, Vacuum, Reset, SwitchStep)
}


def operation_from_wire(wire: Wire) -> Remove | Rebuild | Vacuum | Reset | SwitchStep:
    """A sent operation, typed by its name (PipelineError for a name no sender uses)."""
    kind = SENT.get(str(wire.get("op")))
    if kind is None:
        raise PipelineError(f"unknown operation {wire.get('op')!r}")
    return kind.from_wire(wire)


# The errors an operation may raise in the writer, by the name that crosses the channel: the same class is
# raised again in the sender. A name not listed comes back as PipelineError (its text kept).
ERRORS: dict[str, type[KnowledgeError]] = {
    "KnowledgeError": errors.KnowledgeError,
    "UsageError": errors.UsageError,
    "StoreError": errors.StoreError,
    "IndexNotBuilt": errors.IndexNotBuilt,
    "StoreFormatError": errors.StoreFormatError,
    "UnsafePathError": errors.UnsafePathError,
    "StoreDamaged": errors.StoreDamaged,
    "StoreReadOnly": errors.StoreReadOnly,
    "StoreFull": errors.StoreFull,
    "StoreBusy": errors.StoreBusy,
    "RunInProgress": errors.RunInProgress,
    "PipelineError": errors.PipelineError,
    "BrokerError": errors.BrokerError,
    "ConfigError": errors.ConfigError,
    "QueryError": errors.QueryError,
    "FileSkipped": errors.FileSkipped,
    "FetchError": errors.FetchError,
    "EmbeddingError": errors.EmbeddingError,
    "EmbeddingUnavailable": errors.EmbeddingUnavailable,
    "EmbeddingRejected": errors.EmbeddingRejected,
    "VectorIdentityMismatch": errors.VectorIdentityMismatch,
}


def answer(held: HeldStore, wire: Wire) -> Wire:
    """The answer a writer sends back for one sent operation: its result, or the error it raised (name and text)."""
    try:
        return operation_from_wire(wire).apply(held)
    except (KnowledgeError, DatabaseError) as exc:
        return {"error": str(exc), "kind": type(exc).__name__}


def raise_for(reply: Wire) -> Wire:
    """The reply, or the error it carries raised again as the class ERRORS names (PipelineError when unlisted)."""
    if "error" not in reply:
        return reply
    raise ERRORS.get(str(reply.get("kind")), PipelineError)(str(reply["error"]))

