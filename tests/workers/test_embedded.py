"""The in-process default: the same actors in-process on a StubBroker; incremental runs and prune rules."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pipeline.files
from config.errors import PipelineError, StoreBusy
from pipeline.lock import WriteLock
from pipeline.store import Store
from tests.conftest import write_tree
from tests.workers.helpers import index

DOCS = {
    "docs/guide.md": "# Guide\n\nInstall the tool.\n\n## Budgets\n\nLimit spending per run.\n",
    "docs/notes.txt": "plain notes about backpressure\n",
    "docs/sub/deep.markdown": "# Deep\n\n```sh\n# not a heading\nmake\n```\n",
}


def _recording(reads: list[str], original: Callable[[str, str | None], Any]) -> Callable[..., Any]:
    """read_bytes that notes each path it reads in reads."""
    def read(path: str, root: str | None = None) -> Any:
        reads.append(path)
        return original(path, root)
    return read


def _age(workdir: Path, seconds: float = 10.0) -> None:
    """Move every file's mtime into the past, out of the racy window."""
    past = time.time() - seconds
    for path in (workdir / "docs").rglob("*"):
        if path.is_file():
            os.utime(path, (past, past))


def _paths(settings) -> set[str]:
    store = Store(settings.db_path)
    try:
        return {r[0] for r in store.conn.execute("SELECT path FROM documents")}
    finally:
        store.close()


def test_a_first_run_adds_every_file_and_reports_skips_with_reasons(workdir: Path, make_settings) -> None:
    write_tree(workdir, {**DOCS, "docs/bin.md": b"\x00\x01binary", "docs/latin1.md": "caf\xe9".encode("latin-1")})
    summary = index(make_settings(paths=["docs"]))
    data = summary.to_json()
    assert (data["added"], data["updated"], data["unchanged"], data["failed"]) == (3, 0, 0, 0)
    assert data["files"] == 3 and data["chunks"] == 4
    reasons = {s["path"]: s["reason"] for s in data["skipped"]}
    assert reasons["docs/bin.md"].startswith("binary")
    assert reasons["docs/latin1.md"].startswith("not UTF-8")


