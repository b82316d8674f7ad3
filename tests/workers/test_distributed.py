"""The distributed shape on the real Redis: `knowledge worker` (2 processes) and one `knowledge writer`.

Every test starts real processes with scripts/run-local.sh against a store of its own (so a Redis
namespace of its own) on db 13, and bounds every wait.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bench.corpus import generate, sample_queries
from config.loader import settings_from_mapping
from pipeline import db
from query.lexical import search_ids
from query.search import search
from query.terms import build_query
from tests.workers.cluster import (
    Cluster,
    clean_env,
    integrity_problems,
    knowledge_bin,
    store_rows,
)
from tests.workers.conftest import REDIS_URL, delete_namespace, require_redis

pytestmark = [pytest.mark.redis, pytest.mark.slow]

CORPUS_FILES = 3000
QUERIES = sample_queries(8, seed=5)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated tree of a few thousand markdown files, shared by the module (only Redis tests use it)."""
    require_redis()  # skip (or fail under CI) before spending seconds on the corpus and the reference store
    root = tmp_path_factory.mktemp("corpus") / "docs"
    generate(root, CORPUS_FILES, seed=11)
    past = time.time() - 60  # out of the racy window, so a re-run needs no reads
    for path in root.rglob("*.md"):
        time_ns = int(past * 1e9)
        os.utime(path, ns=(time_ns, time_ns))
    return root


