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

An operation is a frozen request (workers/operations.py: Remove, Rebuild, Vacuum, Reset, SwitchStep,
Check) and `Engine.apply(op)` its one way in, answering the request's typed result; remove(),
rebuild(), vacuum() and reset() are shorthands for it. `check` comes through here too: it takes the
lock when it is free (its FTS cross-check writes), else checks without it, never through the writer.
`resolve` says what an `rm` names before anything is removed (pipeline/removal.py).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol, Self, TypeVar, overload

import dramatiq

from config.errors import IndexNotBuilt, KnowledgeError, RunInProgress, StoreBusy, UsageError
from config.observability import tracer
from config.settings import Settings
from pipeline import removal, shadow, vectors
from pipeline.embeddings import Probe
from pipeline.integrity import Report, check_store
from pipeline.paths import PathBase
from pipeline.removal import Removal
from pipeline.repair import Repair
from pipeline.store import Emptied
from workers import queues
from workers.actors import declare_actors
from workers.broker import build_stub_broker
from workers.ledger import InMemoryLedger, Ledger, RunSummary
from workers.ledger.shapes import LOCK_TTL_MS, Wire
from workers.maintenance import WRITER_HOLDER, HeldStore, busy
from workers.operations import Check, EngineShadowWriter, Operation, Rebuild, Remove, Reset, SwitchStep, Vacuum
from workers.run import Progress, RunRequest, Targets, follow, new_run_id, plan_and_enqueue
from workers.runtime import Runtime, install, uninstall

if TYPE_CHECKING:  # the distributed side (redis) is imported only when a broker is configured
    from workers.channel import WriterChannel
    from workers.distributed import Enqueued

IDLE_MS = 50  # a one-shot command's idle worker threads: also about how long stopping takes
Notes = Callable[[str], None]
R = TypeVar("R")


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

    @overload
    def apply(self, op: Check) -> Report: ...

    @overload
    def apply(self, op: Operation[R]) -> R: ...

    def apply(self, op: Check | Operation[R]) -> Report | R:
        """Apply one operation where the write lock is held (here, or by the running writer); its result.
        A Check runs here: with the lock when it is free, else without it (the report says what did not run)."""
        ...

    def resolve(self, paths: tuple[str, ...], prefix: bool) -> Removal:
        """What an `rm` of paths names (each argument's stored paths) and its scale, before anything is removed."""
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
    """The maintenance operations, written once over _held_or_sent (here, or through the running writer)."""

    settings: Settings

    def _hold(self, command: str) -> None:
        """Take the write lock for command, or find the writer that holds it (a refusal comes here)."""
        raise NotImplementedError

    def _held_or_sent(self, op: Operation[R]) -> Wire:
        """The answer to op: applied here under the lock, or by the running writer."""
        raise NotImplementedError

    def _local(self) -> HeldStore:
        """The HeldStore of this process (its lock taken or not)."""
        raise NotImplementedError

    @overload
    def apply(self, op: Check) -> Report: ...

    @overload
    def apply(self, op: Operation[R]) -> R: ...

    def apply(self, op: Check | Operation[R]) -> Report | R:
        """Apply one operation (IndexNotBuilt when it needs a store and there is none); its typed result."""
        if isinstance(op, Check):
            return self._check(op)
        answer = op.needless(self.settings)
        return op.result(answer if answer is not None else self._held_or_sent(op))

    def _check(self, op: Check) -> Report:
        """Check the store here (IndexNotBuilt without one): the lock taken when free, else checked without it."""
        db_path = self.settings.db_path
        if not db_path.is_file() and not db_path.is_symlink():
            raise IndexNotBuilt.at(db_path)
        held = self._local()
        blocked = held.attempt(op.command)
        return check_store(db_path, op.full, op.progress, blocked)

    def resolve(self, paths: tuple[str, ...], prefix: bool) -> Removal:
        """What an `rm` of paths names and its scale (read on a connection of its own; no lock needed)."""
        return removal.resolve(self.settings.db_path, PathBase.at(self.settings.path_base), paths, prefix)

    def remove(self, paths: list[str]) -> list[str]:
        """Delete documents by stored path; those that were indexed (none without a store)."""
        return self.apply(Remove(tuple(paths)))

    def rebuild(self) -> Repair:
        """Repair the store from its chunks (IndexNotBuilt without one; StoreDamaged when the file is)."""
        return self.apply(Rebuild())

    def vacuum(self) -> tuple[int, int]:
        """Rewrite the store without free pages (IndexNotBuilt without one): bytes before, after."""
        return self.apply(Vacuum())

    def reset(self) -> Emptied:
        """Replace the store with an empty one holding the schema."""
        return self.apply(Reset())

    def shadow_writer(self) -> shadow.ShadowWriter:
        """The writer of a vector switch's steps, through this engine (the lock taken, or the writer found, now)."""
        self._hold(SwitchStep.command)
        return EngineShadowWriter(self.apply)


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

    def _hold(self, command: str) -> None:
        try:
            self.held.acquire(f"{command} (in-process)")
        except StoreBusy as exc:
            if command in ("knowledge index", "knowledge watch"):
                raise
            raise busy(exc, command) from None

    def _held_or_sent(self, op: Operation[R]) -> Wire:
        self._hold(op.command)
        return op.apply(self.held)

    def _local(self) -> HeldStore:
        return self.held

    def start(self, holder: str = "index") -> None:
        """Take the lock (naming `knowledge <holder>`), probe the embeddings server, open the store and
        start the actors (once)."""
        if self.runtime is not None:
            return
        self._hold(f"knowledge {holder}")
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
        self.local: HeldStore | None = None  # this process's side of the lock, taken or not
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

    def _hold(self, command: str) -> None:
        """The write lock taken here when free, else the running writer that holds it."""
        if self.held is not None or self.via_writer:
            return
        held = self._local()
        try:
            held.acquire(command)
        except StoreBusy as exc:
            if not held.holder().startswith(WRITER_HOLDER):
                raise busy(exc, command) from None
            self._channel()
            self.via_writer = True
        else:
            self.held = held

    def _local(self) -> HeldStore:
        if self.local is None:
            self.local = HeldStore(self.settings)
        return self.local

    def _held_or_sent(self, op: Operation[R]) -> Wire:
        self._hold(op.command)
        with self._exclusive(op) as request_id:
            if self.held is not None:
                return op.apply(self.held)
            return self._channel().ask(op, request_id)

    @contextmanager
    def _exclusive(self, op: Operation[R]) -> Iterator[str | None]:
        """For an operation on the whole store, the run lock held meanwhile (RunInProgress, exit 75, when a
        run holds it); its holder id names the request to the writer too."""
        if not op.whole_store:
            yield None
            return
        import redis

        ledger = self._channel().ledger
        holder_id = f"{op.name}-{uuid.uuid4().hex[:12]}"
        holder = ledger.run_lock.acquire(holder_id, LOCK_TTL_MS)
        if holder is not None:
            raise RunInProgress(f"run {holder} is in progress for the store {self.settings.db_path}; "
                                f"`{op.command}` needs the store to itself: run it when the run ends "
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
        if self.local is not None:
            self.local.close()
        if self.channel is not None:
            self.channel.close()
