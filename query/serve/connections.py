"""Connection handling of `knowledge serve`: a header deadline and a cap on open connections.

uvicorn's HTTP/1.1 protocol times out only an idle keep-alive connection after a response; a client
that connects and sends nothing, or half its headers a byte at a time (slowloris), holds its socket
for ever, and about a thousand of them exhaust the process's file descriptors so nobody is answered.
`guarded_protocol` returns a subclass that closes a connection whose request headers (and body, when
it has one) are not complete within `header_timeout` seconds (counted from the connect, or from the
first byte of the next request on a kept-alive connection), and that, when a new connection would
pass `max_connections`, closes the oldest connection with no request in flight (a half-open or idle
one) to make room, so the attack costs its own sockets and never the clients that send whole requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

LOG = logging.getLogger("knowledge.serve")
FD_RESERVE = 64  # descriptors kept for the store, the log and the listening socket
# Connections asyncio accepts in one turn of the loop (the listen backlog): a closed connection's descriptor is
# freed only on the next turn, so the cap keeps this many descriptors free for a burst of connects.
ACCEPT_BURST = 128


def fd_ceiling(wanted: int) -> int:
    """wanted, lowered to what the open-file limit leaves after FD_RESERVE and ACCEPT_BURST (at least 16)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return wanted
    return max(16, min(wanted, soft - FD_RESERVE - ACCEPT_BURST))


def no_delay(transport: asyncio.BaseTransport) -> None:
    """Send each write at once (TCP_NODELAY) on a TCP connection.

    asyncio sets it only on sockets created with proto IPPROTO_TCP; the listening socket uvicorn binds
    (and so every connection it accepts) has proto 0, so a response's body, written after its headers,
    waited for the client's delayed ACK: ~40 ms on every request of a kept-alive connection.
    """
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class GuardedH11Protocol(H11Protocol):
    """H11Protocol with a deadline on each request's headers and a cap on open connections."""

    header_timeout: float = 10.0
    max_connections: int = 256

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.opened = time.monotonic()
        self.header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Take the connection, make room for it past the cap, and start its header deadline."""
        no_delay(transport)
        super().connection_made(transport)
        if len(self.connections) > self.max_connections and not self._make_room():
            LOG.warning("refused a connection: %d open, none idle (max_connections)", len(self.connections) - 1)
            self.transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        """Feed h11; the deadline ends once the request line and headers are in, and restarts with the next."""
        super().data_received(data)
        if self.transport.is_closing():
            self._disarm()
        elif self.conn.their_state is h11.IDLE:
            if self.header_deadline is None:
                self._arm()
        elif self.conn.their_state is not h11.SEND_BODY:  # a body still arriving stays under the deadline
            self._disarm()

    def on_response_complete(self) -> None:
        """After a response the keep-alive timeout of uvicorn applies; a pipelined next request re-arms."""
        self._disarm()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the deadline with the connection."""
        self._disarm()
        super().connection_lost(exc)

    def waiting(self) -> bool:
        """Whether no request is in flight: headers not complete and no response being written."""
        return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

    def _make_room(self) -> bool:
        idle = [c for c in self.connections if c is not self and isinstance(c, GuardedH11Protocol) and c.waiting()
                and not c.transport.is_closing()]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.opened)
        oldest.transport.close()
        self.connections.discard(oldest)
        return True

    def _arm(self) -> None:
        self._disarm()
        self.header_deadline = self.loop.call_later(self.header_timeout, self._expire)

    def _disarm(self) -> None:
        if self.header_deadline is not None:
            self.header_deadline.cancel()
            self.header_deadline = None

    def _expire(self) -> None:
        self.header_deadline = None
        unfinished = self.conn.their_state is h11.SEND_BODY or self.waiting()
        if unfinished and not self.transport.is_closing():
            self.transport.close()


def guarded_protocol(header_timeout: float, max_connections: int) -> type[GuardedH11Protocol]:
    """A GuardedH11Protocol class with these limits (the connection cap lowered to the open-file limit)."""
    return type("KnowledgeH11Protocol", (GuardedH11Protocol,),
                {"header_timeout": header_timeout, "max_connections": fd_ceiling(max_connections)})