@pytest.fixture(scope="module")
def embedded_store(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store the embedded default builds from the corpus (the reference)."""
    base = tmp_path_factory.mktemp("embedded")
    result = subprocess.run([*knowledge_bin(), "index", str(corpus), "--json"], cwd=base,
                            env=clean_env(KNOWLEDGE_STORE_DIR=str(base)), capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["added"] == CORPUS_FILES
    return base


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A store of this test's own, served by processes the test starts; stopped and its keys deleted after."""
    client = require_redis()
    made = Cluster(tmp_path / "store", REDIS_URL)
    delete_namespace(client, made.namespace)
    yield made
    made.stop()
    delete_namespace(client, made.namespace)
    client.close()


def _search_results(base: Path) -> list[list[tuple[float, str]]]:
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


def _assert_same_store(base: Path, reference: Path) -> None:
    settings = settings_from_mapping({}, store_base=base)
    ref_settings = settings_from_mapping({}, store_base=reference)
    docs, chunks = store_rows(settings.db_path)
    ref_docs, ref_chunks = store_rows(ref_settings.db_path)
    assert len(docs) == len(ref_docs) == CORPUS_FILES
    assert docs == ref_docs
    assert chunks == ref_chunks
    assert integrity_problems(settings.db_path) == []
    assert _search_results(base) == _search_results(reference)


def test_a_distributed_run_builds_exactly_the_embedded_store(
    cluster: Cluster, corpus: Path, embedded_store: Path
) -> None:
    cluster.start(workers=2, threads=2)
    result = cluster.knowledge("index", str(corpus), "--json", timeout=150)
    assert result.returncode == 0, result.stderr + cluster.logs()
    summary = json.loads(result.stdout)
    assert (summary["added"], summary["failed"], summary["files"]) == (CORPUS_FILES, 0, CORPUS_FILES)
    _assert_same_store(cluster.base, embedded_store)

    again = cluster.knowledge("index", str(corpus), "--json", timeout=60)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["unchanged"] == CORPUS_FILES

    runs = cluster.knowledge("runs", "--json", timeout=30)
    listed = json.loads(runs.stdout)
    assert [r["state"] for r in listed] == ["complete", "complete"]
    assert listed[1]["added"] == CORPUS_FILES and not any(r["holds_lock"] for r in listed)


def test_sigkilled_worker_and_writer_lose_nothing(cluster: Cluster, corpus: Path, embedded_store: Path) -> None:
    cluster.start(workers=2, threads=2)
    ledger = cluster.ledger()
    before = cluster.worker_children()
    assert len(before) == 2, before
    # A worker dies with messages in hand (fetched, not yet acknowledged): SIGKILL it then.
    broker_ids = cluster.workers_ready(before)
    index = cluster.popen("index", str(corpus), "--json")
    victim = cluster.kill_worker_holding("ingest", broker_ids, 30)

    # The writer dies mid-run too (possibly mid-transaction); a new one takes over the store.
    run_id = cluster.wait_for(lambda: (ledger.recent(1) or [None])[0], 10, "the run").run_id
    cluster.wait_for(lambda: ledger.summary(run_id).counts["added"] >= 300, 60, "300 documents written")
    os.kill(cluster.pid("writer"), signal.SIGKILL)
    time.sleep(0.5)
    replacement = cluster.spawn_writer()
    written = ledger.summary(run_id).accounted
    cluster.wait_for(lambda: replacement.poll() is not None or ledger.summary(run_id).accounted > written, 60,
                     "the new writer to apply")
    assert replacement.poll() is None, cluster.logs()

    out, err = index.communicate(timeout=120)
    assert index.returncode == 0, err + cluster.logs()
    summary = json.loads(out)
    assert summary["failed"] == 0 and summary["files"] == CORPUS_FILES
    assert summary["added"] + summary["updated"] == CORPUS_FILES
    after = cluster.worker_children()
    assert victim not in after and len(after) == 2, "the supervisor replaced the killed worker"
    _assert_same_store(cluster.base, embedded_store)


def test_a_second_writer_is_refused_with_75(cluster: Cluster) -> None:
    cluster.start(workers=1, threads=1)
    result = cluster.knowledge("writer", timeout=30)
    assert result.returncode == 75
    assert "another writer holds the store lock" in result.stderr and "knowledge writer pid=" in result.stderr


def test_an_overlapping_index_is_refused_with_75_naming_the_run(cluster: Cluster, tmp_path: Path) -> None:
    corpus = tmp_path / "docs"
    generate(corpus, 200, seed=6)
    first = cluster.knowledge("index", str(corpus), "--detach", "--json", timeout=60)
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout)["run_id"]
    assert "no `knowledge worker` and no `knowledge writer` is running for this store" in first.stderr
    second = cluster.knowledge("index", str(corpus), timeout=60)
    assert second.returncode == 75
    assert f"run {run_id} is in progress" in second.stderr and "Traceback" not in second.stderr
    runs = json.loads(cluster.knowledge("runs", "--json", timeout=30).stdout)
    assert runs[0]["run_id"] == run_id and runs[0]["state"] == "running" and runs[0]["holds_lock"]

    cluster.start(workers=2, threads=2)  # workers arrive later: the detached run completes and frees the store
    cluster.wait_for(lambda: cluster.ledger().summary(run_id).state == "complete", 120, "the detached run",
                     poll=0.2)
    listing = cluster.knowledge("runs", timeout=30).stdout
    assert listing.startswith("processes: 2 worker, 1 writer"), listing
    third = cluster.knowledge("index", str(corpus), "--json", timeout=60)
    assert third.returncode == 0 and json.loads(third.stdout)["files"] == 200


def test_a_dead_redis_at_start_is_one_line_naming_the_url(tmp_path: Path) -> None:
    generate(tmp_path / "docs", 3, seed=2)
    dead = Cluster(tmp_path / "store", "redis://127.0.0.1:1/0")
    for args in (("index", str(tmp_path / "docs")), ("worker",), ("writer",), ("runs",)):
        result = dead.knowledge(*args, timeout=30)
        assert result.returncode == 1, (args, result.stderr)
        assert "cannot reach the broker at redis://127.0.0.1:1/0" in result.stderr
        assert "Traceback" not in result.stderr


