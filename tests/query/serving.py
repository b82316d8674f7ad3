"""`knowledge serve` as a real process on a free loopback port, for the tests that talk to it over HTTP."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import stop_process, wait_answering

STARTUP_S = 60.0


@contextmanager
def serving(knowledge: str, config: Path, port: int, cwd: Path, env: Mapping[str, str],
            extra: tuple[str, ...] = (), log_name: str = "serve.err") -> Iterator[str]:
    """Run `knowledge --config CONFIG serve --port PORT [EXTRA]` until the block ends; yield its base URL once
    /healthz answers (stderr goes to cwd/LOG_NAME, named in the failure when it never comes up)."""
    log = cwd / log_name
    with log.open("w") as err:
        proc = subprocess.Popen([knowledge, "--config", str(config), "serve", "--port", str(port), *extra], cwd=cwd,
                                env=dict(env), stdout=subprocess.DEVNULL, stderr=err)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_answering(f"{base}/healthz", proc, "knowledge serve", STARTUP_S, log.read_text)
        yield base
    finally:
        stop_process(proc)
