"""Issue 22's done-test: a primary and two replica `serve` processes, one on the shared published directory and
one pulling over HTTP (through a proxy that cuts its first download), searched without pause through publishes."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
import yaml

from pipeline import publish as pub
from tests.conftest import write_tree
from tests.cutting_proxy import Faults, cutting_proxy
from tests.query.serving import serving
from tests.query.stores import free_port

pytestmark = pytest.mark.slow

KNOWLEDGE = str(Path(sys.executable).with_name("knowledge"))
TOKEN_ENV = "KNOWLEDGE_DONE_TEST_TOKEN"
TOKEN = "replicas-done-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PUBLISHES = 5
FOUND_WITHIN_S = 10.0
CLIENT_CAP = 20_000  # requests per client: it stops there even if the test does not stop it

RunCli = Callable[..., tuple[int, str, str]]
Seen = list[tuple[int, int | None]]


def _client(base: str, stop: threading.Event, seen: Seen) -> None:
    """Search back to back (no pause) until stop, recording each answer's HTTP status and generation."""
    with httpx.Client(timeout=10, headers=AUTH) as client:
        while not stop.is_set() and len(seen) < CLIENT_CAP:
            reply = client.get(f"{base}/v1/search", params={"q": "procedure"})
            seen.append((reply.status_code, reply.json().get("generation")))


def _found(base: str, word: str) -> int | None:
    """The generation that answered a search for word with a result, else None."""
    data = httpx.get(f"{base}/v1/search", params={"q": word}, headers=AUTH, timeout=10).json()
    return data["generation"] if data.get("results") else None


def _wait_found(bases: dict[str, str], word: str) -> dict[str, int]:
    """The generation each replica first finds word in (bounded: FOUND_WITHIN_S from now)."""
    started, found = time.monotonic(), dict[str, int]()
    while len(found) < len(bases):
        for name, base in bases.items():
            if name not in found and (generation := _found(base, word)) is not None:
                found[name] = generation
        assert time.monotonic() - started < FOUND_WITHIN_S, f"{word} not found on {set(bases) - set(found)}"
        time.sleep(0.05)
    return found


def _wait_said(log: Path, text: str) -> None:
    deadline = time.monotonic() + FOUND_WITHIN_S
    while text not in log.read_text():
        assert time.monotonic() < deadline, f"{log.name} never said {text!r}"
        time.sleep(0.1)


def _metric(base: str, name: str, **labels: str) -> float:
    """The value of one series on base's /metrics (0 when absent)."""
    body = httpx.get(f"{base}/metrics", headers=AUTH, timeout=10).text
    for line in body.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _tamper(snaps: Path, source: int, target: int) -> None:
    """A generation `target` that is a copy of `source` with one byte changed and source's checksum."""
    good = pub.read_manifest(snaps, source)
    shutil.copytree(pub.generation_dir(snaps, source), pub.generation_dir(snaps, target))
    path = pub.generation_dir(snaps, target) / pub.DB_NAME
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    pub.manifest_path(snaps, target).write_text(json.dumps({**good.to_json(), "generation": target}))


def _publish(workdir: Path, run_cli: RunCli, word: str) -> None:
    write_tree(workdir, {f"docs/{word}.md": f"# {word}\n\nThe {word} procedure.\n"})
    code, out, err = run_cli("index", "docs", "--publish")
    assert code == 0 and "published: generation" in out + err, out + err


