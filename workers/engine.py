"""The write side's one door: every command that changes the store goes through an Engine.

open_engine(settings) is the one place that decides between the two deployments: in-process (no
broker: this process holds the write lock and runs the actors on a StubBroker) and distributed
(a broker: index runs go to the workers and the writer through Redis). Either way the
maintenance commands (rm, rebuild, vacuum, reset, vectors switch) take the same path: the engine
takes the store's write lock and applies the operation here (workers/maintenance.py), or, when the
lock is held by a running `knowledge writer`, sends it to that writer over the one channel to it
(workers/channel.py), which applies the same operation; the answer is the same either way. In the
distributed deployment an operation that rewrites or replaces the whole store also holds the run
lock meanwhile, so no index run starts (or is planned) against the store it changes.
"""

from __future__ import annotations

import base64
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, Self

import dramatiq

from config.errors import IndexNotBuilt, KnowledgeError, RunInProgress, StoreBusy, UsageError
from config.observability import tracer
from config.settings import Settings
from pipeline import shadow, vectors
from pipeline.embeddings import Probe
from pipeline.repair import Repair
from pipeline.store import Emptied
from pipeline.vectors import VectorIdentity
from workers import queues
from workers.actors import declare_actors
from workers.broker import build_stub_broker
from workers.ledger import InMemoryLedger, Ledger, RunSummary
from workers.ledger.shapes import LOCK_TTL_MS
from workers.maintenance import WRITER_HOLDER, HeldStore, busy
from workers.run import Progress, RunRequest, Targets, follow, new_run_id, plan_and_enqueue
from workers.runtime import Runtime, install, uninstall

if TYPE_CHECKING:  # the distributed side (redis) is imported only when a broker is configured
    from workers.channel import WriterChannel
    from workers.distributed import Enqueued

IDLE_MS = 50  # a one-shot command's idle worker threads: also about how long stopping takes
Notes = Callable[[str], None]
# How long a sender waits for the writer's answer: one step of a switch, or a whole-store rewrite.
WAIT_S = {"remove": 60.0, "switch": 120.0, "rebuild": 3600.0, "vacuum": 3600.0, "reset": 600.0}
WHOLE_STORE = frozenset({"rebuild", "vacuum", "reset"})
SWAP_WAIT_S = 600.0  # how long a switch waits for a running index run to end before it swaps


class Engine(Protocol):
    """What changes the store: index runs and the maintenance operations, held for a `with` block."""

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

    def start(self, holder: str = "index") -> None:
        """Be ready for index runs now: a refusal (the store held, a dead embeddings server) comes here
        (holder: the command named in the lock to whoever is refused, "index" or "watch")."""
        ...

    def run(self, request: RunRequest, progress: Progress | None = None, targets: Targets | None = None,
            timeout: float | None = None) -> RunSummary:
        """Index per request and wait for the run to finish (KnowledgeError past timeout)."""
        ...

    def detach(self, request: RunRequest, targets: Targets) -> Enqueued:
        """Walk and enqueue an index run, and return what was enqueued without waiting (a broker only)."""
        ...

    def remove(self, paths: list[str]) -> list[str]:
        """Delete documents by stored path; those that were indexed."""
        ...

    def rebuild(self) -> Repair:
        """Repair the store's derived parts from its chunks."""
        ...

    def vacuum(self) -> tuple[int, int]:
        """Rewrite the store without free pages: bytes before, after."""
        ...

    def reset(self) -> Emptied:
        """Replace the store with an empty one."""
        ...

    def shadow_writer(self) -> shadow.ShadowWriter:
        """The writer of a vector switch's steps."""
        ...


def open_engine(settings: Settings, notes: Notes | None = None, idle_ms: int = IDLE_MS) -> Engine:
    """The engine settings call for: distributed with a broker, else in-process (notes: what a followed
    distributed run says while it goes on; idle_ms: how often an idle in-process worker thread wakes)."""
    if settings.broker is not None:
        return DistributedEngine(settings, notes or (lambda _text: None))
    return InProcessEngine(settings, idle_ms)


