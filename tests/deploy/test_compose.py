"""The team deployment in containers: the shipped Dockerfile built, docker-compose.yml brought up, killed and
restarted, proven through the containers only.

The base is Debian bookworm made by debootstrap (cached by its inputs), the image is the shipped
Dockerfile built offline on it with the project's wheels, and the stack is the shipped compose file plus
an override that puts every container on the host's network (services on 127.0.0.1, each on a free port
of its own; Redis is this test's own redis-server on a free port; no bridge network, nothing leaves
loopback). Through the containers: an index run of a tree mounted read-only (worker and writer
containers), search over the serve container's /v1/search, /mcp and the page (bearer token from
KNOWLEDGE_TOKEN), a worker container killed with SIGKILL mid-run and the run converging with nothing
lost, the writer container killed and restarted with the store intact (`knowledge check` in a container),
`knowledge publish` and a replica container serving that generation, `down` keeping the named volumes
and `up` serving the same store. Each phase's time goes to bench/out/compose-timings.json
(bench/RESULTS.md quotes it).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import write_tree
from tests.deploy import docker as dk

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

TOKEN = "compose-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FIRST = 120     # files of the first run: markdown, reStructuredText, HTML and text
SECOND = 1200   # files added for the run a worker container is killed in
TIMINGS = dk.REPO / "bench" / "out" / "compose-timings.json"
KNOWLEDGE_SERVICES = ("worker", "writer", "serve", "index", "publish", "replica")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def note(i: int) -> tuple[str, str]:
    """File i of the tree, in one of four formats, each holding the word zqmark<i>."""
    kind = i % 4
    if kind == 0:
        return f"md/n{i:05d}.md", f"# Note {i}\n\nzqmark{i} retention topic{i % 13}\n"
    if kind == 1:
        return f"rst/n{i:05d}.rst", f"Note {i}\n{'=' * (5 + len(str(i)))}\n\nzqmark{i} retention topic{i % 13}\n"
    if kind == 2:
        return f"html/n{i:05d}.html", f"<html><body><h1>Note {i}</h1><p>zqmark{i} retention</p></body></html>\n"
    return f"txt/n{i:05d}.txt", f"zqmark{i} retention topic{i % 13}\n"


def tree_files(start: int, count: int) -> dict[str, str]:
    return dict(note(i) for i in range(start, start + count))


class Redis:
    """This test's own redis-server on 127.0.0.1 and a free port, no persistence."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", str(workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True,
                             timeout=10).stdout.strip() != "PONG":
            assert self.proc.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def host_networked() -> dict[str, Any]:
    """The shipped docker-compose.yml with every service on the host's network instead of the project's.

    Everything else is kept as shipped (commands, volumes, environment, profiles). Only `ports` go:
    they mean nothing on the host's network, and compose v1 refuses them beside it ("host" network_mode
    is incompatible with port_bindings) while an override file cannot remove a key.
    """
    shipped: dict[str, Any] = yaml.safe_load((dk.REPO / "docker-compose.yml").read_text(encoding="utf-8"))
    for service in shipped["services"].values():
        service.pop("ports", None)
        service["network_mode"] = "host"
    shipped.pop("x-knowledge", None)  # the anchor's source, merged into the services already
    return shipped


def override(image: str, redis_port: int, replica_port: int) -> dict[str, Any]:
    """The test's override: its image, its Redis, metrics on free loopback ports, the replica on a port of
    its own, health probed every second (the image's own HEALTHCHECK command)."""
    services: dict[str, Any] = {}
    for name in KNOWLEDGE_SERVICES:
        services[name] = {"image": image, "environment": {"KNOWLEDGE_BROKER_URL": f"redis://127.0.0.1:{redis_port}/0"}}
    for name in ("worker", "writer"):
        services[name]["environment"].update(KNOWLEDGE_METRICS_PORT="0", KNOWLEDGE_METRICS_HOST="127.0.0.1")
    services["replica"]["command"] = ["serve", "--snapshots", "/published", "--port", str(replica_port)]
    for name in ("worker", "writer", "serve", "replica"):
        services[name]["healthcheck"] = {"interval": "1s", "timeout": "5s", "retries": 3}
    return {"services": services}


