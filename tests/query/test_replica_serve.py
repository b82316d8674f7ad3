"""A `knowledge serve --snapshots` process on a shared directory, searched without pause through publishes."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import yaml

from pipeline import publish as pub
from tests.conftest import write_tree
from tests.query.serving import serving
from tests.query.stores import free_port

KNOWLEDGE = str(Path(sys.executable).with_name("knowledge"))
PUBLISHES = 3
FOUND_WITHIN_S = 8.0
CLIENT_CAP = 5000  # requests: the client stops there even if the test does not stop it

RunCli = Callable[..., tuple[int, str, str]]


def _client(base: str, stop: threading.Event, seen: list[tuple[int, int | None]]) -> None:
    """Search back to back (no pause) until stop, recording each answer's HTTP status and generation."""
    with httpx.Client(timeout=10) as client:
        while not stop.is_set() and len(seen) < CLIENT_CAP:
            reply = client.get(f"{base}/v1/search", params={"q": "procedure"})
            seen.append((reply.status_code, reply.json().get("generation")))


def _found(base: str, word: str) -> int | None:
    """The generation that answered a search for word with a result, else None."""
    data = httpx.get(f"{base}/v1/search", params={"q": word}, timeout=10).json()
    return data["generation"] if data.get("results") else None


def test_a_replica_swaps_generations_under_load_and_refuses_a_tampered_one(workdir: Path, run_cli: RunCli) -> None:
    snaps = workdir / "snaps"
    config = workdir / "knowledge.yaml"
    config.write_text(yaml.safe_dump({"knowledge": {
        "expose": {"mcp": {"builtins": ["knowledge_search"]}},
        "publish": {"directory": "snaps", "poll_interval": 0.2}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KNOWLEDGE_", "OTEL_"))}
    with serving(KNOWLEDGE, config, free_port(), workdir, env, ("--snapshots", str(snaps))) as base:
        empty = httpx.get(f"{base}/v1/search", params={"q": "procedure"}, timeout=10)
        assert empty.json()["status"] == "index_not_built" and empty.json()["generation"] is None
        stop, seen = threading.Event(), list[tuple[int, int | None]]()
        write_tree(workdir, {"docs/base.md": "# Base\n\nThe base procedure.\n"})
        assert run_cli("index", "docs", "--publish")[0] == 0
        deadline = time.monotonic() + FOUND_WITHIN_S
        while _found(base, "base") is None:
            assert time.monotonic() < deadline, "the first generation was not picked up"
            time.sleep(0.1)
        client = threading.Thread(target=_client, args=(base, stop, seen), daemon=True)
        client.start()
        try:
            for round_ in range(PUBLISHES):
                word = f"novelword{round_}"
                write_tree(workdir, {f"docs/{word}.md": f"# {word}\n\nThe {word} procedure.\n"})
                code, out, err = run_cli("index", "docs", "--publish")
                assert code == 0, out + err
                published = time.monotonic()
                while (generation := _found(base, word)) is None:
                    assert time.monotonic() - published < FOUND_WITHIN_S, f"{word} not found on the replica"
                    time.sleep(0.05)
                assert generation == round_ + 2
            # a tampered generation 5: a copy of 4 with one byte changed and 4's checksum in its manifest
            good = pub.read_manifest(snaps, 4)
            shutil.copytree(pub.generation_dir(snaps, 4), pub.generation_dir(snaps, 5))
            target = pub.generation_dir(snaps, 5) / pub.DB_NAME
            target.chmod(0o644)
            data = bytearray(target.read_bytes())
            data[len(data) // 2] ^= 0xFF
            target.write_bytes(bytes(data))
            pub.manifest_path(snaps, 5).write_text(json.dumps({**good.to_json(), "generation": 5}))
            time.sleep(1.0)  # several polls
            health = httpx.get(f"{base}/healthz", timeout=10).json()
            assert health["generation"] == 4 and health["documents"] == 4 and health["age_s"] >= 0
        finally:
            stop.set()
            client.join(timeout=20)
        assert "refused generation 5" in (workdir / "serve.err").read_text()
    print(f"{len(seen)} searches during the publishes")
    assert len(seen) > PUBLISHES
    assert {status for status, _ in seen} == {200}
    generations = [generation or 0 for _, generation in seen]
    assert generations == sorted(generations) and generations[-1] == 4 and generations[0] in (1, 2)
