"""A Redis at maxmemory, as a worker meets it: one clear log line, then dramatiq's connection retries.

Redis under `noeviction` refuses the broker's writes (fetch, ack, nack, requeue) with an OOM error.
Dramatiq retries a lost connection (an ack every 5 s, the consumer every second) but treats any
other error as its own bug ("You've found a bug in Dramatiq") and gives the message up until the
worker restarts. BrokerFull turns the OOM error into a connection error, so dramatiq waits and
retries until memory is back, and the worker logs one line naming maxmemory (again at most every
LOG_EVERY_S while it lasts) instead of dramatiq's per-retry lines about it.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import redis

from config.observability import get_logger

LOG_EVERY_S = 60.0
CONSUMER_COMMANDS = frozenset({"fetch", "ack", "nack", "requeue"})
MARK = "Redis is out of memory (maxmemory)"

log = get_logger("knowledge.worker")


class BrokerFull(redis.ConnectionError):
    """A broker command Redis refused at maxmemory, raised as a connection error so dramatiq retries it."""


def out_of_memory(exc: BaseException) -> bool:
    """True when Redis refused a command because it is at maxmemory (an OOM error, not a lost connection)."""
    return isinstance(exc, redis.exceptions.OutOfMemoryError) or "used memory > 'maxmemory'" in str(exc)


class _FullLog:
    """Logs the first refusal of an episode, then at most every LOG_EVERY_S; a success ends the episode."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: float | None = None

    def refused(self, client: redis.Redis, command: str, exc: BaseException) -> None:
        now = time.monotonic()
        with self._lock:
            if self._last is not None and now - self._last < LOG_EVERY_S:
                return
            self._last = now
        state: dict[str, Any] = {}
        try:
            info = client.info("memory")
            state = {"used_memory": info.get("used_memory_human"), "maxmemory": info.get("maxmemory_human"),
                     "policy": info.get("maxmemory_policy")}
        except redis.RedisError:
            pass
        log.error("redis full", detail=f"{MARK}: it refused the broker's {command}; this worker waits and retries "
                  "until memory is back. Raise Redis's maxmemory or free memory (keep noeviction: an evicting "
                  "policy would drop queued work)", command=command, error=str(exc), **state)

    def recovered(self) -> None:
        if self._last is not None:
            with self._lock:
                if self._last is not None:
                    self._last = None
                    log.warning("redis memory back", detail="Redis accepts the broker's writes again")


def guard_dispatch(broker: Any) -> None:
    """Wrap a RedisBroker's consumer commands so an OOM refusal is a logged, retried connection error."""
    original = broker._dispatch
    full = _FullLog()
    client = broker.client

    def dispatch(command: str) -> Any:
        do = original(command)
        if command not in CONSUMER_COMMANDS:
            return do

        def guarded(*args: Any) -> Any:
            try:
                result = do(*args)
            except redis.ResponseError as exc:
                if not out_of_memory(exc):
                    raise
                _quiet_dramatiq_about_it(broker)
                full.refused(client, command, exc)
                raise BrokerFull(f"{MARK}: {exc}") from None
            full.recovered()
            return result

        return guarded

    broker._dispatch = dispatch


class _DropFullRetries(logging.Filter):
    """Drops dramatiq's own lines about a BrokerFull refusal (the worker's one line says it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            return MARK not in record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot format is not ours to drop
            return True


_DROP = _DropFullRetries()


def _quiet_dramatiq_about_it(broker: Any) -> None:
    """Put the filter on the loggers of dramatiq's worker and of each consumer thread (one per queue)."""
    queues = set(broker.get_declared_queues()) | set(broker.get_declared_delay_queues())
    names = ["dramatiq.worker.Worker", "dramatiq.worker._ConsumerThread", "dramatiq.worker.WorkerThread",
             *(f"dramatiq.worker.ConsumerThread({q})" for q in queues)]
    for name in names:
        logger = logging.getLogger(name)
        if _DROP not in logger.filters:
            logger.addFilter(_DROP)
