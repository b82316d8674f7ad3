"""Every panel of the shipped Grafana dashboard answers from a real Prometheus scraping real processes.

Two `knowledge worker` processes and a `knowledge writer` (scripts/run-local.sh, Redis) with
KNOWLEDGE_METRICS_PORT, `knowledge serve` with /metrics, and Debian's `prometheus` scraping them every
second on a config generated from deploy/prometheus.yml. Two index runs with vectors through the
loopback embeddings server (a poisoned document: its batch halves down to it and it fails; a binary
file skipped; one file changed between the runs), searches and matches in two bursts, and degraded
searches; then every `expr` of deploy/grafana/dashboards/knowledge.json is evaluated over
/api/v1/query: each parses and returns a finite value (every query of every panel). The values are written to
bench/out/dashboard-values.json (docs/observability.md quotes them). The alert rules of
deploy/alerts.yml are loaded too and must evaluate without error.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import wait_answering, write_tree
from tests.deploy.prom import Prometheus, dashboard_panels, loopback_config, require, running
from tests.embedserver import EmbedServer
from tests.workers.cluster import Cluster, owned
from tests.workers.test_telemetry_export import free_port_run

pytestmark = [pytest.mark.redis, pytest.mark.slow]

POISON = "zzpoisonzz"  # in one document and in the degraded searches' query: the server answers 500
FILES = 150
# Panels that can only show data after an event this test cannot make (each says why in its
# description). None today: every panel answers below.
NO_DATA_EXPECTED: frozenset[int] = frozenset()
VALUES = Path(__file__).resolve().parents[2] / "bench" / "out" / "dashboard-values.json"
SERIES = VALUES.with_name("dashboard-series.json")  # each query over the test's window, for render_panels.py


def free_port() -> int:
    """A free port on 127.0.0.1 right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def server() -> Iterator[EmbedServer]:
    with EmbedServer(dim=16) as running_server:
        yield running_server


@pytest.fixture
def cluster(tmp_path: Path, server: EmbedServer) -> Iterator[Cluster]:
    """A store with an embeddings block, a tree of notes, a poisoned note and a binary file."""
    port = free_port_run(3)

    def prepare(made: Cluster) -> None:
        made.env["KNOWLEDGE_METRICS_PORT"] = str(port)
        made.env["OTEL_METRICS_EXPORTER"] = "none"
        (made.base / "knowledge.yaml").write_text(
            f"knowledge:\n  embeddings:\n    base_url: {server.base_url}\n    model: hashed-bow\n    timeout: 5\n"
            "  expose:\n    mcp:\n      builtins: [knowledge_search, knowledge_enumerate]\n",
            encoding="utf-8")
        tree = {f"docs/n{i:04d}.md": f"# Note {i}\n\nnote {i} on topic{i % 11} retention\n" for i in range(FILES)}
        tree["docs/poisoned.md"] = f"# Poisoned\n\nthis note holds {POISON} and breaks the model\n"
        write_tree(made.base, tree)
        (made.base / "docs" / "blob.md").write_bytes(b"binary\x00content")

    with owned(tmp_path / "store", prepare) as made:
        yield made


def scraped_past(prom: Prometheus, seconds: float = 2.5) -> None:
    """Wait long enough for every target to have been scraped again (1 s interval)."""
    time.sleep(seconds)
    assert prom.query("up")["status"] == "success"


def index(cluster: Cluster) -> dict[str, Any]:
    result = cluster.knowledge("index", "docs", "--json", timeout=150)
    assert result.returncode == 1, result.stderr + cluster.logs()  # 1: the poisoned note failed
    summary: dict[str, Any] = json.loads(result.stdout)
    return summary


def finite_values(answer: dict[str, Any]) -> list[tuple[dict[str, str], float]]:
    """The finite samples of an instant-vector answer, with their labels."""
    found = []
    for row in answer["data"]["result"]:
        value = float(row["value"][1])
        if math.isfinite(value):
            found.append((row["metric"], value))
    return found


def _panel_values(prom: Prometheus) -> tuple[dict[str, Any], list[str]]:
    """Every panel's queries evaluated: (values by panel title, the queries without data)."""
    values: dict[str, Any] = {}
    silent = []
    for panel in dashboard_panels():
        shown = []
        for target in panel.get("targets", []):
            answer = prom.query(target["expr"])
            assert answer["status"] == "success", (panel["title"], target["expr"], answer)
            found = finite_values(answer)
            shown.append({"expr": target["expr"], "values": [[labels, v] for labels, v in found]})
            if not found and panel["id"] not in NO_DATA_EXPECTED:
                silent.append(f"{panel['title']}: {target['expr']}")
        values[panel["title"]] = shown
    return values, silent


