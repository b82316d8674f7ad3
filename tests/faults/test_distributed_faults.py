"""Faults of the distributed shape on real processes: kill -9 of a worker and of the writer mid-run, and
Redis lost and restarted mid-run (a redis-server of the test's own on a free port, never the shared
one). Each ends with the same store the in-process default builds and the fault suite's invariants."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.workers.cluster import (
    CORPUS_FILES,
    Cluster,
    assert_same_store,
    cluster,  # noqa: F401 - the fixture, requested by name
    invariants,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_sigkilled_worker_and_writer_lose_nothing(cluster: Cluster, big_corpus: Path, big_corpus_store: Path) -> None:
    cluster.start(workers=2, threads=2)
    ledger = cluster.ledger()
    before = cluster.worker_children()
    assert len(before) == 2, before
    # A worker dies with messages in hand (fetched, not yet acknowledged): SIGKILL it then.
    broker_ids = cluster.workers_ready(before)
    index = cluster.popen("index", str(big_corpus), "--json")
    victim = cluster.kill_worker_holding("ingest", broker_ids, 30)

    # The writer dies mid-run too (possibly mid-transaction); a new one takes over the store.
    run_id = cluster.wait_for(lambda: next(iter(ledger.recent(1)), None), 10, "the run").run_id
    cluster.wait_for(lambda: ledger.summary(run_id).counts["added"] >= 300, 60, "300 documents written")
    os.kill(cluster.pid("writer"), signal.SIGKILL)
    time.sleep(0.5)
    replacement = cluster.spawn_writer()
    written = ledger.summary(run_id).accounted
    cluster.wait_for(lambda: replacement.poll() is not None or ledger.summary(run_id).accounted > written, 60,
                     "the new writer to apply")
    assert replacement.poll() is None, cluster.logs()

    out, err = index.communicate(timeout=120)
    assert index.returncode == 0, err + cluster.logs()
    summary = json.loads(out)
    assert summary["failed"] == 0 and summary["files"] == CORPUS_FILES
    assert summary["added"] + summary["updated"] == CORPUS_FILES
    after = cluster.worker_children()
    assert victim not in after and len(after) == 2, "the supervisor replaced the killed worker"
    assert_same_store(cluster.base, big_corpus_store)
    invariants(cluster, big_corpus).assert_recovered(check_first=False)  # a writer holds the lock until quiesced


class PrivateRedis:
    """A redis-server of one test's own on a free port, to kill and restart empty."""

    def __init__(self, binary: str, workdir: Path, *args: str) -> None:
        self.binary = binary
        self.workdir = workdir
        self.args = args  # more redis-server options, such as --maxmemory
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server (no persistence) and wait until it answers (bounded)."""
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir), *self.args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + 10
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.RedisError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL the server: every client loses its connection, every key is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def redis_binary() -> str:
    """The redis-server to start (skip without one; in CI, fail: these tests must run)."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("redis-server is not installed (CI=true: the Redis-loss test must run)")
        pytest.skip("redis-server is not installed")
    return binary


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    """A PrivateRedis, started; killed after the test."""
    server = PrivateRedis(redis_binary(), tmp_path)
    server.start()
    yield server
    server.kill()


def test_redis_lost_mid_run_fails_clearly_and_a_rerun_converges(
    tmp_path: Path, big_corpus: Path, big_corpus_store: Path, private_redis: PrivateRedis
) -> None:
    made = Cluster(tmp_path / "store", private_redis.url)
    try:
        made.start(workers=2, threads=2)
        ledger = made.ledger()
        index = made.popen("index", str(big_corpus), "--json")
        run_id = made.wait_for(lambda: next(iter(ledger.recent(1)), None), 30, "the run").run_id
        made.wait_for(lambda: ledger.summary(run_id).accounted >= 500, 60, "500 files written", poll=0.05)
        private_redis.kill()
        _, err = index.communicate(timeout=60)
        assert index.returncode == 1, err
        assert f"lost the broker at {private_redis.url} during run {run_id}" in err
        assert "Re-run `knowledge index`" in err and "Traceback" not in err

        private_redis.start()  # empty: the ledger, the run lock and the queued messages are gone
        rerun = made.knowledge("index", str(big_corpus), "--json", timeout=150)
        assert rerun.returncode == 0, rerun.stderr + made.logs()
        summary = json.loads(rerun.stdout)
        assert summary["failed"] == 0 and summary["files"] == CORPUS_FILES
        assert summary["unchanged"] >= 500
        assert_same_store(made.base, big_corpus_store)
        invariants(made, big_corpus).assert_recovered(check_first=False)
    finally:
        made.stop()
