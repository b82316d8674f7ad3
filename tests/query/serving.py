"""`knowledge serve` as a real process on a free loopback port, for the tests that talk to it over HTTP."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

STARTUP_S = 60.0


@contextmanager
def serving(knowledge: str, config: Path, port: int, cwd: Path, env: Mapping[str, str],
            extra: tuple[str, ...] = ()) -> Iterator[str]:
    """Run `knowledge --config CONFIG serve --port PORT [EXTRA]` until the block ends; yield its base URL once
    /healthz answers (stderr goes to cwd/serve.err, named in the failure when it never comes up)."""
    log = cwd / "serve.err"
    with log.open("w") as err:
        proc = subprocess.Popen([knowledge, "--config", str(config), "serve", "--port", str(port), *extra], cwd=cwd,
                                env=dict(env), stdout=subprocess.DEVNULL, stderr=err)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "knowledge serve did not come up"
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