def test_every_dashboard_panel_answers_from_a_real_prometheus(tmp_path: Path, cluster: Cluster,
                                                              server: EmbedServer) -> None:
    prometheus = require("prometheus")
    base_port = int(cluster.env["KNOWLEDGE_METRICS_PORT"])  # the writer; the two workers after it
    serve_port, prom_port = free_port(), free_port()
    server.faults.poison = POISON
    cluster.start(workers=2, threads=2)
    serve = cluster.popen("serve", "--port", str(serve_port))
    api = f"http://127.0.0.1:{serve_port}"
    wait_answering(f"{api}/healthz", serve, "knowledge serve", 60, cluster.logs)

    began = time.time()
    config = loopback_config(serve_port, base_port, [base_port + 1, base_port + 2])
    with running(prometheus, config, tmp_path / "prometheus", prom_port) as prom:
        up_deadline = time.monotonic() + 30
        while prom.targets_up() != {"knowledge-serve": 1, "knowledge-writer": 1, "knowledge-worker": 2}:
            assert time.monotonic() < up_deadline, f"targets not up: {prom.targets_up()}"
            time.sleep(0.5)

        first = index(cluster)
        assert first["added"] == FILES and first["failed"] == 1, first
        assert [s["path"] for s in first["skipped"]] == ["docs/blob.md"] or len(first["skipped"]) == 1, first
        scraped_past(prom)
        (cluster.base / "docs" / "n0000.md").write_text("# Note 0\n\nnote 0 rewritten\n", encoding="utf-8")
        touched = cluster.base / "docs" / "n0001.md"  # same content, new mtime: unchanged by hash, in the writer
        os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 10**9))
        second = index(cluster)
        assert second["updated"] == 1 and second["unchanged"] >= FILES - 1, second
        assert prom.query("sum(knowledge_embed_halvings_total) > 0")["data"]["result"], "no batch halved"
        assert any(len(r) > 1 for r in server.requests if any(POISON in t for t in r))  # a batch that halved
        for _burst in range(2):
            for word in ("retention", "topic3", "note 7"):
                assert httpx.get(f"{api}/v1/search", params={"q": word}, timeout=30).status_code == 200
                assert httpx.get(f"{api}/v1/match", params={"q": word}, timeout=30).status_code == 200
            degraded = httpx.get(f"{api}/v1/search", params={"q": f"{POISON} retention"}, timeout=60)
            assert degraded.status_code == 200, degraded.text
            scraped_past(prom)
        assert prom.query("sum(knowledge_search_degraded_total) > 0")["data"]["result"], "no degraded search counted"
        assert prom.query('knowledge_files_failed_total{knowledge_reason="embedding"}')["data"]["result"]
        assert prom.query('knowledge_files_skipped_total{knowledge_reason="binary"}')["data"]["result"]

        values, silent = _panel_values(prom)
        VALUES.parent.mkdir(parents=True, exist_ok=True)
        VALUES.write_text(json.dumps(values, indent=1, sort_keys=True), encoding="utf-8")
        ended = time.time()
        SERIES.write_text(json.dumps({panel["title"]: [
            {"expr": t["expr"], "legend": t.get("legendFormat", ""),
             "result": prom.query_range(t["expr"], began, ended)["data"]["result"]}
            for t in panel.get("targets", [])] for panel in dashboard_panels()}), encoding="utf-8")
        assert silent == [], f"queries without data: {silent}\n{json.dumps(values, indent=1)}"
        rules = prom.rules()  # deploy/alerts.yml, loaded through the config's rule_files, evaluates cleanly
        assert len(rules) == 7 and all(r["health"] == "ok" for r in rules), rules
        pending = {r["name"] for r in rules if r["state"] != "inactive"}
        # 2 of 8 searches degraded, most embedding requests were the poisoned batch's: pending (for: 10m);
        # the runs completed and the queues drained.
        assert pending <= {"KnowledgeSearchDegraded", "KnowledgeEmbeddingRequestsFailing"}, pending
        for panel in dashboard_panels():
            if panel["id"] in NO_DATA_EXPECTED:
                assert "no data until" in panel.get("description", ""), panel["title"]
