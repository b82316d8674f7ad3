"""The fault suite's fixtures: a project directory where `knowledge` runs as a real process."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline import db
from tests.embedserver import EmbedServer
from tests.faults.invariants import Invariants
from tests.workers.cluster import clean_env, knowledge_bin
from tests.workers.conftest import server  # noqa: F401 - the loopback embeddings server, requested by name

STORE = Path("knowledge/default/knowledge.db")


@dataclass
class Project:
    """A working directory holding the tree (docs/) and the store, with `knowledge` run in it as a process."""

    cwd: Path

    def __post_init__(self) -> None:
        self.env = clean_env()
        self.procs: list[subprocess.Popen[str]] = []

    @property
    def db_path(self) -> Path:
        """The store's file."""
        return self.cwd / STORE

    def knowledge(self, *args: str, timeout: float = 120) -> tuple[int, str, str]:
        """Run `knowledge ARGS` to completion (bounded); (exit code, stdout, stderr)."""
        result = subprocess.run([*knowledge_bin(), *args], cwd=self.cwd, env=self.env, capture_output=True,
                                text=True, timeout=timeout)
        return result.returncode, result.stdout, result.stderr

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """Start `knowledge ARGS` in the background with captured output (killed after the test)."""
        proc = subprocess.Popen([*knowledge_bin(), *args], cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc

    def documents(self) -> int:
        """Documents committed so far (0 before the store exists)."""
        try:
            conn = db.connect_readonly(self.db_path)
        except Exception:  # noqa: BLE001 - not created yet, or mid-creation
            return 0
        try:
            return int(conn.execute("SELECT count(*) FROM documents").fetchone()[0])
        except db.DatabaseError:
            return 0
        finally:
            conn.close()

    def wait_for(self, predicate: Callable[[], object], timeout: float, what: str, poll: float = 0.02) -> None:
        """Poll predicate until it is truthy; AssertionError after timeout."""
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
            time.sleep(poll)

    def invariants(self, *roots: str) -> Invariants:
        """The shared checker on this project's store (roots default to docs)."""
        return Invariants(self.knowledge, self.cwd, self.db_path, roots or ("docs",))

    def close(self) -> None:
        """Kill what is still running."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)


@pytest.fixture
def project(workdir: Path) -> Iterator[Project]:
    """A Project in the test's working directory (lexical: no embeddings configured)."""
    made = Project(workdir)
    yield made
    made.close()


@pytest.fixture
def vector_project(project: Project, server: EmbedServer) -> Project:
    """The Project with embeddings on the loopback server: a store with vector tables."""
    (project.cwd / "knowledge.yaml").write_text(
        f"knowledge:\n  embeddings:\n    base_url: {server.base_url}\n    model: hashed-bow\n    timeout: 5\n",
        encoding="utf-8")
    return project
