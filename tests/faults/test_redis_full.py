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
