"""scripts/run-local.sh --replicas N: read replicas (`knowledge serve --snapshots DIR`), each on its own port,
beside the writer and workers; `index --publish` on the primary reaches every one; scripts/stop-local.sh
stops them with the rest."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import write_tree
from tests.workers.cluster import (
    SCRIPTS,
    Cluster,
    clean_env,
    cluster,  # noqa: F401 - the fixture, requested by name
    knowledge_bin,
)

REPLICAS = 2
FOUND_WITHIN_S = 30.0


def _free_ports(count: int) -> int:
    """A first port P with P..P+count-1 all free on 127.0.0.1 now (bounded tries)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = int(probe.getsockname()[1])
        if first + count > 65535:
            continue
        socks = []
        try:
            for port in range(first, first + count):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise AssertionError(f"no {count} consecutive free ports found")


def _running(pid: int) -> bool:
    """Whether pid is a live process (not a zombie waiting for its reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


def _search(port: int, word: str) -> dict[str, object]:
    return dict(httpx.get(f"http://127.0.0.1:{port}/v1/search", params={"q": word}, timeout=10).json())


@pytest.mark.redis
@pytest.mark.slow
def test_run_local_starts_replicas_that_serve_each_publish_and_stop_local_stops_them(
        cluster: Cluster, tmp_path: Path) -> None:
    snaps = tmp_path / "snaps"
    (cluster.base / "knowledge.yaml").write_text(yaml.safe_dump({"knowledge": {
        "expose": {"mcp": {"builtins": ["knowledge_search"]}}, "publish": {"directory": str(snaps)}}}))
    first = _free_ports(REPLICAS)
    started = subprocess.run([str(SCRIPTS / "run-local.sh"), "--no-serve", "--workers", "1", "--replicas",
                              str(REPLICAS), "--snapshots", str(snaps), "--replica-port", str(first)],
                             cwd=cluster.base, env=cluster.env, capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr + cluster.logs()
    pids = [cluster.pid(f"replica-{i}") for i in range(1, REPLICAS + 1)]
    ports = [first + i for i in range(REPLICAS)]
    for port in ports:  # nothing published yet: no generation
        assert _search(port, "zebrafinch")["generation"] is None

    write_tree(tmp_path, {"docs/zebrafinch.md": "# Zebrafinch\n\nThe zebrafinch escalation procedure.\n"})
    indexed = cluster.knowledge("index", str(tmp_path / "docs"), "--publish", timeout=120)
    assert indexed.returncode == 0 and "published: generation 1" in indexed.stdout, indexed.stderr + cluster.logs()
    for port in ports:
        deadline = time.monotonic() + FOUND_WITHIN_S
        while (answer := _search(port, "zebrafinch")).get("generation") != 1:
            assert time.monotonic() < deadline, f"the replica on {port} never served generation 1{cluster.logs()}"
            time.sleep(0.2)
        assert answer["results"], answer

    cluster.stop()
    assert not [pid for pid in pids if _running(pid)]
    assert not list(cluster.run_dir.glob("replica-*.pid"))


def test_replicas_without_a_snapshots_directory_are_refused_naming_it(tmp_path: Path) -> None:
    result = subprocess.run([str(SCRIPTS / "run-local.sh"), "--replicas", "2", "--run-dir", str(tmp_path / "run")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "--snapshots DIR" in result.stderr, result.stderr
    assert not (tmp_path / "run").exists()  # nothing was started


def test_a_replica_host_starts_only_replicas_and_serves_what_the_primary_published(tmp_path: Path) -> None:
    primary, host, snaps = tmp_path / "primary", tmp_path / "host", tmp_path / "snaps"
    write_tree(primary, {"docs/zebrafinch.md": "# Zebrafinch\n\nThe zebrafinch escalation procedure.\n"})
    env = clean_env()
    indexed = subprocess.run([*knowledge_bin(), "index", "docs", "--publish"], cwd=primary,
                             env={**env, "KNOWLEDGE_CONFIG": _config(primary, snaps)}, capture_output=True, text=True,
                             timeout=120)
    assert indexed.returncode == 0, indexed.stderr
    host.mkdir()
    env.update(KNOWLEDGE_CONFIG=_config(host, snaps), KNOWLEDGE_RUN_DIR=str(host / "run"))
    if len(knowledge_bin()) == 1:
        env["KNOWLEDGE_BIN"] = knowledge_bin()[0]
    port = _free_ports(1)
    started = subprocess.run([str(SCRIPTS / "run-local.sh"), "--replicas-only", "--replicas", "1", "--snapshots",
                              str(snaps), "--replica-port", str(port)], cwd=host, env=env, capture_output=True,
                             text=True, timeout=120)
    try:
        assert started.returncode == 0, started.stderr
        assert sorted(p.name for p in (host / "run").glob("*.pid")) == ["replica-1.pid"]  # no writer, no workers
        answer = _search(port, "zebrafinch")
        assert answer["generation"] == 1 and answer["results"], answer
    finally:
        stopped = subprocess.run([str(SCRIPTS / "stop-local.sh")], cwd=host, env=env, capture_output=True, text=True,
                                 timeout=120)
    assert stopped.returncode == 0 and "replica-1 stopped" in stopped.stdout, stopped.stderr


def _config(where: Path, snaps: Path) -> str:
    path = where / "knowledge.yaml"
    path.write_text(yaml.safe_dump({"knowledge": {"expose": {"mcp": {"builtins": ["knowledge_search"]}},
                                                  "publish": {"directory": str(snaps), "poll_interval": 0.2}}}))
    return str(path)
