"""Process mains of the distributed shape: `knowledge worker`, `knowledge writer` and the supervisor.

A worker process consumes the ingest and embed queues only; the writer consumes the write queue
with exactly one thread and holds the store's write lock for its lifetime (a HeldStore), so it also
answers the requests the engine sends it (workers/channel.py). Both stop gracefully on
SIGTERM or SIGINT (the message in hand finishes, prefetched ones go back to Redis). The supervisor
behind `knowledge worker --processes N` runs N single-process workers and restarts one that dies.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

from config.instruments import observe_queues
from config.observability import (
    ENV_METRICS_PORT,
    configure_logging,
    configure_metrics,
    configure_tracing,
    get_logger,
    metrics_port,
    shutdown_metrics,
    shutdown_tracing,
)
from config.settings import Settings
from workers import queue_depth, queues
from workers.actors import declare_actors
from workers.broker import (
    HEARTBEAT_TIMEOUT_MS,
    WORKER_TIMEOUT_MS,
    broker_url,
    connect_broker,
    namespace,
    redacted,
)
from workers.channel import declare_request_actor
from workers.ledger import Presence
from workers.ledger.redis_ledger import RedisLedger
from workers.maintenance import WRITER_HOLDER, HeldStore
from workers.runtime import Runtime, install, uninstall

STOP_TIMEOUT_MS = 30_000
PREFETCH_PER_THREAD = 4
MIN_PREFETCH = 8
WORKER_NICENESS = 10
RESTART_DELAY_S = 1.0
RESTART_LIMIT = 5
RESTART_WINDOW_S = 60.0

log = get_logger("knowledge.process")


class Heartbeat(threading.Thread):
    """Keeps this process's broker id fresh in the heartbeat set, however long a message runs, and
    announces the process under its role (worker or writer) so `knowledge index` and `runs` can tell
    who is serving the store."""

    def __init__(self, broker: RedisBroker, presence: Presence, role: str,
                 every_s: float = HEARTBEAT_TIMEOUT_MS / 4000) -> None:
        super().__init__(name="knowledge-heartbeat", daemon=True)
        self.broker = broker
        self.presence = presence
        self.role = role
        self.member = f"{socket.gethostname()}:{os.getpid()}"
        self.every_s = every_s
        self.stopping = threading.Event()

    def beat(self) -> None:
        """One heartbeat (errors ignored: the consumers report an outage, beats resume with Redis)."""
        try:
            self.broker.client.zadd(f"{self.broker.namespace}:__heartbeats__",
                                    {self.broker.broker_id: int(time.time() * 1000)})
            self.presence.announce(self.role, self.member)
        except redis.RedisError:
            pass

    def run(self) -> None:
        self.beat()
        while not self.stopping.wait(self.every_s):
            self.beat()

    def stop(self) -> None:
        """Stop beating and withdraw the announcement."""
        self.stopping.set()
        with contextlib.suppress(redis.RedisError):
            self.presence.withdraw(self.role, self.member)


def _stop_event() -> threading.Event:
    """An event set by SIGTERM or SIGINT."""
    stop = threading.Event()

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def _serve(settings: Settings, role: str, queue_names: frozenset[str], threads: int, held: HeldStore | None) -> int:
    """Connect, install the runtime, consume queue_names until a stop signal; return the exit code."""
    stop = _stop_event()
    broker = connect_broker(settings)
    actors = declare_actors(broker)
    declare_request_actor(broker, held)
    ledger = RedisLedger(broker.client, namespace(settings))
    runtime = Runtime(settings, ledger, held.store() if held is not None else None, actors)
    if held is not None:
        held.runtime = runtime
    install(runtime)
    worker = dramatiq.Worker(broker, queues=set(queue_names), worker_threads=threads,
                             worker_timeout=WORKER_TIMEOUT_MS)
    # Dramatiq prefetches 2 messages per thread; its consumer then sleeps (backing off up to the
    # worker timeout) while they are processed, so a one-thread writer idled up to a third of the
    # time between batches. A deeper buffer keeps every thread fed.
    worker.queue_prefetch = max(PREFETCH_PER_THREAD * threads, MIN_PREFETCH)
    heartbeat = Heartbeat(broker, ledger.presence, role)
    # Queue gauges from the queues this process consumes (read at each export or scrape, not on a timer).
    observe_queues(lambda: queue_depth.sample(broker.client, broker.namespace, queue_names))
    worker.start()
    heartbeat.start()
    log.info(f"{role} started", pid=os.getpid(), broker_id=broker.broker_id, queues=sorted(queue_names),
             threads=threads, prefetch=worker.queue_prefetch, broker=redacted(broker_url(settings)),
             store=str(settings.db_path))
    try:
        while not stop.wait(0.5):
            pass
    finally:
        log.info(f"{role} stopping", pid=os.getpid())
        worker.stop(timeout=STOP_TIMEOUT_MS)
        heartbeat.stop()
        broker.close()
        uninstall()
        shutdown_tracing()
        shutdown_metrics()
    return 0


def run_worker(settings: Settings, threads: int) -> int:
    """Main of one worker process: ingest (and embed) with `threads` threads, at a lower CPU priority."""
    configure_logging()
    # The single writer is the pipeline's bottleneck; on a host shared with it, workers yield the CPU.
    os.nice(WORKER_NICENESS)
    configure_tracing("knowledge-worker")
    configure_metrics("knowledge-worker", listens=True)
    return _serve(settings, "worker", queues.WORKER_QUEUES, threads, None)


def run_writer(settings: Settings) -> int:
    """Main of the writer: take the store's write lock (StoreBusy, exit 75, if held), apply with one thread."""
    configure_logging()
    configure_tracing("knowledge-writer")
    held = HeldStore(settings)
    held.acquire(WRITER_HOLDER)
    try:
        held.store()
        configure_metrics("knowledge-writer", listens=True)  # after the lock: a refused second writer binds no port
        return _serve(settings, "writer", queues.WRITER_QUEUES, 1, held)
    finally:
        held.close()


