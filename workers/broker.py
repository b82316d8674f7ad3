"""Build the Dramatiq broker: StubBroker for the in-process default, RedisBroker when configured.

The broker is built here, before any actor is declared; each store gets its own Redis namespace so
two indexes on one Redis never mix messages.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import dramatiq
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import Retries

from config.errors import BrokerError
from config.settings import Settings

if TYPE_CHECKING:  # the in-process default never imports the Redis client
    from dramatiq.brokers.redis import RedisBroker


def build_stub_broker() -> dramatiq.Broker:
    """An in-process broker for the in-process default."""
    # Two Workers (ingest threads, one writer thread) share this broker by design; dramatiq warns
    # about the second worker middleware, which is expected here.
    logging.getLogger("dramatiq.broker.StubBroker").setLevel(logging.ERROR)
    broker = StubBroker()
    add_knowledge_middleware(broker)
    broker.emit_after("process_boot")
    return broker


def add_knowledge_middleware(broker: dramatiq.Broker) -> None:
    """Install the log/trace/run-bookkeeping middleware, placed so it sees Retries' verdict."""
    from workers.middleware import KnowledgeMiddleware

    broker.add_middleware(KnowledgeMiddleware(), before=Retries)


def namespace(settings: Settings) -> str:
    """The Redis key namespace of this store's queues."""
    return f"knowledge:{settings.store_key}"


# Distributed shape. A worker is declared dead when it has not touched the heartbeat set for this
# long; its unacknowledged messages go back on their queue at the next maintenance pass (run on
# MAINTENANCE_CHANCE per million broker commands). Worker processes also heartbeat from a thread
# (workers/processes.py), so a long message never makes a live worker look dead.
HEARTBEAT_TIMEOUT_MS = 10_000
MAINTENANCE_CHANCE = 50_000
# How long an idle consumer sleeps between polls: Dramatiq's 1000 ms default adds up to a second of
# latency per hop; 100 ms keeps a three-hop run snappy at a few polls per second per queue.
WORKER_TIMEOUT_MS = 100


def broker_url(settings: Settings) -> str:
    """knowledge.broker.url; BrokerError when no broker is configured."""
    if settings.broker is None:
        raise BrokerError("no broker configured: set knowledge.broker.url or KNOWLEDGE_BROKER_URL")
    return settings.broker.url


def redacted(url: str) -> str:
    """The broker URL with any password replaced, fit for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


def build_redis_broker(settings: Settings) -> RedisBroker:
    """A RedisBroker on knowledge.broker.url, namespaced per store, with the knowledge middleware."""
    import redis
    from dramatiq.brokers.redis import RedisBroker

    from workers.broker_memory import guard_dispatch

    client = redis.Redis.from_url(broker_url(settings), socket_connect_timeout=5, socket_timeout=30,
                                  health_check_interval=15)
    broker = RedisBroker(client=client, namespace=namespace(settings), heartbeat_timeout=HEARTBEAT_TIMEOUT_MS,
                         maintenance_chance=MAINTENANCE_CHANCE)
    guard_dispatch(broker)  # a Redis at maxmemory: one clear line and dramatiq's retries (workers/broker_memory.py)
    add_knowledge_middleware(broker)
    return broker


def connect_broker(settings: Settings) -> RedisBroker:
    """build_redis_broker, then ping Redis; BrokerError naming the URL when it is unreachable."""
    import redis

    broker = build_redis_broker(settings)
    url = redacted(broker_url(settings))
    try:
        broker.client.ping()
    except redis.RedisError as exc:
        broker.client.close()
        raise BrokerError(f"cannot reach the broker at {url}: {exc}") from None
    return broker
