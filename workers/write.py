"""The write step: apply staged payloads one document per transaction; finish a complete run."""

from __future__ import annotations

from typing import Any

from config.errors import KnowledgeError
from config.observability import tracer
from pipeline.db import DatabaseError
from pipeline.models import Document
from workers import backpressure, embed
from workers.runtime import Runtime


def apply_item(runtime: Runtime, item: dict[str, Any]) -> tuple[str, str, str | None]:
    """Apply one payload item; return its (path, outcome, reason)."""
    store = runtime.writer_store()
    path, outcome = item["path"], item["outcome"]
    try:
        if outcome == "document":
            return path, store.apply(Document.from_dict(item["doc"])), None
        if outcome == "unchanged":
            size, mtime_ns = item["touch"]
            store.touch(path, size, mtime_ns)
            return path, "unchanged", None
        if outcome == "skipped":  # no longer indexable: its old text is not what the file says now
            store.forget(path)
    except (KnowledgeError, DatabaseError) as exc:
        return path, "failed", f"store write failed: {exc}"
    return path, outcome, item.get("reason")


def apply_batch(runtime: Runtime, run_id: str, key: str) -> None:
    """Apply a staged batch (a no-op if it was already applied), then try to finish the run."""
    payload = runtime.ledger.staged(run_id, key)
    if payload is not None:
        embed.prepare_writer(runtime, run_id)
        payload = embed.attach_vectors(runtime, run_id, key, payload)
        outcomes = [apply_item(runtime, item) for item in payload]
        runtime.ledger.record(run_id, outcomes)
        runtime.ledger.unstage(run_id, key)
        if any(item.get("embed") for item in payload):
            runtime.ledger.drop_vectors(run_id, key)
            plan = embed.run_plan(runtime, run_id)
            if plan is not None:  # one document fewer waits for the writer: room for parked ingests
                backpressure.wake(runtime, run_id, plan)
    finish_if_complete(runtime, run_id)


def finish_if_complete(runtime: Runtime, run_id: str) -> bool:
    """When every walked file is accounted for, prune complete roots and close the run (once)."""
    ledger = runtime.ledger
    if not ledger.summary(run_id).done or not ledger.claim_finish(run_id):
        return False
    if embed.run_plan(runtime, run_id) is not None:
        ledger.drop_backlog(run_id)  # every document is written or failed: the backlog is spent
    store = runtime.writer_store()
    removed = 0
    try:
        embed.prepare_writer(runtime, run_id)
        with tracer().start_as_current_span("prune", attributes={"knowledge.run_id": run_id}) as span:
            for root in ledger.prunable(run_id):
                removed += len(store.prune(root, ledger.seen(run_id, root)))
            span.set_attribute("knowledge.removed", removed)
        files, chunks = store.conn.execute(
            "SELECT count(*), coalesce(sum(chunk_count), 0) FROM documents"
        ).fetchone()
    except (KnowledgeError, DatabaseError) as exc:
        ledger.finish(run_id, "failed", removed, 0, 0, f"prune failed: {exc}")
        return True
    ledger.finish(run_id, "complete", removed, int(files), int(chunks), None)
    return True
