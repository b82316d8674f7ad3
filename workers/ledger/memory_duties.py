"""The run lock, presence and replies of the in-process ledger (the embedded default's twins of
workers/ledger/redis_duties.py). One process serves the store, so they are plain guarded dicts."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from workers.ledger.protocol import ALIVE_WINDOW_S, LOCK_TTL_MS, REPLY_TTL_S


class MemoryRunLock:
    """The run lock of one process's ledger."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._holder: tuple[str, float] | None = None  # (run id, monotonic expiry)

    def _current(self) -> str | None:
        if self._holder is not None and self._holder[1] <= time.monotonic():
            self._holder = None
        return self._holder[0] if self._holder is not None else None

    def acquire(self, run_id: str, ttl_ms: int = LOCK_TTL_MS) -> str | None:
        """Take the lock for run_id; None on success, else the run holding it."""
        with self._guard:
            holder = self._current()
            if holder is not None:
                return holder
            self._holder = (run_id, time.monotonic() + ttl_ms / 1000)
            return None

    def refresh(self, run_id: str, ttl_ms: int = LOCK_TTL_MS) -> bool:
        """Extend the lock if run_id still holds it."""
        with self._guard:
            if self._current() != run_id:
                return False
            self._holder = (run_id, time.monotonic() + ttl_ms / 1000)
            return True

    def release(self, run_id: str) -> bool:
        """Drop the lock if run_id holds it."""
        with self._guard:
            if self._current() != run_id:
                return False
            self._holder = None
            return True

    def holder(self) -> str | None:
        """The run holding the lock, if any."""
        with self._guard:
            return self._current()


class MemoryPresence:
    """The processes of each role announced in this process."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._seen: dict[str, dict[str, float]] = {}

    def announce(self, role: str, member: str) -> None:
        """Mark a process (`host:pid`) of a role alive now."""
        with self._guard:
            self._seen.setdefault(role, {})[member] = time.time()

    def withdraw(self, role: str, member: str) -> None:
        """Forget a process that is stopping."""
        with self._guard:
            self._seen.get(role, {}).pop(member, None)

    def alive(self, role: str, within_s: float = ALIVE_WINDOW_S) -> list[str]:
        """The processes of a role that announced themselves within the last within_s seconds."""
        now = time.time()
        with self._guard:
            return sorted(m for m, at in self._seen.get(role, {}).items() if now - at <= within_s)


class MemoryReplies:
    """Answers to requests, as JSON text, kept in this process."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._answers: dict[str, str] = {}

    def put(self, request_id: str, value: Any, ttl_s: int = REPLY_TTL_S) -> None:
        """Answer a request; the first answer stays."""
        with self._guard:
            self._answers.setdefault(request_id, json.dumps(value))

    def get(self, request_id: str) -> str | None:
        """The JSON answer to a request, once given."""
        with self._guard:
            return self._answers.get(request_id)
