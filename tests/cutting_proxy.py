"""A loopback HTTP/1.1 proxy in front of a real server that injects faults into chosen responses.

Each request is forwarded on a connection of its own (`Connection: close` both ways). For a request
whose path ends with `suffix` the proxy can cut the response after `cut_after` body bytes (the first
`cuts` such responses; -1: every one), flip one body byte at `flip_at` (a download tampered in transit),
send the body one byte every `drip` seconds (a link or a server that trickles), or rewrite the Host
header (a name the server does not answer to). For a request whose path ends with `latest`, `manifest`
replaces fields of the manifest the server answered (a broken or hostile primary). The request heads it
saw are kept.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

HEAD_LIMIT = 65536
TIMEOUT_S = 10.0


@dataclass
class Faults:
    """What the proxy does to the responses of requests whose path ends with suffix."""

    suffix: str = "knowledge.db"
    cut_after: int | None = None
    cuts: int = 1
    flip_at: int | None = None
    host: str | None = None
    drip: float | None = None
    manifest: dict[str, object] | None = None
    seen: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take_cut(self, path: str) -> int | None:
        """The byte count to cut this response at (None: whole), using up one cut."""
        with self.lock:
            if self.cut_after is None or not path.endswith(self.suffix) or self.cuts == 0:
                return None
            if self.cuts > 0:
                self.cuts -= 1
            return self.cut_after


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    """(head up to the blank line, the bytes read past it)."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(4096)
        if not piece or len(data) > HEAD_LIMIT:
            raise ConnectionError("no complete head")
        data += piece
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _rewritten(head: bytes, faults: Faults) -> tuple[bytes, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    request_line, headers = lines[0], {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    path = request_line.split(" ")[1] if " " in request_line else ""
    headers["connection"] = "close"
    if faults.host is not None:
        headers["host"] = faults.host
    out = "\r\n".join([request_line, *(f"{k}: {v}" for k, v in headers.items())]) + "\r\n\r\n"
    return out.encode("latin-1"), path, headers


class _Relay(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        client = self.request
        client.settimeout(TIMEOUT_S)
        faults = self.server.faults
        try:
            head, rest = _read_head(client)
        except (ConnectionError, OSError):
            return
        forwarded, path, headers = _rewritten(head, faults)
        with faults.lock:
            faults.seen.append({"path": path, **headers})
        cut = faults.take_cut(path)
        flip = faults.flip_at if path.endswith(faults.suffix) else None
        with socket.create_connection(("127.0.0.1", self.server.upstream), timeout=TIMEOUT_S) as up:
            up.sendall(forwarded + rest)
            try:
                reply_head, body = _read_head(up)
            except (ConnectionError, OSError):
                return
            if faults.manifest is not None and path.endswith("latest"):
                reply_head, body = _patched(up, reply_head, body, faults.manifest)
            client.sendall(reply_head + b"\r\n\r\n")
            try:
                self._relay(up, client, body, cut, flip, faults.drip if path.endswith(faults.suffix) else None)
            except OSError:  # the client hung up (a deadline cut it): nothing more to send
                return

    def _relay(self, up: socket.socket, client: socket.socket, first: bytes, cut: int | None,
               flip: int | None, drip: float | None) -> None:
        sent = 0
        piece = first
        while True:
            if drip is not None:
                for byte in piece:
                    client.sendall(bytes([byte]))
                    time.sleep(drip)
                piece = up.recv(65536)
                if not piece:
                    return
                continue
            if flip is not None and sent <= flip < sent + len(piece):
                index = flip - sent
                piece = piece[:index] + bytes([piece[index] ^ 0xFF]) + piece[index + 1:]
            if cut is not None and sent + len(piece) >= cut:
                client.sendall(piece[:cut - sent])
                client.shutdown(socket.SHUT_RDWR)  # the connection drops mid-body
                return
            client.sendall(piece)
            sent += len(piece)
            piece = up.recv(65536)
            if not piece:
                return


def _patched(up: socket.socket, head: bytes, body: bytes, fields: dict[str, object]) -> tuple[bytes, bytes]:
    """The whole answer of the latest route with fields of its manifest replaced, its Content-Length fixed."""
    while piece := up.recv(65536):
        body += piece
    data = json.loads(body)
    data["manifest"].update(fields)
    patched = json.dumps(data).encode()
    lines = [line for line in head.decode("latin-1").split("\r\n") if not line.lower().startswith("content-length")]
    return "\r\n".join([*lines, f"content-length: {len(patched)}"]).encode("latin-1"), patched


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream: int, faults: Faults) -> None:
        super().__init__(("127.0.0.1", 0), _Relay)
        self.upstream = upstream
        self.faults = faults


@contextmanager
def cutting_proxy(upstream_port: int, faults: Faults) -> Iterator[str]:
    """Run the proxy until the block ends; yield its base URL."""
    server = _Server(upstream_port, faults)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
