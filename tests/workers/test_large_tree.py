"""What a run holds in Redis does not grow with the tree: real worker and writer processes, real Redis.

A run with nothing to read records nothing per file; while the writer is behind (here: away), the
workers stage at most backpressure.STAGED_LIMIT payloads (plus one per other worker thread that
checked at the same moment) and the rest of the run waits in the queue.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import write_tree
from tests.workers.cluster import Cluster, knowledge_bin, owned
from workers.backpressure import STAGED_LIMIT, WRITER_WAIT_S
from workers.ledger.redis_ledger import FINISHED_TTL_SECONDS

pytestmark = [pytest.mark.redis, pytest.mark.slow]

FILES = 400


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A store of its own with one file per ingest message, over a tree of FILES small notes."""

    def prepare(made: Cluster) -> None:
        (made.base / "knowledge.yaml").write_text("knowledge:\n  paths: [docs]\n  batch_files: 1\n", encoding="utf-8")
        write_tree(made.base, {f"docs/d{i % 20:02d}/n{i:04d}.md": f"# Note {i}\n\nnote {i} on topic{i % 11}\n"
                               for i in range(FILES)})
        settled = time.time() - 60  # older than the racy-clean window: unchanged by stat on the next run
        for note in (made.base / "docs").rglob("*.md"):
            os.utime(note, (settled, settled))

    with owned(tmp_path / "store", prepare) as made:
        yield made


def _run_keys(cluster: Cluster, run_id: str) -> dict[str, int]:
    """The run's ledger keys (by the part after the run id) and their memory in bytes."""
    client = cluster.client()
    try:
        prefix = f"{cluster.namespace}:run:{run_id}:"
        return {key.decode()[len(prefix):]: int(client.memory_usage(key) or 0)
                for key in client.scan_iter(match=prefix + "*", count=1000)}
    finally:
        client.close()


def test_a_run_with_nothing_to_read_holds_nothing_per_file_in_redis(cluster: Cluster) -> None:
    cluster.start(workers=1, threads=2)
    first = cluster.knowledge("index", "--json", timeout=180)
    assert first.returncode == 0, first.stderr + cluster.logs()
    assert json.loads(first.stdout)["added"] == FILES
    runs = cluster.ledger().recent(1)
    client = cluster.client()
    try:  # the per-path record of a finished run only guards redeliveries: it leaves within the hour
        assert 0 < client.ttl(f"{cluster.namespace}:run:{runs[0].run_id}:out") <= FINISHED_TTL_SECONDS
    finally:
        client.close()

    again = cluster.knowledge("index", "--json", timeout=60)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert (summary["unchanged"], summary["added"], summary["removed"]) == (FILES, 0, 0)
    keys = _run_keys(cluster, summary["run_id"])
    assert "out" not in keys and not any(k.startswith("stage:") for k in keys), keys
    assert sum(keys.values()) < 2048, keys  # a per-file record would be ~FILES x 50 bytes


def test_workers_stage_at_most_the_limit_while_the_writer_is_away_and_the_run_completes_when_it_comes(
        cluster: Cluster) -> None:
    files = STAGED_LIMIT + 8
    for i in range(files, FILES):  # one ingest message per file: a few more messages than the limit
        (cluster.base / f"docs/d{i % 20:02d}/n{i:04d}.md").unlink()
    cluster.run_dir.mkdir(parents=True, exist_ok=True)
    with open(cluster.run_dir / "worker.log", "wb") as log:
        worker = subprocess.Popen([*knowledge_bin(), "worker", "--processes", "1", "--threads", "2"],
                                  cwd=cluster.base, env=cluster.env, stdout=log, stderr=subprocess.STDOUT)
    cluster.extra_procs.append(worker)
    detached = cluster.knowledge("index", "--detach", "--json", timeout=60)
    assert detached.returncode == 0, detached.stderr
    run_id = json.loads(detached.stdout)["run_id"]
    ledger = cluster.ledger()
    cluster.wait_for(lambda: ledger.staged_count(run_id) >= STAGED_LIMIT, 60, "the workers to fill the room")
    time.sleep(WRITER_WAIT_S + 1)  # past a waiting message's wait: it goes back to the queue, staging nothing
    # the check is not atomic with the staging: the worker's other thread may have passed it at once
    assert STAGED_LIMIT <= ledger.staged_count(run_id) <= STAGED_LIMIT + 1
    assert ledger.summary(run_id).accounted == 0

    cluster.spawn_writer()
    cluster.wait_for(lambda: ledger.summary(run_id).state == "complete", 120, "the run to complete", poll=0.2)
    summary = ledger.summary(run_id)
    assert (summary.counts["added"], summary.counts["failed"]) == (files, 0)
    assert ledger.staged_count(run_id) == 0
