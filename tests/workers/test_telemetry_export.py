"""Traces and metrics leave real worker and writer processes over OTLP/HTTP and a Prometheus scrape.

A loopback receiver (tests/otlp_receiver.py) decodes the exporters' protobuf; the processes are the
real `knowledge worker` (two processes) and `knowledge writer` started by scripts/run-local.sh on the
real Redis, and `knowledge index` as the client that walks.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.lib.corpus import generate
from tests.otlp_receiver import Receiver
from tests.workers.cluster import Cluster
from tests.workers.conftest import REDIS_URL, delete_namespace, require_redis

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def free_port_run(count: int) -> int:
    """A port P on 127.0.0.1 such that P .. P+count-1 are free right now."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = int(probe.getsockname()[1])
        if base + count > 65535:
            continue
        try:
            for port in range(base, base + count):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise AssertionError("no run of free ports")


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The samples of a Prometheus text scrape of 127.0.0.1:port, by sample name."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def test_one_run_across_processes_is_one_otlp_trace_and_the_counters_match_its_summary(tmp_path: Path) -> None:
    require_redis()
    docs = tmp_path / "docs"
    generate(docs, 80, seed=3)
    (docs / "blob.md").write_bytes(b"binary\x00content")  # skipped on reading: binary
    (docs / "link.md").symlink_to(docs / "blob.md")  # skipped by the walk: symlink
    port = free_port_run(3)
    with Receiver() as receiver:
        made = Cluster(tmp_path / "store", REDIS_URL, extra_env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_METRIC_EXPORT_INTERVAL": "300",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "KNOWLEDGE_METRICS_PORT": str(port),
        })
        try:
            made.start(workers=2, threads=2)
            result = made.knowledge("index", str(docs), "--json", timeout=60)
            assert result.returncode == 0, result.stderr + made.logs()
            writer_scrape, worker_scrape = scrape(port), scrape(port + 1)
        finally:
            made.stop()  # SIGTERM: each process flushes its spans and its last metric readings
            client = made.client()
            delete_namespace(client, made.namespace)
            client.close()
        summary = json.loads(result.stdout)

        # One run is one trace: the client's root, the workers' ingests and the writer's writes in it.
        spans = receiver.spans()
        roots = [s for s in spans if s.name == "index run"]
        assert len(roots) == 1 and roots[0].parent_id is None and roots[0].service == "knowledge-cli"
        in_trace = [s for s in spans if s.trace_id == roots[0].trace_id]
        assert {s.name for s in in_trace} >= {"index run", "walk", "ingest", "write", "finalize", "prune"}
        assert {s.service for s in in_trace if s.name == "ingest"} == {"knowledge-worker"}
        assert {s.service for s in in_trace if s.name == "write"} == {"knowledge-writer"}
        assert len([s for s in in_trace if s.name == "ingest"]) == 3  # 81 files in batches of 32
        by_id = {s.span_id: s for s in spans}
        assert all(by_id[s.parent_id].name == "ingest" for s in in_trace if s.name == "write" and s.parent_id)

        # The counters, summed over the processes that exported them, are the run summary.
        assert summary["state"] == "complete" and summary["added"] == 80
        assert receiver.total("knowledge.files.indexed", {"knowledge.outcome": "added"}) == summary["added"]
        assert receiver.total("knowledge.files.indexed", {"knowledge.outcome": "updated"}) == summary["updated"]
        assert receiver.total("knowledge.files.unchanged") == summary["unchanged"]
        assert receiver.total("knowledge.files.failed") == summary["failed"]
        assert receiver.total("knowledge.files.skipped") == len(summary["skipped"]) == 2
        assert receiver.total("knowledge.files.skipped", {"knowledge.reason": "binary"}) == 1
        assert receiver.total("knowledge.files.skipped", {"knowledge.reason": "symlink",
                                                          "knowledge.stage": "walk"}) == 1
        assert receiver.total("knowledge.files.walked") == 81  # read or stat-checked; the symlink never counted
        assert receiver.total("knowledge.chunks.written") == summary["chunks"]
        assert receiver.total("knowledge.runs", {"knowledge.run.outcome": "complete"}) == 1
        writes = receiver.latest("knowledge.write.duration")
        assert sum(p.value for p in writes.values()) == summary["added"]  # one transaction per document
        assert {p.unit for p in writes.values()} == {"s"}
        services = {p.service for p in receiver.points()}
        assert services >= {"knowledge-cli", "knowledge-writer", "knowledge-worker"}
        depth = receiver.latest("knowledge.queue.depth")
        queues = {dict(p.attributes)["messaging.destination.name"] for p in depth.values()}
        assert queues >= {"ingest", "embed", "write", "ingest.DQ"}
        assert len({p.instance for p in depth.values() if p.service == "knowledge-worker"}) == 2

    # The same processes served Prometheus scrapes: the writer on P, the first worker on P+1.
    assert sum(v for _, v in writer_scrape["knowledge_chunks_written_total"]) > 0
    assert {labels["messaging_destination_name"] for labels, _ in worker_scrape["knowledge_queue_depth"]} \
        == {"ingest", "ingest.DQ", "embed", "embed.DQ"}


def test_a_taken_metrics_port_stops_the_writer_with_one_line_naming_it(tmp_path: Path) -> None:
    require_redis()
    made = Cluster(tmp_path / "store", REDIS_URL)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = made.knowledge("writer", env={**made.env, "KNOWLEDGE_METRICS_PORT": str(port)}, timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"KNOWLEDGE_METRICS_PORT={port}: cannot serve metrics on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
