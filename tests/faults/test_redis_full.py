"""Redis up but at maxmemory (a redis-server of the test's own, `--maxmemory-policy noeviction`): a run
names the real cause and frees the run lock at once; with memory back, the re-run converges."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.conftest import write_tree
from tests.faults.test_distributed_faults import PrivateRedis, redis_binary
from tests.workers.cluster import Cluster, invariants

pytestmark = [pytest.mark.redis, pytest.mark.slow]
FILES = 400
ROOM = 64 * 1024  # bytes of Redis memory left above what it uses idle: less than one run's ledger


@pytest.fixture
def full_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    """A PrivateRedis with maxmemory set ROOM above its idle use, under noeviction."""
    server = PrivateRedis(redis_binary(), tmp_path, "--maxmemory-policy", "noeviction")
    server.start()
    client = redis.Redis.from_url(server.url)
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory", str(used + ROOM))
    client.close()
    yield server
    server.kill()


def test_redis_at_maxmemory_is_named_as_such_and_the_run_lock_is_freed(tmp_path: Path, full_redis: PrivateRedis
                                                                        ) -> None:
    rng = random.Random(5)
    vocabulary = ["".join(rng.choice("abcdefghijklmnop") for _ in range(7)) for _ in range(2000)]
    docs = tmp_path / "tree"
    write_tree(docs, {f"docs/f{i:03}.md": f"# Note {i}\n\n" + " ".join(rng.choices(vocabulary, k=300)) + "\n"
                      for i in range(FILES)})
    made = Cluster(tmp_path / "store", full_redis.url)
    try:
        started = time.monotonic()
        run = made.knowledge("index", str(docs / "docs"), timeout=60)
        elapsed = time.monotonic() - started
        assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
        error = run.stderr.strip().splitlines()[-1]
        assert "lost the broker" not in error and "once Redis is back" not in error, error
        assert "is up but out of memory" in error and "maxmemory" in error and "policy noeviction" in error, error
        assert elapsed < 30
        client = made.client()
        assert client.exists(f"{made.namespace}:run-lock") == 0, "the failed run still holds the run lock"

        client.config_set("maxmemory", "0")  # memory back (the operator raised the limit)
        client.close()
        made.start(workers=1, threads=2)
        rerun = made.knowledge("index", str(docs / "docs"), "--json", timeout=150)
        assert rerun.returncode == 0, rerun.stderr + made.logs()
        summary = json.loads(rerun.stdout)
        assert summary["failed"] == 0 and summary["files"] == FILES, summary
        invariants(made, docs / "docs").assert_recovered(check_first=False)
    finally:
        made.stop()


def test_a_worker_meeting_a_full_redis_logs_one_line_naming_maxmemory_and_recovers(tmp_path: Path) -> None:
    server = PrivateRedis(redis_binary(), tmp_path, "--maxmemory-policy", "noeviction")
    server.start()
    docs = tmp_path / "tree" / "docs"
    write_tree(docs, {f"n{i}.md": f"# Note {i}\n\nnote {i} about things\n" for i in range(20)})
    made = Cluster(tmp_path / "store", server.url)
    client = redis.Redis.from_url(server.url)
    try:
        made.start(workers=1, threads=2)
        client.config_set("maxmemory", str(int(client.info("memory")["used_memory"]) - 1024))  # full from now on
        time.sleep(4)  # the idle consumers poll (fetch: a write) about 10 times a second
        client.config_set("maxmemory", "0")
        time.sleep(1.5)
        log = (made.run_dir / "worker.log").read_text(errors="replace")
        assert "found a bug in Dramatiq" not in log and "unexpected error" not in log, log[-3000:]
        full = [line for line in log.splitlines() if '"redis full"' in line]
        assert 1 <= len(full) <= 2, log[-3000:]  # one per worker process and episode (the supervisor's child)
        record = json.loads(full[0])
        assert "maxmemory" in record["detail"] and record["policy"] == "noeviction", record
        assert "Traceback" not in log, log[-3000:]
        run = made.knowledge("index", str(docs), "--json", timeout=90)  # memory back: the same worker serves
        assert run.returncode == 0, run.stderr + made.logs()
        assert json.loads(run.stdout)["added"] == 20
    finally:
        client.close()
        made.stop()
        server.kill()