def stack_config(serve_port: int) -> dict[str, Any]:
    """deploy/knowledge.yaml as shipped, but serving on 127.0.0.1:serve_port with a token, polling fast."""
    config: dict[str, Any] = yaml.safe_load((dk.REPO / "deploy" / "knowledge.yaml").read_text(encoding="utf-8"))
    mcp = config["knowledge"]["expose"]["mcp"]
    mcp.update(host="127.0.0.1", port=serve_port, token_env="KNOWLEDGE_TOKEN",
               builtins=["knowledge_search", "knowledge_enumerate", "knowledge_read"])
    config["knowledge"]["publish"]["poll_interval"] = 1
    return config


class Timings(dict[str, float]):
    def phase(self, name: str, began: float) -> None:
        self[name] = round(time.monotonic() - began, 1)


@pytest.fixture
def timings() -> Iterator[Timings]:
    found = Timings()
    yield found
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    TIMINGS.write_text(json.dumps(found, indent=1), encoding="utf-8")
    print("compose timings (s):", json.dumps(found))


def index_json(stack: dk.Compose, *args: str, expect: int = 0, timeout: float = 240) -> dict[str, Any]:
    done = stack.knowledge("index", "--json", *args, timeout=timeout, check=False)
    assert done.returncode == expect, f"index exited {done.returncode}\n{done.stdout}\n{done.stderr}\n{stack.logs()}"
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def stats(url: str) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.get(f"{url}/v1/stats", headers=AUTH, timeout=10).json()
    return answer


def search(url: str, query: str) -> dict[str, Any]:
    reply = httpx.get(f"{url}/v1/search", params={"q": query}, headers=AUTH, timeout=30)
    assert reply.status_code == 200, reply.text
    answer: dict[str, Any] = reply.json()
    return answer


def mcp_search(url: str, query: str) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        with anyio.fail_after(60):
            async with httpx2.AsyncClient(headers=AUTH) as http:
                async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                    result = await client.call_tool("knowledge_search", {"query": query})
        answer: dict[str, Any] = json.loads(getattr(result.content[0], "text", "{}"))
        return answer

    return anyio.run(main)


