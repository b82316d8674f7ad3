"""Redis fixtures: the real server on 127.0.0.1:6379 (a dedicated db, a namespace per test).

Tests that need Redis skip when it is not running, except under CI=true where they fail: a CI job
without its Redis must not pass by skipping the distributed suite.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis

from pipeline.embeddings import RetryPolicy
from tests.embedserver import EmbedServer
from workers.ledger import InMemoryLedger
from workers.ledger.memory import MemoryPrimitives
from workers.ledger.redis_ledger import RedisLedger, RedisPrimitives

REDIS_HOST = "127.0.0.1"
REDIS_PORT = 6379
REDIS_DB = 13
REDIS_URL = f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}"


def require_redis(url: str = REDIS_URL) -> redis.Redis:
    """A client on url; skip the test if Redis is down, or fail it under CI=true."""
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=10)
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        message = f"Redis is not reachable at {url}: {exc}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message} (CI=true: the distributed tests must run, not skip)")
        pytest.skip(message)
    return client


def delete_namespace(client: redis.Redis, namespace: str) -> None:
    """Delete every key under namespace (bounded by what SCAN returns)."""
    keys = list(client.scan_iter(match=f"{namespace}:*", count=1000))
    for start in range(0, len(keys), 500):
        client.delete(*keys[start:start + 500])


@pytest.fixture
def redis_client() -> Iterator[redis.Redis]:
    """A client on the tests' Redis db."""
    client = require_redis()
    yield client
    client.close()


@pytest.fixture
def redis_namespace(redis_client: redis.Redis) -> Iterator[str]:
    """A fresh key namespace, deleted after the test."""
    namespace = f"knowledge-test:{uuid.uuid4().hex[:12]}"
    yield namespace
    delete_namespace(redis_client, namespace)


@pytest.fixture(params=["memory", "redis"])
def ledger(request: pytest.FixtureRequest) -> Iterator[object]:
    """Each ledger implementation in turn (Redis on a fresh namespace)."""
    if request.param == "memory":
        yield InMemoryLedger()
        return
    client: redis.Redis = request.getfixturevalue("redis_client")
    namespace: str = request.getfixturevalue("redis_namespace")
    yield RedisLedger(client, namespace)


@pytest.fixture(params=["memory", "redis"])
def primitives(request: pytest.FixtureRequest) -> Iterator[object]:
    """Each twin of the ledger's primitives in turn (Redis on a fresh namespace)."""
    if request.param == "memory":
        yield MemoryPrimitives()
        return
    client: redis.Redis = request.getfixturevalue("redis_client")
    namespace: str = request.getfixturevalue("redis_namespace")
    yield RedisPrimitives(client, namespace)


EMBED_DIM = 16


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbedServer]:
    """The loopback embeddings server, with quick embed retries (a poisoned input answers 500 at every
    halving level)."""
    import workers.embed

    monkeypatch.setattr(workers.embed, "EMBED_RETRY", RetryPolicy(attempts=2, initial_wait=0.01, max_wait=0.02))
    with EmbedServer(dim=EMBED_DIM) as running:
        yield running
