"""Debian's prometheus and promtool for the deploy tests: found or skipped, a config generated from
deploy/prometheus.yml for loopback targets, and a real Prometheus process queried over its HTTP API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import stop_process, wait_answering

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "knowledge.json"
INSTALL = "apt-get install -y prometheus"


def require(binary: str) -> str:
    """The path of binary (prometheus, promtool); skipped naming it when absent, failed under CI=true
    where apt-get exists (.ci/run installs the package there)."""
    found = shutil.which(binary)
    if found is not None:
        return found
    message = f"needs Debian's {binary} ({INSTALL}); not on PATH"
    if os.environ.get("CI") == "true" and shutil.which("apt-get") is not None:
        pytest.fail(message + " although apt-get is here (.ci/run installs it)")
    pytest.skip(message)


def loopback_config(serve: int, writer: int, workers: list[int], interval: str = "1s") -> dict[str, Any]:
    """deploy/prometheus.yml with its targets on 127.0.0.1 and the given ports, scraping every interval;
    the collector job is dropped (no collector here, and serve/worker/writer export nothing over OTLP),
    and the rule files are named by absolute path (the copy is written elsewhere)."""
    config: dict[str, Any] = yaml.safe_load((DEPLOY / "prometheus.yml").read_text(encoding="utf-8"))
    config["global"] = {**config["global"], "scrape_interval": interval, "evaluation_interval": interval}
    config["rule_files"] = [str(DEPLOY / name) for name in config.get("rule_files", [])]
    targets = {"knowledge-serve": [serve], "knowledge-writer": [writer], "knowledge-worker": workers}
    jobs = []
    for job in config["scrape_configs"]:
        name = job["job_name"]
        if name not in targets:
            continue
        job.pop("dns_sd_configs", None)
        job["static_configs"] = [{"targets": [f"127.0.0.1:{p}" for p in targets[name]]}]
        jobs.append(job)
    assert {j["job_name"] for j in jobs} == set(targets), "deploy/prometheus.yml lost a knowledge job"
    config["scrape_configs"] = jobs
    return config


def dashboard_panels() -> list[dict[str, Any]]:
    """The panels of the shipped dashboard."""
    panels: list[dict[str, Any]] = json.loads(DASHBOARD.read_text(encoding="utf-8"))["panels"]
    return panels


class Prometheus:
    """A running prometheus on 127.0.0.1:port; query() is one instant query over /api/v1/query."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def query(self, expr: str) -> dict[str, Any]:
        """The API's answer to an instant query of expr (status, data or errorType/error)."""
        answer: dict[str, Any] = httpx.get(f"{self.base}/api/v1/query", params={"query": expr}, timeout=10).json()
        return answer

    def query_range(self, expr: str, start: float, end: float, step: float = 1.0) -> dict[str, Any]:
        """The API's answer to a range query of expr from start to end (unix seconds)."""
        answer: dict[str, Any] = httpx.get(f"{self.base}/api/v1/query_range", timeout=10, params={
            "query": expr, "start": start, "end": end, "step": step}).json()
        return answer

    def rules(self) -> list[dict[str, Any]]:
        """The loaded rules of every group (name, health, lastError, state, ...)."""
        groups = httpx.get(f"{self.base}/api/v1/rules", timeout=10).json()["data"]["groups"]
        return [rule for group in groups for rule in group["rules"]]

    def targets_up(self) -> dict[str, int]:
        """Scrape targets that are up, by job."""
        up: dict[str, int] = {}
        for row in self.query("up == 1")["data"]["result"]:
            up[row["metric"]["job"]] = up.get(row["metric"]["job"], 0) + 1
        return up


@contextmanager
def running(binary: str, config: dict[str, Any], base: Path, port: int) -> Iterator[Prometheus]:
    """Start prometheus on config with its own storage under base; yield once it is ready; stop it after."""
    base.mkdir(parents=True, exist_ok=True)
    path = base / "prometheus.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    log = base / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([binary, f"--config.file={path}", f"--storage.tsdb.path={base / 'data'}",
                                 f"--web.listen-address=127.0.0.1:{port}"], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_answering(f"http://127.0.0.1:{port}/-/ready", proc, "prometheus", 30,
                       lambda: log.read_text(errors="replace")[-2000:])
        yield Prometheus(port)
    finally:
        stop_process(proc, grace=20)