def test_a_no_change_run_reads_no_file(workdir: Path, make_settings, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(workdir, DOCS)
    _age(workdir)
    settings = make_settings(paths=["docs"])
    index(settings)
    reads: list[str] = []
    original = pipeline.files.read_bytes
    monkeypatch.setattr(pipeline.files, "read_bytes", _recording(reads, original))
    summary = index(settings)
    assert reads == []
    assert summary.counts["unchanged"] == 3 and summary.counts["added"] == 0


def test_a_file_written_within_the_racy_window_is_rehashed(workdir: Path, make_settings,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(workdir, DOCS)
    settings = make_settings(paths=["docs"])
    index(settings)  # mtimes are "now": inside the 2 s window of this run's rows
    reads: list[str] = []
    original = pipeline.files.read_bytes
    monkeypatch.setattr(pipeline.files, "read_bytes", _recording(reads, original))
    summary = index(settings)
    assert sorted(reads) == sorted(str(workdir / rel) for rel in DOCS)  # read at their place on disk
    assert summary.counts["unchanged"] == 3


def test_a_touched_but_unchanged_file_is_unchanged_and_then_takes_the_fast_path(workdir: Path, make_settings,
                                                                                 monkeypatch) -> None:
    write_tree(workdir, DOCS)
    _age(workdir, 30)
    settings = make_settings(paths=["docs"])
    index(settings)
    past = time.time() - 5
    os.utime(workdir / "docs/guide.md", (past, past))
    assert index(settings).counts["unchanged"] == 3
    reads: list[str] = []
    original = pipeline.files.read_bytes
    monkeypatch.setattr(pipeline.files, "read_bytes", _recording(reads, original))
    index(settings)
    assert reads == []


def test_a_changed_file_is_updated_and_reindex_rereads_everything(workdir: Path, make_settings) -> None:
    write_tree(workdir, DOCS)
    settings = make_settings(paths=["docs"])
    index(settings)
    (workdir / "docs/notes.txt").write_text("new notes\n", encoding="utf-8")
    summary = index(settings)
    assert (summary.counts["updated"], summary.counts["unchanged"]) == (1, 2)
    summary = index(settings, reindex=True)
    assert summary.counts["updated"] == 3


def test_a_deleted_file_is_pruned_after_a_complete_walk_of_a_configured_root(workdir: Path, make_settings) -> None:
    write_tree(workdir, DOCS)
    settings = make_settings(paths=["docs"])
    index(settings)
    (workdir / "docs/notes.txt").unlink()
    summary = index(settings)
    assert summary.removed == 1
    assert _paths(settings) == {"docs/guide.md", "docs/sub/deep.markdown"}


def test_a_tree_of_many_batches_is_enqueued_as_walked_and_reconciled_once_the_walk_is_complete(
        workdir: Path, make_settings) -> None:
    notes = {f"docs/d{i % 9}/n{i:03d}.md": f"# Note {i}\n\nnote {i}\n" for i in range(300)}
    write_tree(workdir, notes)
    settings = make_settings(paths=["docs"], batch_files=8)
    assert index(settings).counts["added"] == 300
    _age(workdir)
    paths = sorted(notes)
    for rel in paths[:20]:
        (workdir / rel).unlink()
    for rel in paths[100:110]:
        (workdir / rel).write_text("# Changed\n\nnew words\n", encoding="utf-8")
    write_tree(workdir, {f"docs/d{i}/new.md": "# New\n" for i in range(5)})
    summary = index(settings)
    counts = summary.counts
    assert (counts["added"], counts["updated"], counts["unchanged"], counts["failed"], summary.removed) == (
        5, 10, 270, 0, 20)
    assert _paths(settings) == set(paths[20:]) | {f"docs/d{i}/new.md" for i in range(5)}


def test_an_explicit_file_never_prunes_and_an_explicit_directory_reconciles_what_it_holds(
        workdir: Path, make_settings) -> None:
    write_tree(workdir, DOCS)
    settings = make_settings(paths=["docs"])
    index(settings)
    (workdir / "docs/notes.txt").unlink()
    assert index(settings, "docs/guide.md").removed == 0
    assert "docs/notes.txt" in _paths(settings)
    assert index(settings, "docs").removed == 1
    assert "docs/notes.txt" not in _paths(settings)


def test_a_root_that_saw_no_file_does_not_prune(workdir: Path, make_settings) -> None:
    write_tree(workdir, DOCS)
    settings = make_settings(paths=["docs"])
    index(settings)
    for rel in DOCS:
        (workdir / rel).unlink()
    assert index(settings).removed == 0
    assert len(_paths(settings)) == 3


def test_a_missing_configured_root_fails_but_the_complete_root_still_prunes(workdir: Path, make_settings) -> None:
    write_tree(workdir, DOCS)
    settings = make_settings(paths=["docs", "missing"])
    first = index(settings)
    assert first.counts["failed"] == 1 and first.failures[0]["path"] == "missing"
    (workdir / "docs/notes.txt").unlink()
    assert index(settings).removed == 1


def test_a_root_with_a_walk_error_does_not_prune(workdir: Path, make_settings,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(workdir, DOCS)
    settings = make_settings(paths=["docs"])
    index(settings)
    (workdir / "docs/notes.txt").unlink()
    real_open = os.open

    def failing(path: str, flags: int, *args: Any, **kwargs: Any) -> int:
        if str(path).endswith("sub") and flags & os.O_DIRECTORY:
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr("pipeline.walker.os.open", failing)
    summary = index(settings)
    assert summary.removed == 0
    assert summary.failures == [{"path": "docs/sub", "reason": "cannot list directory: Permission denied"}]
    assert "docs/notes.txt" in _paths(settings)


def test_an_unreadable_file_fails_without_failing_the_run(workdir: Path, make_settings,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(workdir, DOCS)
    original = pipeline.files.read_bytes

    def flaky(path: str, root: str | None = None):
        if path.endswith("notes.txt"):
            raise PipelineError("cannot read: Input/output error")
        return original(path, root)

    monkeypatch.setattr(pipeline.files, "read_bytes", flaky)
    summary = index(make_settings(paths=["docs"]))
    assert summary.state == "complete"
    assert summary.failures == [{"path": "docs/notes.txt", "reason": "cannot read: Input/output error"}]
    assert summary.counts["added"] == 2


def test_a_second_index_run_while_one_holds_the_store_is_refused(workdir: Path, make_settings) -> None:
    write_tree(workdir, DOCS)
    settings = make_settings(paths=["docs"])
    with WriteLock(settings.store_dir), pytest.raises(StoreBusy) as info:
        index(settings)
    assert info.value.exit_code == 75


def test_the_ledger_records_each_outcome_once_so_redelivery_is_harmless(workdir: Path, make_settings) -> None:
    from workers.actors import declare_actors
    from workers.broker import build_stub_broker
    from workers.ingest import ingest_batch
    from workers.ledger import InMemoryLedger
    from workers.runtime import Runtime
    from workers.write import apply_batch

    write_tree(workdir, DOCS)
    settings = make_settings(paths=["docs"])
    store = Store(settings.db_path)
    ledger = InMemoryLedger()
    runtime = Runtime(settings, ledger, store, declare_actors(build_stub_broker()))  # never sends: lexical
    files = [[p, "docs", 1, 1, None] for p in sorted(DOCS)]
    ledger.start("r1", {})
    ledger.walked("r1", len(files), 0, [])
    for _ in range(2):  # a redelivered ingest and write message repeat harmlessly
        key = ingest_batch(runtime, "r1", files, False)
        assert key is not None
        apply_batch(runtime, "r1", key)
        apply_batch(runtime, "r1", key)
    summary = ledger.summary("r1")
    assert summary.state == "complete" and summary.counts["added"] == 3 and summary.accounted == 3
    assert store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 4
    store.close()


def test_a_batch_is_written_in_one_transaction_and_a_document_that_cannot_be_written_fails_alone(
        workdir: Path, make_settings) -> None:
    from pipeline.chunker import chunk_text
    from pipeline.models import Document
    from workers.actors import declare_actors
    from workers.broker import build_stub_broker
    from workers.ledger import InMemoryLedger
    from workers.payloads import DocumentItem, Item, Skipped
    from workers.runtime import Runtime
    from workers.write import apply_items

    def item(path: str, text: str, twice: bool = False) -> DocumentItem:
        chunks = chunk_text(text).chunks
        doc = Document(path, "docs", path, len(text), 1, None, [chunks[0], chunks[0]] if twice else chunks)
        return DocumentItem(path, doc)

    settings = make_settings(paths=["docs"])
    store = Store(settings.db_path)
    runtime = Runtime(settings, InMemoryLedger(), store, declare_actors(build_stub_broker()))  # never sends
    items: list[Item] = [item("docs/a.md", "# A\n\nalpha\n"), Skipped("docs/x.bin", "binary"),
             item("docs/b.md", "# B\n\nbeta\n\n## Two\n\nmore\n", twice=True),  # UNIQUE (document_id, ordinal)
             item("docs/c.md", "# C\n\ngamma\n")]
    outcomes = apply_items(runtime, items)
    assert [(path, outcome) for path, outcome, _ in outcomes] == [
        ("docs/a.md", "added"), ("docs/x.bin", "skipped"), ("docs/b.md", "failed"), ("docs/c.md", "added")]
    assert "store write failed: UNIQUE constraint failed" in str(outcomes[2][2])
    assert {r[0] for r in store.conn.execute("SELECT path FROM documents")} == {"docs/a.md", "docs/c.md"}
    assert apply_items(runtime, [item("docs/d.md", "# D\n\ndelta\n"), item("docs/a.md", "# A\n\nnew\n")]) == [
        ("docs/d.md", "added", None), ("docs/a.md", "updated", None)]
    store.close()


def test_an_embedded_run_past_its_timeout_stops_with_one_line_and_a_rerun_converges(
        workdir: Path, run_cli, server) -> None:
    write_tree(workdir, DOCS)
    server.faults.slow = 1.0
    config = (f"knowledge:\n  paths: [docs]\n  embeddings:\n    base_url: {server.base_url}\n"
              "    model: hashed-bow\n    timeout: 5\n")
    (workdir / "knowledge.yaml").write_text(config, encoding="utf-8")
    code, _, err = run_cli("index", "--timeout", "0.2")
    assert code == 1 and "did not finish within 0.2 s" in err and "Traceback" not in err
    server.faults.slow = 0.0
    assert run_cli("index")[0] == 0
