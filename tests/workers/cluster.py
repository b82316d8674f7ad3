"""Drive the distributed shape from tests: real `knowledge` processes started by scripts/run-local.sh."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from bench.lib.corpus import sample_queries
from config.loader import settings_from_mapping
from config.settings import Settings
from pipeline import db
from query.lexical import search_ids
from query.terms import build_query
from tests.faults.invariants import Invariants, completed, integrity_problems
from tests.lent import search
from tests.workers.conftest import REDIS_URL, delete_namespace, require_redis
from workers.broker import namespace
from workers.ledger.redis_ledger import RedisLedger

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"
CORPUS_FILES = 3000  # the big_corpus fixture's size (tests/conftest.py)
QUERIES = sample_queries(8, seed=5)


def knowledge_bin() -> list[str]:
    """The `knowledge` console script next to this interpreter, or the module form."""
    script = Path(sys.executable).with_name("knowledge")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from cli import main; main()"]


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without KNOWLEDGE_*/OTEL_* variables, plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KNOWLEDGE_", "OTEL_"))}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


@dataclass
class Cluster:
    """A store directory, a broker URL and the processes serving them."""

    base: Path
    broker_url: str
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self.run_dir = self.base / "run"
        self.env = clean_env(KNOWLEDGE_BROKER_URL=self.broker_url, KNOWLEDGE_STORE_DIR=str(self.base),
                             KNOWLEDGE_RUN_DIR=str(self.run_dir), **self.extra_env)
        if len(knowledge_bin()) == 1:
            self.env["KNOWLEDGE_BIN"] = knowledge_bin()[0]
        self.extra_procs: list[subprocess.Popen[bytes]] = []

    @property
    def settings(self) -> Settings:
        """Settings equal to what the processes load."""
        return settings_from_mapping({"broker": {"url": self.broker_url}}, store_base=self.base)

    @property
    def namespace(self) -> str:
        """The store's Redis namespace."""
        return namespace(self.settings)

    def client(self) -> redis.Redis:
        """A Redis client on the broker URL."""
        return redis.Redis.from_url(self.broker_url, socket_connect_timeout=2, socket_timeout=10)

    def ledger(self) -> RedisLedger:
        """The store's run ledger."""
        return RedisLedger(self.client(), self.namespace)

    def knowledge(
        self, *args: str, timeout: float = 120, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run `knowledge ARGS` to completion (bounded by timeout)."""
        return subprocess.run([*knowledge_bin(), *args], cwd=self.base, env=env or self.env, capture_output=True,
                              text=True, timeout=timeout)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """Start `knowledge ARGS` in the background with captured output."""
        proc = subprocess.Popen([*knowledge_bin(), *args], cwd=self.base, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self.extra_procs.append(proc)  # type: ignore[arg-type]
        return proc

    def spawn_writer(self) -> subprocess.Popen[bytes]:
        """Start another `knowledge writer` (logging to run/writer-N.log), recorded for stop-local.sh."""
        n = len(list(self.run_dir.glob("writer*.log"))) + 1
        with open(self.run_dir / f"writer-{n}.log", "wb") as log:
            proc = subprocess.Popen([*knowledge_bin(), "writer"], cwd=self.base, env=self.env, stdout=log,
                                    stderr=subprocess.STDOUT)
        (self.run_dir / "writer.pid").write_text(str(proc.pid))
        self.extra_procs.append(proc)
        return proc

    def start(self, workers: int = 2, threads: int = 2) -> None:
        """scripts/run-local.sh: the writer, then `workers` worker processes (no query server)."""
        result = subprocess.run([str(SCRIPTS / "run-local.sh"), "--no-serve", "--workers", str(workers),
                                 "--threads", str(threads)], cwd=self.base, env=self.env, capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0, result.stderr + self.logs()

    def stop(self) -> None:
        """scripts/stop-local.sh, then any process this object started itself."""
        subprocess.run([str(SCRIPTS / "stop-local.sh")], cwd=self.base, env=self.env, capture_output=True,
                       timeout=120)
        for proc in self.extra_procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=40)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)

    def pid(self, name: str) -> int:
        """The pid run-local.sh recorded for name (writer, worker)."""
        return int((self.run_dir / f"{name}.pid").read_text())

    def worker_children(self) -> list[int]:
        """The single-process workers under the worker supervisor."""
        return children_of(self.pid("worker"))

    def broker_ids(self, name: str) -> dict[int, str]:
        """The broker id each process of run-local's `name` log reported at start, by pid."""
        found = {}
        for line in (self.run_dir / f"{name}.log").read_text().splitlines():
            if line.startswith("{") and '"broker_id"' in line:
                record = json.loads(line)
                found[int(record["pid"])] = record["broker_id"]
        return found

    def logs(self) -> str:
        """The tail of every process log, for assertion messages."""
        parts = []
        for log in sorted(self.run_dir.glob("*.log")) if self.run_dir.exists() else []:
            parts.append(f"\n--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
        return "".join(parts)

    def workers_ready(self, pids: list[int], timeout: float = 30) -> dict[int, str]:
        """The broker ids of the worker processes pids, once every one of them has reported its own."""

        def ready() -> dict[int, str] | None:
            ids = self.broker_ids("worker")
            return {pid: ids[pid] for pid in pids} if set(pids) <= set(ids) else None

        return self.wait_for(ready, timeout, "every worker ready")

    def kill_worker_holding(self, queue: str, broker_ids: dict[int, str], timeout: float) -> int:
        """SIGKILL a worker caught holding unacknowledged messages of queue; return its pid."""
        client = self.client()

        def holding() -> int | None:
            for pid, broker_id in broker_ids.items():
                if client.scard(f"{self.namespace}:__acks__.{broker_id}.{queue}"):
                    return pid
            return None

        try:
            victim = self.wait_for(holding, timeout, f"a worker holding {queue} messages", poll=0.005)
        finally:
            client.close()
        os.kill(victim, signal.SIGKILL)
        return victim

    def wait_for(self, predicate: Any, timeout: float, what: str, poll: float = 0.02) -> Any:
        """Poll predicate until it returns something truthy; AssertionError after timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(poll)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}{self.logs()}")


@contextmanager
def owned(base: Path, prepare: Callable[[Cluster], None] | None = None) -> Iterator[Cluster]:
    """A Cluster over a store of the test's own (prepare writes its config and tree); its processes
    stopped and its Redis keys deleted after, and before, so a crashed earlier run leaves nothing."""
    client = require_redis()
    made = Cluster(base, REDIS_URL)
    if prepare is not None:
        prepare(made)
    delete_namespace(client, made.namespace)
    try:
        yield made
    finally:
        made.stop()
        delete_namespace(client, made.namespace)
        client.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A store of this test's own, served by processes the test starts; stopped and its keys deleted after."""
    with owned(tmp_path / "store") as made:
        yield made


def invariants(cluster: Cluster, *roots: Path) -> Invariants:
    """The fault suite's checker on a cluster's store: re-runs go through its processes, which are stopped
    (releasing the writer's lock) before the final `knowledge check`."""
    return Invariants(completed(cluster.knowledge), cluster.base, cluster.settings.db_path, roots,
                      quiesce=cluster.stop)


def children_of(pid: int) -> list[int]:
    """Pids whose parent is pid (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return sorted(found)


def store_rows(db_path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every document (without index times) and chunk, keyed by path, in a stable order."""
    conn = db.connect_readonly(db_path)
    try:
        docs = conn.execute(
            "SELECT path, root, source, title, sha256, size, mtime_ns, chunk_count FROM documents ORDER BY path"
        ).fetchall()
        chunks = conn.execute(
            "SELECT d.path, c.ordinal, c.heading_path, c.body, c.text_hash, c.cjk FROM chunks c"
            " JOIN documents d ON d.id = c.document_id ORDER BY d.path, c.ordinal"
        ).fetchall()
        return [tuple(r) for r in docs], [tuple(r) for r in chunks]
    finally:
        conn.close()


def search_rankings(base: Path) -> list[list[tuple[float, str]]]:
    """Each query's ranking as (score, ref), ties ordered by ref: chunk ids (the tie-break) differ by
    insertion order, so equal scores may come back in either order; the boundary tie group is dropped."""
    settings = settings_from_mapping({}, store_base=base)
    for q in QUERIES[:2]:
        assert search(settings, q, 10).hits, q  # the whole query path answers
    conn = db.connect_readonly(settings.db_path)
    try:
        rankings = []
        for q in QUERIES:
            scored = search_ids(conn, build_query(q), 50)
            refs = dict(conn.execute(
                f"SELECT c.id, d.path || '#' || c.ordinal FROM chunks c JOIN documents d ON d.id = c.document_id"
                f" WHERE c.id IN ({','.join(str(i) for i, _ in scored) or 'NULL'})").fetchall())
            floor = round(scored[-1][1], 9) if len(scored) == 50 else None
            ranked = sorted((round(score, 9), refs[i]) for i, score in scored)
            rankings.append([r for r in ranked if floor is None or r[0] != floor])
        return rankings
    finally:
        conn.close()


def assert_same_store(base: Path, reference: Path) -> None:
    """The store under base holds exactly the reference's documents, chunks and rankings, and is healthy."""
    settings = settings_from_mapping({}, store_base=base)
    ref_settings = settings_from_mapping({}, store_base=reference)
    docs, chunks = store_rows(settings.db_path)
    ref_docs, ref_chunks = store_rows(ref_settings.db_path)
    assert len(docs) == len(ref_docs) == CORPUS_FILES
    assert docs == ref_docs
    assert chunks == ref_chunks
    assert integrity_problems(settings.db_path) == []
    assert search_rankings(base) == search_rankings(reference)
