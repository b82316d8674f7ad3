"""docker-compose.yml and its config describe the same processes scripts/run-local.sh starts."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import yaml

from config.loader import load_settings

REPO = Path(__file__).resolve().parents[2]


def test_compose_runs_redis_scalable_workers_one_writer_and_the_query_server() -> None:
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    assert services["redis"]["image"].startswith("redis:")
    assert services["worker"]["command"][0] == "worker" and "deploy" not in services["worker"]
    assert services["writer"]["command"] == ["writer"] and services["writer"]["deploy"]["replicas"] == 1
    assert services["serve"]["command"] == ["serve"]
    assert services["index"]["command"] == ["index"]
    for name in ("worker", "writer", "serve", "index"):
        env = services[name]["environment"]
        assert env["KNOWLEDGE_BROKER_URL"].startswith("redis://redis:6379/")
        assert env["KNOWLEDGE_STORE_DIR"] == "/data"  # one store path everywhere: one Redis namespace
        assert any(v.endswith(":/docs:ro") for v in services[name]["volumes"])


def test_compose_scales_read_replicas_over_the_volume_the_index_runs_publish_into() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    replica = services["replica"]
    assert replica["command"] == ["serve", "--snapshots", "/published"]
    assert "published:/published:ro" in replica["volumes"]  # reads generations, never writes them
    assert not any(v.startswith("store:") for v in replica["volumes"]) and "KNOWLEDGE_BROKER_URL" not in \
        replica["environment"]  # needs neither the store nor Redis
    assert "deploy" not in replica and "container_name" not in replica  # --scale replica=N works ...
    assert replica["ports"] == ["127.0.0.1::8080"]  # ... each on a loopback host port of its own
    for name in ("index", "publish"):  # the publisher: the store and the published volume, writable
        assert {"store:/data", "published:/published"} <= set(services[name]["volumes"])
    assert services["publish"]["command"] == ["publish"]
    assert "published" in compose["volumes"]
    settings = load_settings(str(REPO / "deploy" / "knowledge.yaml"), replica["environment"]["KNOWLEDGE_STORE_DIR"], {})
    assert str(settings.publish_dir) == "/published" and settings.publish.after_index
    assert str(settings.db_path) != "/data/knowledge/default/knowledge.db"  # so writes there are refused
    assert "replica:8080" in settings.expose.mcp.allowed_hosts


def test_the_image_copies_every_package_the_project_installs() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    for top in {name.split(".")[0] for name in packages}:
        assert f"COPY {top} ./{top}" in dockerfile, f"the Dockerfile does not copy the {top} package"


def test_the_compose_config_loads_with_the_broker_from_the_environment() -> None:
    settings = load_settings(str(REPO / "deploy" / "knowledge.yaml"), "/data",
                             {"KNOWLEDGE_BROKER_URL": "redis://redis:6379/0"})
    assert settings.paths == ("/docs",)
    assert settings.broker is not None and settings.broker.url == "redis://redis:6379/0"
    assert str(settings.store_dir) == "/data/knowledge/default"


def test_the_local_scripts_are_executable_and_document_themselves() -> None:
    for name in ("run-local.sh", "stop-local.sh"):
        script = REPO / "scripts" / name
        assert script.stat().st_mode & 0o111
        assert "Usage" in script.read_text() or "scripts/" in script.read_text()


def _mount_source(volume: str) -> str:
    """The source of a short-syntax mount; for ${VAR:-default} the default (what runs unconfigured)."""
    if volume.startswith("${"):
        inner = volume[2:volume.index("}")]
        return inner.split(":-", 1)[1] if ":-" in inner else ""
    return volume.split(":", 1)[0]


def test_every_file_the_compose_file_mounts_exists() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = _mount_source(volume)
            if source.startswith(("./", "/")):
                assert (REPO / source).exists(), f"{name} mounts {source}, which is missing"
            else:
                assert source in compose["volumes"], f"{name} uses the undeclared volume {source!r}"


def test_the_observability_profile_wires_collector_prometheus_jaeger_and_grafana() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    stack = {"otel-collector", "prometheus", "jaeger", "grafana"}
    assert all(services[name]["profiles"] == ["observability"] for name in stack)
    assert all("profiles" not in services[name] for name in ("redis", "worker", "writer", "serve"))
    for name in ("worker", "writer"):  # scraped: a port of their own, reachable in the compose network
        env = services[name]["environment"]
        assert env["KNOWLEDGE_METRICS_PORT"] == "9464" and env["KNOWLEDGE_METRICS_HOST"] == "0.0.0.0"
        assert env["OTEL_METRICS_EXPORTER"] == "none"  # scraped, so not pushed too: nothing counts twice

    collector = yaml.safe_load((REPO / "deploy" / "otel-collector.yaml").read_text())
    assert collector["service"]["pipelines"]["traces"]["exporters"] == ["otlp/jaeger"]
    assert collector["exporters"]["otlp/jaeger"]["endpoint"] == "jaeger:4317"
    assert collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
    prometheus = yaml.safe_load((REPO / "deploy" / "prometheus.yml").read_text())
    targets = {job["job_name"]: job for job in prometheus["scrape_configs"]}
    assert targets["knowledge-serve"]["static_configs"][0]["targets"] == ["serve:8080"]
    assert targets["knowledge-writer"]["static_configs"][0]["targets"] == ["writer:9464"]
    assert {c["port"] for c in targets["knowledge-worker"]["dns_sd_configs"]} == {9464, 9465}
    assert targets["otel-collector"]["static_configs"][0]["targets"] == [
        "otel-collector:" + collector["exporters"]["prometheus"]["endpoint"].rsplit(":", 1)[1]]
    settings = load_settings(str(REPO / "deploy" / "knowledge.yaml"), "/data", {})
    assert "serve:8080" in settings.expose.mcp.allowed_hosts  # Prometheus's Host header passes the guard

    datasources = yaml.safe_load(
        (REPO / "deploy/grafana/provisioning/datasources/prometheus.yaml").read_text())["datasources"]
    assert {d["url"] for d in datasources} == {"http://prometheus:9090", "http://jaeger:16686"}
    provider = yaml.safe_load(
        (REPO / "deploy/grafana/provisioning/dashboards/knowledge.yaml").read_text())["providers"][0]
    mounted = dict(v.split(":")[:2] for v in services["grafana"]["volumes"] if v.startswith("./"))
    assert mounted["./deploy/grafana/dashboards"] == provider["options"]["path"]


def test_the_dashboard_charts_the_documented_metrics() -> None:
    dashboard = json.loads((REPO / "deploy" / "grafana" / "dashboards" / "knowledge.json").read_text())
    exprs = " ".join(t["expr"] for panel in dashboard["panels"] for t in panel["targets"])
    documented = (REPO / "docs" / "observability.md").read_text()
    for needed in ("knowledge_runs_total", "knowledge_files_indexed_total", "knowledge_files_failed_total",
                   "knowledge_queue_depth", "knowledge_embed_duration_seconds_bucket",
                   "knowledge_search_duration_seconds_bucket", "knowledge_search_degraded_total"):
        assert needed in exprs
    for name in set(re.findall(r"knowledge_[a-z_]+", exprs)):  # every series charted is a documented metric
        otel = re.sub(r"_(total|bucket|sum|count)$", "", name)
        otel = re.sub(r"_seconds$", "", otel).replace("_", ".")
        assert f"`{otel}`" in documented, f"{name} charts {otel}, which docs/observability.md does not list"
    uids = {t["datasource"]["uid"] for panel in dashboard["panels"] for t in panel["targets"]}
    assert uids == {"prometheus"}
