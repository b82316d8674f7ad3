"""docker-compose.yml and its config describe the same processes scripts/run-local.sh starts."""

from __future__ import annotations

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
