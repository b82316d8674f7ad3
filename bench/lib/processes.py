"""Processes a benchmark starts: a free loopback port, a private Redis, the environment of a deployment."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import redis

from bench.lib.paths import KNOWLEDGE, ROOT


def free_port() -> int:
    """A port that was free on loopback a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_env() -> dict[str, str]:
    """This process's environment without KNOWLEDGE_* and OTEL_* settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("KNOWLEDGE_", "OTEL_"))}


def deployment_env(store_base: Path, broker_url: str | None, run_dir: Path | None = None) -> dict[str, str]:
    """The environment of one deployment: its store, and the broker and run directory when distributed."""
    env = clean_env()
    env.update(KNOWLEDGE_STORE_DIR=str(store_base), KNOWLEDGE_BIN=KNOWLEDGE, PYTHONPATH=str(ROOT))
    if broker_url:
        env["KNOWLEDGE_BROKER_URL"] = broker_url
    if run_dir is not None:
        env["KNOWLEDGE_RUN_DIR"] = str(run_dir)
    return env


def start_redis(out: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A private redis-server with no persistence; its process and URL."""
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                proc.kill()
                raise SystemExit("the private redis-server did not start") from None
            time.sleep(0.05)
    client.close()
    return proc, f"redis://127.0.0.1:{port}/0"