@pytest.fixture
def cluster(workdir: Path) -> Iterator[tuple[str, dict[str, str], Faults]]:
    """(primary URL, {replica: URL}, the faults of the proxy between the pulling replica and the primary)."""
    config = workdir / "knowledge.yaml"
    config.write_text(yaml.safe_dump({"knowledge": {
        "expose": {"mcp": {"builtins": ["knowledge_search"], "token_env": TOKEN_ENV}},
        "publish": {"directory": "snaps", "poll_interval": 0.2, "keep": 3}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KNOWLEDGE_", "OTEL_"))} | {TOKEN_ENV: TOKEN}
    faults = Faults(cut_after=40_000, cuts=1)  # the first download drops after 40 kB
    with ExitStack() as stack:
        primary_port = free_port()
        primary = stack.enter_context(serving(KNOWLEDGE, config, primary_port, workdir, env, log_name="primary.err"))
        proxy = stack.enter_context(cutting_proxy(primary_port, faults))
        shared = stack.enter_context(serving(KNOWLEDGE, config, free_port(), workdir, env,
                                             ("--snapshots", "snaps"), log_name="shared.err"))
        pulled = stack.enter_context(serving(KNOWLEDGE, config, free_port(), workdir, env,
                                             ("--snapshots", "other", "--pull-from", proxy), log_name="pulled.err"))
        yield primary, {"shared": shared, "pulled": pulled}, faults


def test_two_replicas_follow_five_publishes_under_load_and_refuse_a_tampered_generation(
        workdir: Path, run_cli: RunCli, cluster: tuple[str, dict[str, str], Faults]) -> None:
    primary, replicas, faults = cluster
    for base in replicas.values():
        empty = httpx.get(f"{base}/v1/search", params={"q": "procedure"}, headers=AUTH, timeout=10).json()
        assert empty["status"] == "index_not_built" and empty["generation"] is None
    _publish(workdir, run_cli, "base")
    assert _wait_found(replicas, "base") == {"shared": 1, "pulled": 1}
    assert [s.get("range") for s in faults.seen if s["path"].endswith(pub.DB_NAME)][:2] == [None, "bytes=40000-"]
    stop = threading.Event()
    seen: dict[str, Seen] = {name: [] for name in replicas}
    clients = [threading.Thread(target=_client, args=(base, stop, seen[name]), daemon=True)
               for name, base in replicas.items()]
    for client in clients:
        client.start()
    try:
        for round_ in range(PUBLISHES):
            _publish(workdir, run_cli, f"novelword{round_}")
            assert _wait_found(replicas, f"novelword{round_}") == {name: round_ + 2 for name in replicas}
        _tamper(workdir / "snaps", PUBLISHES + 1, PUBLISHES + 2)  # generation 7: a damaged copy of 6
        _wait_said(workdir / "shared.err", f"refused generation {PUBLISHES + 2}")
        _wait_said(workdir / "pulled.err", f"generation {PUBLISHES + 2} from")
        for base in replicas.values():
            health = httpx.get(f"{base}/healthz", timeout=10).json()
            assert health["generation"] == PUBLISHES + 1 and health["documents"] == PUBLISHES + 1
            assert _found(base, "novelword4") == PUBLISHES + 1
        _publish(workdir, run_cli, "afterwards")  # generation 8: taken as usual after the refusal
        assert _wait_found(replicas, "afterwards") == {name: PUBLISHES + 3 for name in replicas}
    finally:
        stop.set()
        for client in clients:
            client.join(timeout=30)
    assert not (workdir / "other" / "g000007").exists() and not (workdir / "other" / "g000007.json").exists()
    assert _metric(replicas["shared"], "knowledge_snapshot_refused_total", knowledge_stage="verify") == 1
    assert _metric(replicas["pulled"], "knowledge_snapshot_refused_total", knowledge_stage="pull") == 1
    assert _metric(replicas["pulled"], "knowledge_snapshot_pulls_total", knowledge_outcome="pulled") == PUBLISHES + 2
    for name, base in replicas.items():
        assert _metric(base, "knowledge_snapshot_generation") == PUBLISHES + 3
        assert 0 <= _metric(base, "knowledge_snapshot_age_seconds") < 600
        answers = seen[name]
        print(f"{name}: {len(answers)} searches during the publishes")
        assert len(answers) > PUBLISHES, name
        assert {status for status, _ in answers} == {200}, name
        generations = [generation or 0 for _, generation in answers]
        assert generations == sorted(generations), f"{name} went back a generation"
        assert generations[-1] == PUBLISHES + 3 and generations[0] in (1, 2), name
    assert re.search(r"pulled generation 1 from http://127\.0\.0\.1:\d+ into other",
                     (workdir / "pulled.err").read_text())
    assert TOKEN not in (workdir / "pulled.err").read_text()
    assert httpx.get(f"{primary}/healthz", timeout=10).json()["status"] == "ok"