def wait_for(what: str, probe: Any, seconds: float, logs: dk.Compose, every: float = 0.25) -> Any:
    """Poll probe() (bounded by seconds) until it returns something truthy; connection errors are retried."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            value = probe()
            if value:
                return value
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{what}: not within {seconds}s\n{logs.logs()}"
        time.sleep(every)


def volumes(project: str) -> set[str]:
    listed = dk.run(["docker", "volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={project}"], 60)
    return set(listed.stdout.split())


def anonymous_volumes(stack: dk.Compose) -> set[str]:
    """The unnamed volumes the stack's containers hold (the image's VOLUMEs they mount nothing over)."""
    held = set()
    for service in KNOWLEDGE_SERVICES:
        for container in stack.containers(service):
            for mount in dk.inspect(container)["Mounts"]:
                if mount["Type"] == "volume" and not mount["Name"].startswith(f"{stack.project}_"):
                    held.add(mount["Name"])
    return held


def networks_of(project: str) -> set[str]:
    listed = dk.run(["docker", "network", "ls", "-q", "--filter", f"label=com.docker.compose.project={project}"], 60)
    return set(listed.stdout.split())


@pytest.fixture
def deployment(tmp_path: Path, timings: Timings) -> Iterator[tuple[dk.Compose, Path, int, int]]:
    """(the compose stack, the tree on the host, serve's port, the replica's port), nothing started yet;
    torn down with its volumes afterwards."""
    compose = dk.require_docker()
    began = time.monotonic()
    base, made = dk.base_image()
    timings.phase("base (made)" if made else "base (cached)", began)
    began = time.monotonic()
    version = dk.python_of(base)
    wheels = dk.gather_wheels(dk.host_python(version), version)
    timings.phase("wheels", began)
    began = time.monotonic()
    dk.build_image(base, wheels)
    timings.phase("image", began)
    timings["image MB"] = round(dk.image_size(dk.IMAGE) / 1e6, 1)

    redis = Redis(tmp_path)
    serve_port, replica_port = free_port(), free_port()
    tree = tmp_path / "tree"
    tree.mkdir(mode=0o755)
    write_tree(tree, tree_files(0, FIRST))
    config = tmp_path / "knowledge.yaml"
    config.write_text(yaml.safe_dump(stack_config(serve_port)), encoding="utf-8")
    shipped, overrides = tmp_path / "docker-compose.host.yml", tmp_path / "compose.override.yml"
    shipped.write_text(yaml.safe_dump(host_networked()), encoding="utf-8")
    overrides.write_text(yaml.safe_dump(override(dk.IMAGE, redis.port, replica_port)), encoding="utf-8")
    project = f"knowledgetest{os.getpid()}"
    stack = dk.Compose(compose, project, [shipped, overrides], {
        "KNOWLEDGE_DOCS": str(tree), "KNOWLEDGE_CONFIG_FILE": str(config), "KNOWLEDGE_TOKEN": TOKEN})
    try:
        yield stack, tree, serve_port, replica_port
    finally:
        stack.anonymous |= anonymous_volumes(stack)
        stack("down", "-v", "--remove-orphans", "-t", "10", timeout=240, check=False)
        if stack.anonymous:
            dk.run(["docker", "volume", "rm", "-f", *sorted(stack.anonymous)], 120, check=False)
        redis.stop()


def test_the_compose_stack_indexes_searches_survives_kills_publishes_and_keeps_its_volumes(
        deployment: tuple[dk.Compose, Path, int, int], timings: Timings) -> None:
    stack, tree, serve_port, replica_port = deployment
    serve, replica = f"http://127.0.0.1:{serve_port}", f"http://127.0.0.1:{replica_port}"
    project = stack.project

    # Up: two worker containers, the writer, the query server; healthy by the image's own HEALTHCHECK.
    began = time.monotonic()
    stack("up", "-d", "--no-build", "--no-deps", "--scale", "worker=2", "worker", "writer", "serve")
    running = [c for service in ("worker", "writer", "serve") for c in stack.containers(service)]
    assert len(running) == 4, running
    dk.wait_healthy(running, 90, stack)
    timings.phase("stack up (healthy)", began)
    assert networks_of(project) == set(), "the stack made a network: every service must be on the host's"
    for container in running:
        facts = dk.inspect(container)
        assert facts["HostConfig"]["NetworkMode"] == "host"
        assert facts["Config"]["User"] == "knowledge"
        docs = [m for m in facts["Mounts"] if m["Destination"] == "/docs"]
        assert docs and docs[0]["RW"] is False, docs  # the tree is read-only in every container

    # An index run through the containers: the walker in a one-off container, the workers and the writer.
    began = time.monotonic()
    first = index_json(stack)
    timings.phase(f"index {FIRST} files", began)
    assert (first["added"], first["failed"], first["files"]) == (FIRST, 0, FIRST), first

    # Search over the serve container: the JSON API, MCP, the page; the token passes through compose.
    began = time.monotonic()
    assert httpx.get(f"{serve}/v1/search", params={"q": "zqmark7"}, timeout=10).status_code == 401
    for i in (0, 1, 2, 3, 77):
        hits = search(serve, f"zqmark{i}")["results"]
        assert hits and hits[0]["path"].endswith(note(i)[0]), (i, hits[:2])
    tool = mcp_search(serve, "zqmark42")
    assert tool["status"] == "ok" and tool["results"][0]["path"].endswith(note(42)[0]), tool
    page = httpx.get(f"{serve}/", params={"q": "zqmark5"}, headers=AUTH, timeout=30)
    assert page.status_code == 200 and note(5)[0].rsplit("/", 1)[1] in page.text, page.text[:2000]
    timings.phase("search (api, mcp, page)", began)

    # A worker container killed with SIGKILL mid-run: the run converges, nothing lost.
    write_tree(tree, tree_files(FIRST, SECOND))
    total = FIRST + SECOND
    victim = stack.containers("worker")[0]
    began = time.monotonic()
    follower = stack.popen("run", "--rm", "-T", "--no-deps", "index", "index", "--json")
    try:
        def begun() -> bool:  # the run's first commit: the workers hold most of it in flight
            assert follower.poll() is None, "the run ended before a worker could be killed mid-run"
            return bool(stats(serve)["documents"] > FIRST)

        wait_for("the second run's first commits", begun, 180, stack, every=0.05)
        dk.run(["docker", "kill", "--signal", "KILL", victim], 60)
        killed_at = stats(serve)["documents"]
        out, err = follower.communicate(timeout=300)
    finally:
        if follower.poll() is None:
            follower.send_signal(signal.SIGTERM)
            follower.wait(timeout=30)
    assert follower.returncode == 0, f"{out}\n{err}\n{stack.logs()}"
    second = json.loads(out)
    timings.phase(f"index {SECOND} files with a worker killed", began)
    assert (second["added"], second["failed"], second["state"]) == (SECOND, 0, "complete"), second
    assert FIRST < killed_at < total - 300, killed_at  # mid-run: most of it still to come
    timings["documents stored when the worker was killed"] = killed_at
    assert stats(serve)["documents"] == total
    assert dk.inspect(victim)["State"]["ExitCode"] == 137

    # The writer container killed and restarted: the store intact, the restarted writer applying runs.
    began = time.monotonic()
    writer = stack.containers("writer")[0]
    dk.run(["docker", "kill", "--signal", "KILL", writer], 60)
    checked = stack.knowledge("check", "--full", "--json", timeout=300, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    stack("up", "-d", "--no-build", "--no-deps", "--scale", "worker=2", "writer", "worker")
    dk.wait_healthy(stack.containers("writer") + stack.containers("worker"), 90, stack)
    (tree / note(9)[0]).write_text("# Note 9\n\nzqmark9 rewritten zqedited\n", encoding="utf-8")
    third = index_json(stack)
    assert (third["updated"], third["unchanged"], third["added"], third["removed"], third["failed"]) == (
        1, total - 1, 0, 0, 0), third
    assert search(serve, "zqedited")["results"][0]["path"].endswith(note(9)[0])
    timings.phase("writer killed, check, restart, run", began)

    # Publish, and a replica container serving that generation.
    began = time.monotonic()
    published = stack.knowledge("publish", "--json", timeout=240)
    generation = json.loads(published.stdout)["generation"]
    assert generation >= 2  # the index runs published already (knowledge.publish.after_index)
    stack("up", "-d", "--no-build", "--no-deps", "replica")
    dk.wait_healthy(stack.containers("replica"), 90, stack)
    health = wait_for("the replica's generation", lambda: (
        lambda h: h if h.get("generation") == generation else None)(
        httpx.get(f"{replica}/healthz", timeout=5).json()), 60, stack)
    assert health["documents"] == total, health
    answer = search(replica, "zqedited")
    assert answer["generation"] == generation and answer["results"][0]["path"].endswith(note(9)[0]), answer
    timings.phase("publish and replica", began)

    # down keeps the named volumes; up serves the same store.
    began = time.monotonic()
    kept = volumes(project)
    assert {f"{project}_store", f"{project}_published"} <= kept, kept
    stack.anonymous |= anonymous_volumes(stack)
    stack("down", "-t", "20", timeout=240)
    assert volumes(project) == kept
    stack("up", "-d", "--no-build", "--no-deps", "worker", "writer", "serve")
    dk.wait_healthy([c for s in ("worker", "writer", "serve") for c in stack.containers(s)], 90, stack)
    assert stats(serve)["documents"] == total
    assert search(serve, "zqmark1000")["results"][0]["path"].endswith(note(1000)[0])
    again = index_json(stack)
    assert (again["unchanged"], again["added"], again["updated"]) == (total, 0, 0), again
    timings.phase("down, up, same store", began)
