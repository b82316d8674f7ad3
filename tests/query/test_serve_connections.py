"""`knowledge serve` under half-open connections (slowloris): a real server process over loopback sockets."""

from __future__ import annotations

import os
import select
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml

from tests.query.serving import serving
from tests.query.stores import DOCS, build_store, free_port, store_settings

KNOWLEDGE = str(Path(sys.executable).with_name("knowledge"))
HALF_OPEN = 200
PARTIAL = b"GET /v1/search?q=retention HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


@contextmanager
def server(tmp_path: Path, **mcp: object) -> Iterator[str]:
    """`knowledge serve` on a free loopback port over a small store, with these expose.mcp settings."""
    store = build_store(store_settings(tmp_path / "store"), DOCS).store_dir
    config = tmp_path / "knowledge.yaml"
    expose = {"mcp": {"builtins": ["knowledge_search", "knowledge_enumerate"], **mcp}}
    config.write_text(yaml.safe_dump({"knowledge": {"directory": str(store), "expose": expose}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KNOWLEDGE_", "OTEL_"))}
    with serving(KNOWLEDGE, config, free_port(), tmp_path, env) as base:
        yield base


@contextmanager
def half_open(base: str, count: int) -> Iterator[list[socket.socket]]:
    """count connections that never finish a request: half send nothing, half a request line and half a header."""
    port = int(base.rsplit(":", 1)[1])
    socks: list[socket.socket] = []
    try:
        for i in range(count):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            if i % 2:
                s.sendall(PARTIAL)
            socks.append(s)
        yield socks
    finally:
        for s in socks:
            s.close()


def closed_by_server(socks: list[socket.socket], within: float) -> int:
    """How many of socks the server closed (EOF or reset) within `within` seconds (a bounded wait)."""
    closed: set[int] = set()
    deadline = time.monotonic() + within
    while len(closed) < len(socks) and time.monotonic() < deadline:
        pending = [s for s in socks if s.fileno() not in closed]
        readable, _, _ = select.select(pending, [], [], 0.2)
        for s in readable:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                closed.add(s.fileno())
    return len(closed)


def answers(base: str) -> None:
    """A search and /healthz answer, each within 5 s."""
    started = time.monotonic()
    found = httpx.get(f"{base}/v1/search", params={"q": "retention"}, timeout=5)
    assert found.status_code == 200 and found.json()["results"], found.text
    assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200
    assert time.monotonic() - started < 5


def test_half_open_connections_are_closed_after_the_header_timeout_while_searches_answer(tmp_path: Path) -> None:
    with server(tmp_path, header_timeout=1.5) as base, half_open(base, HALF_OPEN) as socks:
        for _ in range(5):
            answers(base)
        assert closed_by_server(socks, within=8) == HALF_OPEN  # every one, silent or half-sent, in about 1.5 s
        answers(base)


def test_past_the_connection_limit_the_oldest_idle_connection_makes_room(tmp_path: Path) -> None:
    with server(tmp_path, header_timeout=60, max_connections=64) as base, half_open(base, HALF_OPEN) as socks:
        for _ in range(5):
            answers(base)  # each new connection past the limit closes the oldest half-open one
        assert closed_by_server(socks, within=3) >= HALF_OPEN - 64


@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_header_timeout_of_zero_or_less_is_refused_at_startup(tmp_path: Path, value: str) -> None:
    import subprocess

    config = tmp_path / "knowledge.yaml"
    config.write_text(f"knowledge:\n  directory: {tmp_path}\n  expose:\n    mcp:\n      header_timeout: {value}\n")
    done = subprocess.run([KNOWLEDGE, "--config", str(config), "stats"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "header_timeout" in done.stderr


def test_a_request_body_dripped_past_the_header_timeout_is_closed(tmp_path: Path) -> None:
    with server(tmp_path, header_timeout=1.5) as base:
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                      b"Content-Length: 1000\r\n\r\ntoken=")
            assert closed_by_server([s], within=8) == 1
        answers(base)


def test_a_connection_accepted_on_the_socket_serve_binds_sends_each_write_at_once() -> None:
    import asyncio

    import uvicorn

    from query.serve.connections import no_delay

    listening = uvicorn.Config(lambda *_: None, host="127.0.0.1", port=0).bind_socket()  # as serve binds it
    seen: list[int] = []

    class Recording(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))  # asyncio's own setting
            no_delay(transport)
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    async def accept_one() -> None:
        loop = asyncio.get_running_loop()
        accepting = await loop.create_server(Recording, sock=listening)
        port = listening.getsockname()[1]
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
        for _ in range(100):  # bounded: the server side's connection_made runs on a later turn of the loop
            if len(seen) == 2:
                break
            await asyncio.sleep(0.01)
        writer.close()
        accepting.close()

    asyncio.run(accept_one())
    # proto 0 on the bound socket: asyncio leaves Nagle on (seen[0] is 0 on Python 3.11), and a body written
    # after its headers would wait for the client's delayed ACK (~40 ms a request on a kept-alive connection)
    assert len(seen) == 2 and seen[1] == 1
