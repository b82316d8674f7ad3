"""Shared fixtures: a docs tree, settings pointing at a temporary store, and running the CLI."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from config.loader import settings_from_mapping
from config.settings import Settings


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary working directory (paths are stored as walked, relative to it)."""
    monkeypatch.chdir(tmp_path)
    for name in ("KNOWLEDGE_CONFIG", "KNOWLEDGE_STORE_DIR", "KNOWLEDGE_BROKER_URL", "KNOWLEDGE_NAME"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def write_tree(base: Path, files: Mapping[str, str | bytes]) -> None:
    """Create files (text or bytes) under base."""
    for rel, content in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


@pytest.fixture
def make_settings(workdir: Path) -> Callable[..., Settings]:
    """Build Settings from a `knowledge:` block with the store under the working directory."""

    def build(**block: Any) -> Settings:
        return settings_from_mapping(block, store_base=workdir)

    return build


@pytest.fixture
def run_cli(workdir: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run `knowledge ARGS...` in-process; return (exit code, stdout, stderr)."""
    from cli import main

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def env_clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No KNOWLEDGE_* variables leak in from the developer's shell."""
    for key in list(os.environ):
        if key.startswith("KNOWLEDGE_"):
            monkeypatch.delenv(key)
    yield


def damage_store(db_path: Path, *statements: str) -> None:
    """Run raw SQL on a store behind the writer's back (the faults a test injects)."""
    from pipeline import db

    conn = db.open_writer(db_path)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


@pytest.fixture(scope="session")
def big_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated tree of a few thousand markdown files, shared by the session (only Redis tests use it:
    tests/workers/test_distributed.py and the fault suite's distributed faults)."""
    import time

    from bench.lib.corpus import generate
    from tests.workers.cluster import CORPUS_FILES
    from tests.workers.conftest import require_redis

    require_redis()  # skip (or fail under CI) before spending seconds on the corpus and the reference store
    root = tmp_path_factory.mktemp("corpus") / "docs"
    generate(root, CORPUS_FILES, seed=11)
    past = time.time() - 60  # out of the racy window, so a re-run needs no reads
    for path in root.rglob("*.md"):
        time_ns = int(past * 1e9)
        os.utime(path, ns=(time_ns, time_ns))
    return root


@pytest.fixture(scope="session")
def big_corpus_store(big_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store the in-process default builds from big_corpus (the reference a distributed run must equal)."""
    import json
    import subprocess

    from tests.workers.cluster import CORPUS_FILES, clean_env, knowledge_bin

    base = tmp_path_factory.mktemp("embedded")
    result = subprocess.run([*knowledge_bin(), "index", str(big_corpus), "--json"], cwd=base,
                            env=clean_env(KNOWLEDGE_STORE_DIR=str(base)), capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["added"] == CORPUS_FILES
    return base


def bounded_knowledge(cwd: Path, *args: str, memory: int = 1 << 30, timeout: float = 60
                      ) -> subprocess.CompletedProcess[str]:
    """`knowledge ARGS` as a process in cwd, limited to `memory` bytes of address space and `timeout` s.

    For hostile inputs: a fix that fails shows as an error of its own, not as a test process of 20 GB.
    """
    script = Path(sys.executable).with_name("knowledge")
    command = [str(script)] if script.exists() else [sys.executable, "-c", "from cli import main; main()"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KNOWLEDGE_", "OTEL_"))}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run([*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limit)


def stop_process(proc: subprocess.Popen[Any], grace: float = 10) -> None:
    """Terminate a process the test started and reap it: SIGTERM, then SIGKILL after grace seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def wait_answering(url: str, proc: subprocess.Popen[Any], what: str, seconds: float,
                   log: Callable[[], str]) -> None:
    """Poll url until it answers 200 (bounded by seconds); fail naming `what`, or with log() once proc exits."""
    import time

    import httpx

    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert proc.poll() is None, log()
        assert time.monotonic() < deadline, f"{what} did not come up"
        time.sleep(0.1)