def test_one_run_is_one_trace_across_processes(tmp_path: Path) -> None:
    require_redis()
    docs = tmp_path / "docs"
    generate(docs, 80, seed=3)
    spans_file = tmp_path / "spans.jsonl"
    made = Cluster(tmp_path / "store", REDIS_URL, extra_env={"KNOWLEDGE_TRACE_FILE": str(spans_file)})
    try:
        made.start(workers=2, threads=2)
        result = made.knowledge("index", str(docs), "--json", timeout=60)
        assert result.returncode == 0, result.stderr + made.logs()
    finally:
        made.stop()
        client = made.client()
        delete_namespace(client, made.namespace)
        client.close()
    spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    by_id = {s["span_id"]: s for s in spans}
    roots = [s for s in spans if s["name"] == "index run"]
    assert len(roots) == 1 and roots[0]["parent_id"] is None and roots[0]["service"] == "knowledge-cli"
    root = roots[0]
    trace_spans = [s for s in spans if s["trace_id"] == root["trace_id"]]
    ingests = [s for s in trace_spans if s["name"] == "ingest"]
    writes = [s for s in trace_spans if s["name"] == "write"]
    assert len(ingests) == 3 and len(writes) == 3  # 80 files in batches of 32
    assert {s["service"] for s in ingests} == {"knowledge-worker"}
    assert {s["service"] for s in writes} == {"knowledge-writer"}
    assert root["pid"] not in {s["pid"] for s in ingests + writes}

    def ancestors(span: dict) -> list[str]:
        chain, cursor = [], span
        while cursor["parent_id"] is not None and len(chain) < 10:
            cursor = by_id[cursor["parent_id"]]
            chain.append(cursor["name"])
        return chain

    for write in writes:
        parent = by_id[write["parent_id"]]
        assert parent["name"] == "ingest" and parent["service"] == "knowledge-worker"
        assert ancestors(write) == ["ingest", "walk", "index run"]
    assert all(by_id[s["parent_id"]]["name"] == "walk" for s in ingests)
    assert {s["name"] for s in trace_spans} >= {"index run", "walk", "ingest", "write", "finalize", "prune"}
    prune = next(s for s in trace_spans if s["name"] == "prune")
    assert prune["service"] == "knowledge-writer" and by_id[prune["parent_id"]]["name"] in ("write", "finalize")


