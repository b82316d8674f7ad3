"""The distributed shape on the real Redis: `knowledge worker` (2 processes) and one `knowledge writer`.

Every test starts real processes with scripts/run-local.sh against a store of its own (so a Redis
namespace of its own) on db 13, and bounds every wait.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench.lib.corpus import generate
from config.loader import settings_from_mapping
from tests.faults.invariants import integrity_problems
from tests.workers.cluster import (
    CORPUS_FILES,
    Cluster,
    assert_same_store,
    cluster,  # noqa: F401 - the fixture, requested by name
    store_rows,
)
from tests.workers.conftest import REDIS_URL, delete_namespace, require_redis

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_a_distributed_run_builds_exactly_the_embedded_store(
    cluster: Cluster, big_corpus: Path, big_corpus_store: Path
) -> None:
    cluster.start(workers=2, threads=2)
    result = cluster.knowledge("index", str(big_corpus), "--json", timeout=150)
    assert result.returncode == 0, result.stderr + cluster.logs()
    summary = json.loads(result.stdout)
    assert (summary["added"], summary["failed"], summary["files"]) == (CORPUS_FILES, 0, CORPUS_FILES)
    assert_same_store(cluster.base, big_corpus_store)

    again = cluster.knowledge("index", str(big_corpus), "--json", timeout=60)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["unchanged"] == CORPUS_FILES

    runs = cluster.knowledge("runs", "--json", timeout=30)
    listed = json.loads(runs.stdout)
    assert [r["state"] for r in listed] == ["complete", "complete"]
    assert listed[1]["added"] == CORPUS_FILES and not any(r["holds_lock"] for r in listed)


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
        chain: list[str] = []
        cursor = span
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


def test_rm_and_reset_go_through_the_running_writer(cluster: Cluster, tmp_path: Path) -> None:
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

    reset = cluster.knowledge("reset", "--force", timeout=30)  # the writer empties the store it holds
    assert reset.returncode == 0 and f"reset: removed {len(docs_after)} documents" in reset.stdout, reset.stderr
    assert cluster.settings.db_path.is_file() and store_rows(cluster.settings.db_path) == ([], [])


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
