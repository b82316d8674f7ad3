"""The write step: apply a staged batch's documents in one transaction (one each after a failure); finish a run."""

from __future__ import annotations

from config.errors import KnowledgeError, StoreFull
from config.observability import tracer
from pipeline.db import DatabaseError, is_disk_full
from workers import embed, payloads, tally
from workers.ledger.shapes import Outcome
from workers.payloads import DocumentItem, Item, Skipped, Touch
from workers.runtime import Runtime

_STOPPED: set[str] = set()
"""Runs this writer stopped on a full disk: their batches still staged are dropped, not applied."""


def apply_item(runtime: Runtime, item: Item) -> Outcome:
    """Apply one payload item; return its (path, outcome, reason)."""
    store = runtime.writer_store()
    try:
        if isinstance(item, DocumentItem):
            started = tally.timed_write()
            outcome = store.apply(item.document)
            tally.write_seconds(started)
            return item.path, outcome, None
        if isinstance(item, Touch):
            store.touch(item.path, item.size, item.mtime_ns)
            return item.path, "unchanged", None
        if isinstance(item, Skipped):  # no longer indexable: its old text is not what the file says now
            store.forget(item.path)
    except (KnowledgeError, DatabaseError, OSError) as exc:
        if is_disk_full(exc):
            raise disk_full(runtime, exc) from exc
        if isinstance(exc, OSError):
            raise
        return item.path, "failed", f"store write failed: {exc}"
    return item.path, item.outcome, item.reason


def disk_full(runtime: Runtime, exc: BaseException) -> StoreFull:
    """The one line a run stops with when the store's file system is full."""
    return StoreFull(f"the file system holding the store {runtime.settings.db_path} is full ({exc}); the run "
                     "stopped at the first write that did not fit, keeping every document written before it "
                     "(the store is consistent): free space there and re-run knowledge index")


def apply_items(runtime: Runtime, items: list[Item]) -> list[Outcome]:
    """Apply a batch's items, outcomes in their order: its documents in one transaction (Store.apply_group).

    When that transaction fails nothing of it stays, and each document is applied again in a
    transaction of its own, so only the document that cannot be written fails. The write duration
    metric records each document's share of the transaction.
    """
    documents = [(i, item) for i, item in enumerate(items) if isinstance(item, DocumentItem)]
    written: dict[int, Outcome] = {}
    if len(documents) > 1:
        started = tally.timed_write()
        try:
            outcomes = runtime.writer_store().apply_group([item.document for _, item in documents])
        except (KnowledgeError, DatabaseError, OSError) as exc:
            if is_disk_full(exc):  # trying each document alone would only fail each the same way
                raise disk_full(runtime, exc) from exc
            if isinstance(exc, OSError):
                raise
            outcomes = []  # rolled back: each document is tried alone below
        if outcomes:
            tally.write_seconds(started, len(documents))
            written = {i: (item.path, outcome, None) for (i, item), outcome in zip(documents, outcomes, strict=True)}
    return [written[i] if i in written else apply_item(runtime, item) for i, item in enumerate(items)]


def apply_batch(runtime: Runtime, run_id: str, key: str) -> None:
    """Apply a staged batch (a no-op if it was already applied), then try to finish the run.

    A full disk fails the run at once with one line (StoreFull) and releases its run lock; the
    batches still staged for a failed run are dropped unapplied.
    """
    staged = runtime.ledger.staged(run_id, key)
    if staged is not None and run_id in _STOPPED:
        runtime.ledger.unstage(run_id, key)
        return
    if staged is not None:
        embed.prepare_writer(runtime, run_id)
        items = embed.attach_vectors(runtime, run_id, key, payloads.from_wire(staged))
        before = embed.stored_hashes(runtime, run_id, items)
        try:
            outcomes = embed.name_backfills(apply_items(runtime, items), items, before)
        except StoreFull as exc:
            _STOPPED.add(run_id)
            runtime.ledger.unstage(run_id, key)
            runtime.ledger.fail(run_id, str(exc))
            runtime.ledger.run_lock.release(run_id)
            return
        runtime.ledger.record(run_id, outcomes)
        tally.count_outcomes(outcomes, "ingest")
        tally.count_chunks(sum(len(item.document.chunks) for item in items if isinstance(item, DocumentItem)))
        runtime.ledger.unstage(run_id, key)
        if any(isinstance(item, DocumentItem) and item.embed for item in items):
            # one document fewer waits for the writer: room for waiting ingest messages
            runtime.ledger.backlog.drop_vectors(run_id, key)
    finish_if_complete(runtime, run_id)


def finish_if_complete(runtime: Runtime, run_id: str) -> bool:
    """When every walked file is accounted for, remove what the walk found gone and close the run (once)."""
    ledger = runtime.ledger
    if not ledger.summary(run_id).done or not ledger.claim_finish(run_id):
        return False
    if embed.run_plan(runtime, run_id) is not None:
        ledger.backlog.drop_backlog(run_id)  # every document is written or failed: the backlog is spent
    store = runtime.writer_store()
    removed = 0
    try:
        embed.prepare_writer(runtime, run_id)
        with tracer().start_as_current_span("prune", attributes={"knowledge.run_id": run_id}) as span:
            removed = len(store.remove(ledger.removals(run_id)))
            span.set_attribute("knowledge.removed", removed)
        store.regroup(runtime.settings.languages)  # languages and translation groups over the tree as it now is
        embed.refresh_codes(runtime, run_id)
        store.refresh_impacts()
        files, chunks = store.totals()
        store.checkpoint()  # the WAL the run grew, cut back while serve's readers stay open
    except (KnowledgeError, DatabaseError) as exc:
        ledger.finish(run_id, "failed", removed, 0, 0, f"prune failed: {exc}")
        tally.count_run(ledger.summary(run_id).info.get("started"), "failed")
        return True
    ledger.finish(run_id, "complete", removed, files, chunks, None)
    tally.count_run(ledger.summary(run_id).info.get("started"), "complete")
    return True