class StoreChanges:
    """The maintenance operations, written once over _apply (here, or through the running writer)."""

    settings: Settings

    def _hold(self, op: str) -> None:
        """Take the write lock for op, or find the writer that holds it (a refusal comes here)."""
        raise NotImplementedError

    def _apply(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def remove(self, paths: list[str]) -> list[str]:
        """Delete documents by stored path; those that were indexed (none without a store)."""
        if not self.settings.db_path.is_file():
            return []
        return [str(p) for p in self._apply("remove", {"paths": list(paths)})["removed"]]

    def rebuild(self) -> Repair:
        """Repair the store from its chunks (IndexNotBuilt without one; StoreDamaged when the file is)."""
        self._require_store()
        return Repair.from_json(self._apply("rebuild", {}))

    def vacuum(self) -> tuple[int, int]:
        """Rewrite the store without free pages (IndexNotBuilt without one): bytes before, after."""
        self._require_store()
        done = self._apply("vacuum", {})
        return int(done["before"]), int(done["after"])

    def reset(self) -> Emptied:
        """Replace the store with an empty one holding the schema."""
        done = self._apply("reset", {})
        return Emptied(done["documents"], done["chunks"], bool(done["existed"]))

    def shadow_writer(self) -> shadow.ShadowWriter:
        """The writer of a vector switch's steps, through this engine (the lock taken, or the writer found, now)."""
        self._hold("switch")
        return EngineShadowWriter(self._apply)

    def _require_store(self) -> None:
        db_path = self.settings.db_path
        if not db_path.is_file() and not db_path.is_symlink():
            raise IndexNotBuilt.at(db_path)


class EngineShadowWriter:
    """shadow.ShadowWriter over an engine's operations: each step one `switch` operation."""

    def __init__(self, apply: Callable[[str, dict[str, Any]], dict[str, Any]], swap_wait_s: float = SWAP_WAIT_S,
                 pause_s: float = 0.5) -> None:
        self.apply, self.swap_wait_s, self.pause_s = apply, swap_wait_s, pause_s

    def _step(self, step: str, identity: VectorIdentity, **more: Any) -> dict[str, Any]:
        return self.apply("switch", {"step": step, "identity": identity.to_dict(), **more})

    def start(self, identity: VectorIdentity) -> None:
        self._step("start", identity)

    def store(self, identity: VectorIdentity, ids: list[int], vectors: list[bytes], digests: list[str]) -> None:
        self._step("store", identity, ids=ids, vectors=[base64.b64encode(v).decode("ascii") for v in vectors],
                   digests=digests)

    def finish(self, identity: VectorIdentity) -> shadow.Progress:
        deadline = time.monotonic() + self.swap_wait_s
        while True:
            reply = self._step("finish", identity)
            if "busy" not in reply or time.monotonic() >= deadline:
                return shadow.Progress(identity, int(reply["embedded"]), int(reply["total"]),
                                       bool(reply.get("swapped", False)))
            time.sleep(self.pause_s)  # an index run holds the run lock: swap after it

    def abandon(self) -> None:
        self._step("abandon", VectorIdentity("", 0))


class InProcessEngine(StoreChanges):
    """The in-process deployment: this process holds the write lock (from its first operation to the end
    of the `with` block) and runs the actors on a StubBroker, started by the first index run."""

    def __init__(self, settings: Settings, idle_ms: int = IDLE_MS) -> None:
        self.settings = settings
        self.idle_ms = idle_ms
        self.held = HeldStore(settings)
        self.ledger: Ledger = InMemoryLedger()
        self.broker: dramatiq.Broker | None = None
        self.workers: list[dramatiq.Worker] = []
        self.runtime: Runtime | None = None
        self.probe: Probe | None = None

    def __enter__(self) -> Self:
        return self

    def _hold(self, op: str) -> None:
        try:
            self.held.acquire(f"knowledge {op} (in-process)")
        except StoreBusy as exc:
            if op in ("index", "watch"):
                raise
            raise busy(exc, op) from None

    def _apply(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        self._hold(op)
        return self.held.apply(op, args)

    def start(self, holder: str = "index") -> None:
        """Take the lock (naming `knowledge <holder>`), probe the embeddings server, open the store and
        start the actors (once)."""
        if self.runtime is not None:
            return
        self._hold(holder)
        emb = self.settings.embeddings
        if emb is not None:  # before the store is opened (or created): a dead server writes nothing
            self.probe = vectors.probe_server(emb)
        store = self.held.store()
        self.broker = build_stub_broker()
        actors = declare_actors(self.broker)
        self.runtime = Runtime(self.settings, self.ledger, store, actors)
        self.held.runtime = self.runtime
        install(self.runtime)
        self.workers = [
            dramatiq.Worker(self.broker, queues=set(queues.WORKER_QUEUES) - {queues.EMBED},
                            worker_threads=self.settings.workers, worker_timeout=self.idle_ms),
            dramatiq.Worker(self.broker, queues=set(queues.WRITER_QUEUES), worker_threads=1,
                            worker_timeout=self.idle_ms),
        ]
        if emb is not None:  # `concurrency` embedding requests in flight, beside the ingest threads
            self.workers.append(dramatiq.Worker(self.broker, queues={queues.EMBED},
                                                worker_threads=emb.concurrency, worker_timeout=self.idle_ms))
        for worker in self.workers:
            worker.start()

    def run(self, request: RunRequest, progress: Progress | None = None, targets: Targets | None = None,
            timeout: float | None = None) -> RunSummary:
        """Index per request (its targets, when already resolved) and wait for the run to finish.

        Past timeout seconds the run is abandoned (KnowledgeError): what was written stays, and the
        next run converges on the rest.
        """
        targets = targets if targets is not None else request.targets(self.settings)
        self.start()
        assert self.runtime is not None
        run_id = new_run_id()
        with tracer().start_as_current_span("index run", attributes={"knowledge.run_id": run_id,
                                                                     "knowledge.mode": "in-process"}):
            with tracer().start_as_current_span("walk"):
                probe, self.probe = self.probe, None
                plan_and_enqueue(self.settings, self.ledger, self.runtime.actors, request, targets, run_id, probe)
            try:
                return follow(self.ledger, run_id, progress, timeout=timeout)
            except TimeoutError as exc:
                raise KnowledgeError(f"{exc}; what was written stays, and `knowledge index` again finishes the rest"
                                     ) from None

    def detach(self, request: RunRequest, targets: Targets) -> Enqueued:
        """Refused: a detached run needs workers that outlive this process."""
        raise UsageError("--detach needs a broker (knowledge.broker.url or KNOWLEDGE_BROKER_URL)")

    def __exit__(self, *exc: object) -> None:
        stoppers = [threading.Thread(target=worker.stop) for worker in self.workers]
        for stopper in stoppers:  # each stop waits out its threads' poll timeout: wait once, not twice
            stopper.start()
        for stopper in stoppers:
            stopper.join()
        if self.broker is not None:
            self.broker.close()
        if self.runtime is not None:
            uninstall()
        self.held.close()


class DistributedEngine(StoreChanges):
    """The distributed deployment: index runs through Redis to the workers and the writer; an operation
    applied here when the write lock is free, else by the `knowledge writer` holding it."""

    def __init__(self, settings: Settings, notes: Notes) -> None:
        self.settings = settings
        self.notes = notes
        self.held: HeldStore | None = None  # the lock, once an operation found it free
        self.via_writer = False  # or: a running writer holds it, and answers through the channel
        self.channel: WriterChannel | None = None

    def __enter__(self) -> Self:
        return self

    def start(self, holder: str = "index") -> None:
        """Nothing to ready: each run takes the run lock in Redis as it starts."""

    def run(self, request: RunRequest, progress: Progress | None = None, targets: Targets | None = None,
            timeout: float | None = None) -> RunSummary:
        """Enqueue the run for the workers and the writer and follow it to its end."""
        from workers.distributed import run_distributed

        targets = targets if targets is not None else request.targets(self.settings)
        result = run_distributed(self.settings, request, targets, progress or (lambda _summary: None), self.notes,
                                 detach=False, timeout=timeout)
        if not isinstance(result, RunSummary):  # never: not detached
            raise KnowledgeError("a followed run was detached")
        return result

    def detach(self, request: RunRequest, targets: Targets) -> Enqueued:
        """Walk and enqueue the run, and return what was enqueued without following it."""
        from workers.distributed import Enqueued, run_distributed

        result = run_distributed(self.settings, request, targets, lambda _summary: None, self.notes, detach=True)
        if not isinstance(result, Enqueued):  # never: detached
            raise KnowledgeError("a detached run was followed")
        return result

    def _channel(self) -> WriterChannel:
        from workers.channel import WriterChannel

        if self.channel is None:
            self.channel = WriterChannel(self.settings)
        return self.channel

    def _hold(self, op: str) -> None:
        """The write lock taken here when free, else the running writer that holds it."""
        if self.held is not None or self.via_writer:
            return
        held = HeldStore(self.settings)
        try:
            held.acquire(f"knowledge {op}")
        except StoreBusy as exc:
            if not held.holder().startswith(WRITER_HOLDER):
                raise busy(exc, op) from None
            self._channel()
            self.via_writer = True
        else:
            self.held = held

    def _apply(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        self._hold(op)
        with self._exclusive(op) as request_id:
            if self.held is not None:
                return self.held.apply(op, args)
            return self._channel().ask(op, args, WAIT_S[op], request_id)

    @contextmanager
    def _exclusive(self, op: str) -> Iterator[str | None]:
        """For an operation on the whole store, the run lock held meanwhile (RunInProgress, exit 75, when a
        run holds it); its holder id names the request to the writer too."""
        if op not in WHOLE_STORE:
            yield None
            return
        import redis

        ledger = self._channel().ledger
        holder_id = f"{op}-{uuid.uuid4().hex[:12]}"
        holder = ledger.run_lock.acquire(holder_id, LOCK_TTL_MS)
        if holder is not None:
            raise RunInProgress(f"run {holder} is in progress for the store {self.settings.db_path}; "
                                f"`knowledge {op}` needs the store to itself: run it when the run ends "
                                "(`knowledge runs` shows it)")
        done = threading.Event()

        def refresh() -> None:
            while not done.wait(LOCK_TTL_MS / 4000):
                with contextlib.suppress(redis.RedisError):  # a blip: the next beat refreshes it
                    ledger.run_lock.refresh(holder_id, LOCK_TTL_MS)

        refresher = threading.Thread(target=refresh, name="knowledge-run-lock", daemon=True)
        refresher.start()
        try:
            yield holder_id
        finally:
            done.set()
            refresher.join()
            ledger.run_lock.release(holder_id)

    def __exit__(self, *exc: object) -> None:
        if self.held is not None:
            self.held.close()
        if self.channel is not None:
            self.channel.close()