def supervise(child_argv: list[str], processes: int,
              spawn: Callable[[list[str], dict[str, str] | None], Any] | None = None) -> int:
    """Run `processes` copies of child_argv, restarting one that dies; stop them all on SIGTERM/SIGINT."""
    configure_logging()
    ports = child_ports(processes)
    start = spawn or _popen
    stop = _stop_event()
    children: list[Any] = [start(child_argv, ports[i]) for i in range(processes)]
    log.info("worker processes started", pids=[c.pid for c in children])
    restarts: list[float] = []
    code = 0
    try:
        while not stop.wait(0.2):
            for i, child in enumerate(children):
                status = child.poll()
                if status is None:
                    continue
                now = time.monotonic()
                restarts = [t for t in restarts if now - t < RESTART_WINDOW_S] + [now]
                if len(restarts) > RESTART_LIMIT:
                    log.error("worker processes keep dying; giving up", last_pid=child.pid, last_status=status)
                    code = 1
                    stop.set()
                    break
                log.warning("worker process died; restarting it", pid=child.pid, status=status)
                time.sleep(RESTART_DELAY_S)
                children[i] = start(child_argv, ports[i])
    finally:
        _stop_children(children)
    return code


def _popen(argv: list[str], env: dict[str, str] | None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, env=env)


def child_ports(processes: int) -> list[dict[str, str] | None]:
    """Each child's environment: with KNOWLEDGE_METRICS_PORT=P, child i scrapes on P+i (0 stays 0)."""
    port = metrics_port(os.environ)
    if port is None:
        return [None] * processes
    return [{**os.environ, ENV_METRICS_PORT: str(port + i if port else 0)} for i in range(processes)]


def _stop_children(children: list[Any]) -> None:
    """SIGTERM every child, wait for them (bounded), SIGKILL the stragglers."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_MS / 1000 + 5
    for child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=5)
