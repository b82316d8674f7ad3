"""The run lock, presence and replies of a store in Redis (the distributed shape).

Keys (under the store's namespace):
  run-lock        the run in progress (SET NX with a TTL that the CLI and every processed message
                  of that run refresh; deleted when the run finishes)
  alive:<role>    sorted set of `host:pid` by the time the process last announced itself
  reply:<id>      the JSON answer to an operator request (expiring)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import redis

from workers.ledger.protocol import ALIVE_WINDOW_S, LOCK_TTL_MS, REPLY_TTL_S
from workers.ledger.scripts import Scripts


def text(value: Any) -> str | None:
    """A Redis answer as text (None stays None)."""
    return value.decode() if isinstance(value, bytes) else None if value is None else str(value)


class RedisRunLock:
    """The store's run lock; a run acquiring it has `on_acquired(run_id)` called (to abandon stale runs)."""

    def __init__(self, client: redis.Redis, namespace: str, scripts: Scripts,
                 on_acquired: Callable[[str], None] | None = None) -> None:
        self.client = client
        self.key = f"{namespace}:run-lock"
        self.scripts = scripts
        self.on_acquired = on_acquired

    def acquire(self, run_id: str, ttl_ms: int = LOCK_TTL_MS) -> str | None:
        """Take the lock for run_id; None on success, else the run holding it."""
        for _ in range(3):
            if self.client.set(self.key, run_id, nx=True, px=ttl_ms):
                if self.on_acquired is not None:
                    self.on_acquired(run_id)
                return None
            holder = self.holder()
            if holder is not None:
                return holder
        return "unknown"

    def refresh(self, run_id: str, ttl_ms: int = LOCK_TTL_MS) -> bool:
        """Extend the lock if run_id still holds it."""
        return bool(self.scripts["if_owner"](keys=[self.key], args=[run_id, ttl_ms]))

    def release(self, run_id: str) -> bool:
        """Delete the lock if run_id holds it."""
        return bool(self.scripts["if_owner"](keys=[self.key], args=[run_id, "del"]))

    def holder(self) -> str | None:
        """The run holding the lock, if any."""
        return text(self.client.get(self.key))


class RedisPresence:
    """Which worker and writer processes announced themselves lately."""

    def __init__(self, client: redis.Redis, namespace: str) -> None:
        self.client = client
        self.namespace = namespace

    def announce(self, role: str, member: str) -> None:
        """Mark a process (`host:pid`) of a role (worker, writer) alive now."""
        key, now = f"{self.namespace}:alive:{role}", time.time()
        pipe = self.client.pipeline(transaction=False)
        pipe.zadd(key, {member: now})
        pipe.zremrangebyscore(key, "-inf", now - ALIVE_WINDOW_S * 10)
        pipe.expire(key, 24 * 3600)
        pipe.execute()

    def withdraw(self, role: str, member: str) -> None:
        """Forget a process that is stopping."""
        self.client.zrem(f"{self.namespace}:alive:{role}", member)

    def alive(self, role: str, within_s: float = ALIVE_WINDOW_S) -> list[str]:
        """The processes of a role that announced themselves within the last within_s seconds."""
        members = self.client.zrangebyscore(f"{self.namespace}:alive:{role}", time.time() - within_s, "+inf")
        return sorted(text(m) or "" for m in members)


class RedisReplies:
    """Answers to operator requests (e.g. `knowledge rm` through the writer)."""

    def __init__(self, client: redis.Redis, namespace: str) -> None:
        self.client = client
        self.namespace = namespace

    def put(self, request_id: str, value: Any, ttl_s: int = REPLY_TTL_S) -> None:
        """Answer a request; the first answer stays."""
        self.client.set(f"{self.namespace}:reply:{request_id}", json.dumps(value), nx=True, ex=ttl_s)

    def get(self, request_id: str) -> str | None:
        """The JSON answer to a request, once given."""
        return text(self.client.get(f"{self.namespace}:reply:{request_id}"))
