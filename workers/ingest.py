"""The ingest step: read, hash and chunk a batch of files, stage the results for the writer."""

from __future__ import annotations

import hashlib
from typing import Any

from config.errors import FileSkipped, PipelineError
from config.urls import is_web_path
from pipeline.files import ingest_file
from pipeline.models import FileJob
from pipeline.web import PageUnchanged, ingest_url
from workers import backpressure, embed
from workers.runtime import Runtime


def batch_key(files: list[list[Any]]) -> str:
    """A deterministic key for a batch, so a redelivered message stages the same key."""
    digest = hashlib.sha1("\x00".join(str(f[0]) for f in files).encode()).hexdigest()
    return f"b-{digest[:20]}"


def ingest_item(job: FileJob, force: bool) -> dict[str, Any]:
    """One file's payload item for the writer: a document, a touch, a skip or a failure."""
    try:
        result = ingest_url(job, force=force) if is_web_path(job.path) else ingest_file(job, force=force)
    except FileSkipped as exc:
        return {"path": job.path, "outcome": "skipped", "reason": str(exc)}
    except PipelineError as exc:
        return {"path": job.path, "outcome": "failed", "reason": str(exc)}
    except Exception as exc:  # noqa: BLE001 - one bad file must not fail the run
        return {"path": job.path, "outcome": "failed", "reason": f"unexpected error: {type(exc).__name__}: {exc}"}
    if isinstance(result, PageUnchanged):
        return {"path": job.path, "outcome": "unchanged", "touch": [result.size, result.mtime_ns]}
    if result == "unchanged":
        return {"path": job.path, "outcome": "unchanged", "touch": [job.size, job.mtime_ns]}
    return {"path": job.path, "outcome": "document", "doc": result.to_dict()}  # type: ignore[union-attr]


def ingest_batch(runtime: Runtime, run_id: str, files: list[list[Any]], force: bool) -> str | None:
    """Process a batch and stage its payload; return the staged key to hand the writer.

    In a vector run, documents needing vectors are routed to the embedding backlog first, and the
    batches this message completed are sent (again, on a redelivery) after the payload is staged.
    While the backlog is full the message is parked instead and None is returned: it is sent again
    when there is room (workers/backpressure.py).
    """
    key = batch_key(files)
    plan = embed.run_plan(runtime, run_id)
    if runtime.ledger.staged(run_id, key) is None:
        if plan is not None:
            verdict = backpressure.admit(runtime, run_id, key, files, force, plan)
            if verdict != "go":
                return key if verdict == "done" else None
        payload = [ingest_item(FileJob.from_wire(f), force) for f in files]
        if plan is not None:
            routed = embed.route(runtime, run_id, key, payload, plan, backpressure.limit(runtime, plan))
            if routed is None:
                backpressure.park(runtime, run_id, key, files, force, plan)
                return None
            payload = routed
        runtime.ledger.stage(run_id, key, payload)
    if plan is not None:
        embed.dispatch(runtime, run_id, key, plan)
        backpressure.wake(runtime, run_id, plan)
    return key
