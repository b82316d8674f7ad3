"""A deadline on a whole HTTP exchange, however slowly its bytes arrive (web fetches, generation pulls).

httpx bounds each network operation (connect, one read), not an exchange: a server that sends one
byte just inside the read timeout holds a request for ever. A Watchdog is entered around the
exchange; each request of it passes `extensions={"trace": watchdog.trace}` (httpcore's trace hook),
so the watchdog knows every socket the exchange opens, and when the deadline passes it shuts them
down: the read blocked on one returns at once with an error, and `fired` says why. Requests
should come from a client whose connections this exchange opened (a connection reused from an
earlier exchange was never seen by the hook), and should take `timeout()`, the per-operation
timeout cut to what is left.
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import suppress
from dataclasses import dataclass, field

import httpx


@dataclass
class Watchdog:
    """Shuts every socket the exchange opened once `seconds` have passed since it was entered."""

    seconds: float
    per_operation: httpx.Timeout
    deadline: float = 0.0
    fired: threading.Event = field(default_factory=threading.Event)
    _sockets: list[socket.socket] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _timer: threading.Timer | None = None

    def __enter__(self) -> Watchdog:
        self.deadline = time.monotonic() + self.seconds
        self._timer = threading.Timer(self.seconds, self.cut)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def expired(self) -> bool:
        """Whether the deadline has passed (the sockets are then shut, or about to be)."""
        if time.monotonic() > self.deadline:
            self.fired.set()
        return self.fired.is_set()

    def trace(self, event: str, info: dict[str, object]) -> None:
        """httpcore's trace hook: remember the socket of each connection this exchange opens."""
        if event != "connection.connect_tcp.complete":
            return
        stream = info.get("return_value")
        sock = getattr(stream, "get_extra_info", lambda _name: None)("socket")
        if isinstance(sock, socket.socket):
            with self._lock:
                self._sockets.append(sock)
            if self.fired.is_set():
                self.cut()

    def timeout(self) -> httpx.Timeout:
        """The per-operation timeout, never longer than what is left of the deadline."""
        left = max(0.01, self.deadline - time.monotonic())
        base = self.per_operation
        connect, read, write, pool = (left if t is None else min(t, left) for t in
                                      (base.connect, base.read, base.write, base.pool))
        return httpx.Timeout(read, connect=connect, read=read, write=write, pool=pool)

    def cut(self) -> None:
        """End the exchange now: every socket it opened is shut (the deadline's action; a caller stopping early)."""
        self.fired.set()
        with self._lock:
            for sock in self._sockets:
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
