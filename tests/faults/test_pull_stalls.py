"""A pull cannot hold a replica's pull thread for ever, and a problem that repeats is said once.

A real primary behind a loopback proxy that sends the generation's file one byte at a time: the
download is cut at its deadline (bytes over time), the failed pull is counted and said (stderr, and
`pull` in /healthz), the next poll goes on from the partial file, and once the link is whole again
the generation is installed. A `no space` problem whose free-byte count moves every poll is one line.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest

from pipeline import publish as pub
from pipeline.pull import PULL_PREFIX, Puller
from query.replica import SnapshotIndex
from query.serve.http_api import build_app
from tests.cutting_proxy import Faults, cutting_proxy
from tests.query.stores import store_settings
from tests.query.test_http_api import Running
from tests.query.test_snapshot_pull import TOKEN, Primary, primary  # noqa: F401 - the primary, by name

DRIP_S = 0.2  # a byte every 0.2 s: each read well inside the 30 s read timeout, the download never ends
FLOOR_S = 1.5


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("knowledge: warning:")]


def test_a_dripping_download_is_cut_at_its_deadline_counted_said_once_and_resumed(
        primary: Primary, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    primary.publish("alpha")
    other = tmp_path / "replica"
    part = other / f"{PULL_PREFIX}g000001" / pub.DB_NAME
    with cutting_proxy(primary.port, Faults(drip=DRIP_S)) as url:
        puller = Puller(url, other, 2, TOKEN, floor_s=FLOOR_S, min_rate=1e9)  # the deadline is the floor
        try:
            for poll in (1, 2):
                started = time.monotonic()
                thread = threading.Thread(target=puller.pull_once, args=(lambda _generation: None,), daemon=True)
                thread.start()
                thread.join(timeout=20)
                took = time.monotonic() - started
                assert not thread.is_alive(), "the pull thread is still held by the drip"
                assert took < FLOOR_S + 5, took
                assert puller.record.failed == poll and puller.record.pulled is None
                assert puller.record.problem is not None and "took longer than 1.5 s" in puller.record.problem
                assert 0 < part.stat().st_size < 100  # a few bytes each poll, kept for the next
        finally:
            puller.close()
    warnings = _warnings(capsys.readouterr().err)
    assert len(warnings) == 1 and "gave up on generation 1" in warnings[0], warnings  # two polls, one line
    kept = part.stat().st_size
    puller = Puller(primary.url, other, 2, TOKEN)  # the link whole again, the default deadline
    try:
        index = SnapshotIndex(primary.settings, other)
        index.pull_status = puller.record.to_json
        puller.pull_once(lambda _generation: index.poll())
        assert puller.record.pulled == 1 and index.generation == 1 and kept > 0
        with Running(build_app(store_settings(tmp_path / "host"), "127.0.0.1", None, warn=lambda m: None,
                               replica=index)) as replica_url:
            health = httpx.get(f"{replica_url}/healthz", timeout=10)
        assert health.status_code == 200
        assert health.json()["pull"] == {"pulled": 1, "failed": 0, "problem": None}
        index.close()
    finally:
        puller.close()


def test_no_space_is_said_once_while_the_free_byte_count_moves_every_poll(
        primary: Primary, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    primary.publish("alpha")
    other = tmp_path / "replica"
    real = shutil.disk_usage
    free = iter(range(10_000, 10_000 - 7 * 311, -311))

    def full(path: str | Path) -> object:  # the fault: a file system with a few KB free, moving every poll
        usage = real(path)
        return type(usage)(usage.total, usage.total - 5, next(free))

    monkeypatch.setattr(shutil, "disk_usage", full)
    puller = Puller(primary.url, other, 2, TOKEN)
    try:
        for _ in range(6):
            puller.pull_once(lambda _generation: None)
    finally:
        puller.close()
    assert puller.record.failed == 6
    warnings = _warnings(capsys.readouterr().err)
    assert len(warnings) == 1 and "no space in" in warnings[0], warnings
