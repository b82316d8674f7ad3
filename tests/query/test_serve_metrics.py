"""`knowledge serve` /metrics: a real server process scraped in the Prometheus text format."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.query.serving import serving
from tests.query.stores import DOCS, build_store, free_port, store_settings

KNOWLEDGE = str(Path(sys.executable).with_name("knowledge"))
TOKEN = "m3trics-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TIMEOUT = 60


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """`knowledge serve` on a free loopback port over a small store, behind a bearer token."""
    store = build_store(store_settings(tmp_path / "store"), DOCS).store_dir
    config = tmp_path / "knowledge.yaml"
    expose = {"mcp": {"builtins": ["knowledge_search", "knowledge_enumerate"], "token_env": "KQ_METRICS_TOKEN"}}
    config.write_text(yaml.safe_dump({"knowledge": {"directory": str(store), "expose": expose}}))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KNOWLEDGE_", "OTEL_"))}
    env["KQ_METRICS_TOKEN"] = TOKEN
    with serving(KNOWLEDGE, config, port, tmp_path, env) as base:
        yield base


def samples(text: str, name: str) -> list[Sample]:
    """Every sample of the metric family `name` in a text exposition."""
    return [s for family in text_string_to_metric_families(text) if family.name == name for s in family.samples]


def test_a_scrape_after_searches_shows_the_search_histogram_by_tier(server: str) -> None:
    queries = ["retention", "policy", "backups", "quarterly"]
    for q in queries:
        assert httpx.get(f"{server}/v1/search", params={"q": q}, headers=AUTH, timeout=10).status_code == 200
    assert httpx.get(f"{server}/v1/match", params={"q": "retention"}, headers=AUTH, timeout=10).status_code == 200

    scrape = httpx.get(f"{server}/metrics", headers=AUTH, timeout=10)
    assert scrape.status_code == 200 and scrape.headers["content-type"].startswith("text/plain")
    search = samples(scrape.text, "knowledge_search_duration_seconds")
    count = [s for s in search if s.name.endswith("_count")]
    assert [(s.labels["knowledge_tier"], s.value) for s in count] == [("lexical", len(queries))]
    buckets = [s for s in search if s.name.endswith("_bucket")]
    assert buckets and max(s.value for s in buckets) == len(queries)  # the +Inf bucket holds them all
    assert {s.labels["le"] for s in buckets} >= {"0.005", "0.1", "+Inf"}
    enumerate_count = [s for s in samples(scrape.text, "knowledge_enumerate_duration_seconds")
                       if s.name.endswith("_count")]
    assert [s.value for s in enumerate_count] == [1]
    assert samples(scrape.text, "knowledge_search_degraded") == []  # nothing degraded: no series yet


def test_metrics_sits_behind_the_token_and_the_host_check(server: str) -> None:
    assert httpx.get(f"{server}/metrics", timeout=10).status_code == 401
    assert httpx.get(f"{server}/metrics", headers={"Authorization": "Bearer wrong"}, timeout=10).status_code == 401
    foreign = httpx.get(f"{server}/metrics", headers={**AUTH, "Host": "evil.example"}, timeout=10)
    assert foreign.status_code == 421
