"""The run lock, presence and replies of a store, on the ledger's primitives.

Keys: `run-lock` (the run in progress, expiring unless its CLI and messages refresh it; deleted when
the run finishes), `alive:<role>` (a stamped set of `host:pid` by the time each last announced
itself), `reply:<id>` (the JSON answer to an operator request, expiring).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from workers.ledger.primitives import Primitives
from workers.ledger.shapes import ALIVE_WINDOW_S, LOCK_TTL_MS, REPLY_TTL_S

LOCK_KEY = "run-lock"
PRESENCE_TTL_S = 24 * 3600


class RunLock:
    """One run per store at a time; a run acquiring it has `on_acquired(run_id)` called (to abandon stale runs)."""

    def __init__(self, store: Primitives, on_acquired: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.on_acquired = on_acquired

    def acquire(self, run_id: str, ttl_ms: int = LOCK_TTL_MS) -> str | None:
        """Take the lock for run_id; None on success, else the run holding it."""
        for _ in range(3):  # the holder may expire between the two steps: try again
            if self.store.put(LOCK_KEY, run_id, ttl_ms / 1000, new=True):
                if self.on_acquired is not None:
                    self.on_acquired(run_id)
                return None
            holder = self.holder()
            if holder is not None:
                return holder
        return "unknown"

    def refresh(self, run_id: str, ttl_ms: int = LOCK_TTL_MS) -> bool:
        """Extend the lock if run_id still holds it."""
        return self.store.refresh_if(LOCK_KEY, run_id, ttl_ms / 1000)

    def release(self, run_id: str) -> bool:
        """Drop the lock if run_id holds it."""
        return self.store.delete_if(LOCK_KEY, run_id)

    def holder(self) -> str | None:
        """The run holding the lock, if any."""
        value = self.store.get(LOCK_KEY)
        return None if value is None else value.decode()


class Presence:
    """Which processes of a role (worker, writer) serve the store."""

    def __init__(self, store: Primitives) -> None:
        self.store = store

    def announce(self, role: str, member: str) -> None:
        """Mark a process (`host:pid`) of a role alive now."""
        self.store.stamp(f"alive:{role}", member, time.time(), PRESENCE_TTL_S, keep=ALIVE_WINDOW_S * 10)

    def withdraw(self, role: str, member: str) -> None:
        """Forget a process that is stopping."""
        self.store.unstamp(f"alive:{role}", member)

    def alive(self, role: str, within_s: float = ALIVE_WINDOW_S) -> list[str]:
        """The processes of a role that announced themselves within the last within_s seconds."""
        return sorted(self.store.stamped(f"alive:{role}", since=time.time() - within_s))


class Replies:
    """Answers to operator requests handled by another process (e.g. `knowledge rm` via the writer)."""

    def __init__(self, store: Primitives) -> None:
        self.store = store

    def put(self, request_id: str, value: Any, ttl_s: int = REPLY_TTL_S) -> None:
        """Answer a request; the first answer stays."""
        self.store.put(f"reply:{request_id}", json.dumps(value), ttl_s, new=True)

    def get(self, request_id: str) -> str | None:
        """The JSON answer to a request, once given."""
        value = self.store.get(f"reply:{request_id}")
        return None if value is None else value.decode()
