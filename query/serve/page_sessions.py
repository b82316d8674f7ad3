"""The search page's sign-ins: one random session per sign-in with an expiry, and a login rate limit.

A session is a random 256-bit value (never the token nor derived from it) that the server keeps in
memory with its expiry: the cookie names it, Sign out revokes it on the server (the old cookie stops
working at once), and a restart of `serve` forgets every session. The sign-in form's guesses are
limited per client address: a few failed attempts are free, each further one waits twice as long as
the last (up to MAX_WAIT_S), and a correct token clears the count.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

MAX_SESSIONS = 10_000  # past it the sessions nearest their expiry go first
FREE_FAILURES = 3
FIRST_WAIT_S = 1.0
MAX_WAIT_S = 60.0
FORGET_AFTER_S = 900.0  # a client address with no failed attempt this long starts afresh
MAX_CLIENTS = 10_000


def _digest(value: str) -> str:
    """What the server keeps for a session: its hash, so a memory dump holds no usable cookie."""
    return hashlib.sha256(value.encode()).hexdigest()


class Sessions:
    """The live sessions of this server: open, check and revoke, each with an expiry of `lifetime` seconds."""

    def __init__(self, lifetime: float, clock: Callable[[], float] = time.time) -> None:
        self.lifetime = lifetime
        self.clock = clock
        self._live: OrderedDict[str, float] = OrderedDict()  # digest -> expiry, oldest first
        self._lock = threading.Lock()

    def open(self) -> str:
        """A new session's cookie value."""
        value = secrets.token_urlsafe(32)
        with self._lock:
            self._live[_digest(value)] = self.clock() + self.lifetime
            while len(self._live) > MAX_SESSIONS:
                self._live.popitem(last=False)
        return value

    def valid(self, value: str | None) -> bool:
        """Whether a cookie value names a live, unexpired session (an expired one is forgotten)."""
        if not value:
            return False
        key = _digest(value)
        with self._lock:
            expiry = self._live.get(key)
            if expiry is None:
                return False
            if expiry <= self.clock():
                del self._live[key]
                return False
        return True

    def revoke(self, value: str | None) -> None:
        """End a session: its cookie no longer signs anybody in."""
        if value:
            with self._lock:
                self._live.pop(_digest(value), None)


class LoginLimiter:
    """Failed sign-ins per client address: FREE_FAILURES free, then a wait that doubles with each failure."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._clients: OrderedDict[str, tuple[int, float, float]] = OrderedDict()  # failures, allowed at, last
        self._lock = threading.Lock()

    def wait(self, client: str) -> float:
        """Seconds this client must wait before its next attempt is heard (0: now)."""
        with self._lock:
            entry = self._entry(client)
            return 0.0 if entry is None else max(0.0, entry[1] - self.clock())

    def failed(self, client: str) -> None:
        """Count a wrong token; past the free ones, the next attempt waits FIRST_WAIT_S doubled per failure."""
        now = self.clock()
        with self._lock:
            entry = self._entry(client)
            failures = (entry[0] if entry else 0) + 1
            over = failures - FREE_FAILURES
            allowed = now + min(MAX_WAIT_S, FIRST_WAIT_S * 2 ** (over - 1)) if over > 0 else now
            self._clients[client] = (failures, allowed, now)
            self._clients.move_to_end(client)
            while len(self._clients) > MAX_CLIENTS:
                self._clients.popitem(last=False)

    def succeeded(self, client: str) -> None:
        """A right token clears the client's count."""
        with self._lock:
            self._clients.pop(client, None)

    def _entry(self, client: str) -> tuple[int, float, float] | None:
        entry = self._clients.get(client)
        if entry is not None and self.clock() - entry[2] > FORGET_AFTER_S and entry[1] <= self.clock():
            del self._clients[client]
            return None
        return entry


def same(offered: str, token: str) -> bool:
    """Whether an offered token is the server's, in constant time."""
    return hmac.compare_digest(offered.encode(), token.encode())
