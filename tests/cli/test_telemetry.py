"""Metrics of the in-process shape and of read commands, exported over OTLP by real `knowledge` processes.

An embedded `knowledge index` with embeddings records its embedding requests; `knowledge search`
records its latency by tier and, with the embeddings server gone, a degraded search. Each process
flushes its readings at exit to the loopback receiver (tests/otlp_receiver.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import write_tree
from tests.embedserver import EmbedServer
from tests.otlp_receiver import Receiver
from tests.workers.cluster import knowledge_bin

DOCS = {
    "docs/budgets.md": "# Budgets\n\nLimit the cost of each run with a budget cap.\n",
    "docs/queues.md": "# Queues\n\nMessages wait in a queue until a worker takes them.\n",
    "docs/install.md": "# Install\n\nRun the installer, then restart the agent.\n",
}


def run(workdir: Path, receiver: Receiver, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KNOWLEDGE_", "OTEL_"))}
    env.update({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": f"{receiver.endpoint}/v1/metrics",
                "OTEL_TRACES_EXPORTER": "none"})
    return subprocess.run([*knowledge_bin(), *args], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=120)


def test_embedding_requests_and_search_tiers_arrive_over_otlp(tmp_path: Path) -> None:
    write_tree(tmp_path, DOCS)
    with EmbedServer(dim=24) as server, Receiver() as receiver:
        (tmp_path / "knowledge.yaml").write_text(
            "knowledge:\n  paths: [docs]\n  embeddings:\n"
            f"    base_url: {server.base_url}\n    model: hashed-bow\n    timeout: 1\n", encoding="utf-8")
        indexed = run(tmp_path, receiver, "index", "--json")
        assert indexed.returncode == 0, indexed.stderr
        assert json.loads(indexed.stdout)["added"] == 3
        requests = receiver.latest("knowledge.embed.duration")
        assert {dict(p.attributes)["knowledge.embed.outcome"] for p in requests.values()} == {"ok"}
        assert sum(p.value for p in requests.values()) >= 1
        inputs = next(iter(receiver.latest("knowledge.embed.inputs").values()))
        assert inputs.unit == "{input}" and inputs.value == sum(p.value for p in requests.values())
        assert receiver.total("knowledge.embed.halvings") == 0

        assert run(tmp_path, receiver, "search", "budget").returncode == 0
        server.stop()
        degraded = run(tmp_path, receiver, "search", "budget")
        assert degraded.returncode == 0 and "DEGRADED" in degraded.stdout

    searches = receiver.latest("knowledge.search.duration").values()
    tiers = {dict(p.attributes)["knowledge.tier"]: p.value for p in searches}
    assert tiers == {"hybrid": 1, "degraded": 1}
    assert receiver.total("knowledge.search.degraded", {"knowledge.degraded_kind": "refused"}) == 1
    assert {p.service for p in receiver.points()} == {"knowledge-cli"}


def test_search_and_match_write_their_spans_when_an_exporter_is_set(tmp_path: Path) -> None:
    write_tree(tmp_path, DOCS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KNOWLEDGE_", "OTEL_"))}
    assert subprocess.run([*knowledge_bin(), "index", "docs"], cwd=tmp_path, env=env, capture_output=True,
                          timeout=120).returncode == 0
    spans = tmp_path / "spans.jsonl"
    env["KNOWLEDGE_TRACE_FILE"] = str(spans)
    for args in (["search", "budget"], ["match", "queue"]):
        done = subprocess.run([*knowledge_bin(), *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
    search, match = [json.loads(line) for line in spans.read_text().splitlines()]
    assert (search["name"], search["service"], search["attributes"]["knowledge.tier"]) == (
        "search", "knowledge-cli", "tier: lexical (FTS5) - no embeddings configured")
    assert search["attributes"]["knowledge.hits"] == 1
    assert (match["name"], match["attributes"]["knowledge.matched"]) == ("enumerate", 1)