class PrivateRedis:
    """A redis-server of one test's own on a free port, to kill and restart empty."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server (no persistence) and wait until it answers (bounded)."""
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + 10
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.RedisError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL the server: every client loses its connection, every key is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    """A PrivateRedis, started; killed after the test."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("redis-server is not installed (CI=true: the Redis-loss test must run)")
        pytest.skip("redis-server is not installed")
    server = PrivateRedis(binary, tmp_path)
    server.start()
    yield server
    server.kill()


def test_redis_lost_mid_run_fails_clearly_and_a_rerun_converges(
    tmp_path: Path, corpus: Path, embedded_store: Path, private_redis: PrivateRedis
) -> None:
    made = Cluster(tmp_path / "store", private_redis.url)
    try:
        made.start(workers=2, threads=2)
        ledger = made.ledger()
        index = made.popen("index", str(corpus), "--json")
        run_id = made.wait_for(lambda: (ledger.recent(1) or [None])[0], 30, "the run").run_id
        made.wait_for(lambda: ledger.summary(run_id).accounted >= 500, 60, "500 files written", poll=0.05)
        private_redis.kill()
        _, err = index.communicate(timeout=60)
        assert index.returncode == 1, err
        assert f"lost the broker at {private_redis.url} during run {run_id}" in err
        assert "Re-run `knowledge index`" in err and "Traceback" not in err

        private_redis.start()  # empty: the ledger, the run lock and the queued messages are gone
        rerun = made.knowledge("index", str(corpus), "--json", timeout=150)
        assert rerun.returncode == 0, rerun.stderr + made.logs()
        summary = json.loads(rerun.stdout)
        assert summary["failed"] == 0 and summary["files"] == CORPUS_FILES
        assert summary["unchanged"] >= 500
        _assert_same_store(made.base, embedded_store)
    finally:
        made.stop()


def test_rm_goes_through_the_running_writer_and_reset_asks_to_stop_it(cluster: Cluster, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    generate(docs, 40, seed=4)
    cluster.start(workers=1, threads=1)
    assert cluster.knowledge("index", str(docs), timeout=60).returncode == 0
    docs_before, _ = store_rows(cluster.settings.db_path)
    victim = docs_before[0][0]

    result = cluster.knowledge("rm", victim, "docs/never-indexed.md", timeout=90)
    assert result.returncode == 1, result.stderr  # one of the two was not indexed
    assert f"removed: {victim}" in result.stdout and "not indexed: docs/never-indexed.md" in result.stdout
    docs_after, _ = store_rows(cluster.settings.db_path)
    assert [d[0] for d in docs_after] == [d[0] for d in docs_before[1:]]

    reset = cluster.knowledge("reset", "--force", timeout=30)
    assert reset.returncode == 75 and "stop the `knowledge writer`" in reset.stderr
    assert cluster.settings.db_path.is_file()


def test_hostile_files_cost_only_themselves_and_stale_ones_leave_the_store(cluster: Cluster, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a", "b", "c"):
        (docs / f"{name}.md").write_text(f"# {name}\n\nword{name} text\n", encoding="utf-8")
    with open(os.fsencode(docs) + b"/bad\xffname.md", "wb") as handle:
        handle.write(b"# bad\n")
    cluster.start(workers=1, threads=1)
    first = cluster.knowledge("index", str(docs), "--json", timeout=120)
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert (summary["added"], summary["failed"]) == (3, 0)
    assert {"path": f"{docs}/bad\\xffname.md", "reason": "file name is not valid UTF-8"} in summary["skipped"]

    (docs / "a.md").write_bytes(b"# a\n\nworda \x00 binary\n")  # read-time skip
    (docs / "b.md").write_text("wordb " * 100_000, encoding="utf-8")  # walk-time skip: too large
    second = cluster.knowledge("index", str(docs), "--json", timeout=120)
    assert second.returncode == 0, second.stderr
    summary = json.loads(second.stdout)
    reasons = {item["path"]: item["reason"] for item in summary["skipped"]}
    assert reasons[f"{docs}/a.md"] == "binary file (contains NUL bytes)"
    assert reasons[f"{docs}/b.md"].startswith("too large")
    documents, _ = store_rows(cluster.settings.db_path)
    assert [row[0] for row in documents] == [f"{docs}/c.md"], documents
    assert integrity_problems(cluster.settings.db_path) == []


@pytest.mark.redis
def test_a_followed_run_with_no_worker_or_writer_stops_after_the_grace_naming_them(tmp_path: Path) -> None:
    from config.errors import KnowledgeError
    from workers.broker import namespace
    from workers.distributed import run_distributed
    from workers.run import RunRequest

    client = require_redis()
    generate(tmp_path / "docs", 5, seed=3)
    settings = settings_from_mapping({"broker": {"url": REDIS_URL}}, store_base=tmp_path)
    notes: list[str] = []
    request = RunRequest(paths=(str(tmp_path / "docs"),))
    other = settings
    try:
        with pytest.raises(KnowledgeError) as caught:
            run_distributed(settings, request, request.targets(settings), lambda _: None, notes.append,
                            detach=False, grace=0.5)
        message = str(caught.value)
        assert caught.value.exit_code == 1
        assert "no `knowledge worker` and no `knowledge writer` is running for this store" in message
        assert "`knowledge runs`" in message
        other = settings_from_mapping({"broker": {"url": REDIS_URL}}, store_base=tmp_path / "other")
        with pytest.raises(KnowledgeError, match=r"did not finish within 0\.3 s; stopped following it"):  # --timeout
            run_distributed(other, request, request.targets(other), lambda _: None, notes.append,
                            detach=False, timeout=0.3, grace=60)
    finally:
        delete_namespace(client, namespace(settings))
        delete_namespace(client, namespace(other))
