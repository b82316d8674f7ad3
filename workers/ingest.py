"""The ingest step: read, hash and chunk a batch of files, stage the results for the writer."""

from __future__ import annotations

import hashlib
from typing import Any

from config.errors import FileSkipped, PipelineError
from config.urls import is_web_path
from pipeline.extraction import Extraction
from pipeline.files import Outcome, ingest_files
from pipeline.models import FileJob
from pipeline.web import TOTAL_SECONDS, PageUnchanged, ingest_url
from workers import backpressure, embed, payloads
from workers.backpressure import Verdict
from workers.payloads import DocumentItem, Failed, Item, Skipped, Touch
from workers.runtime import Runtime


def batch_key(files: list[list[Any]]) -> str:
    """A deterministic key for a batch, so a redelivered message stages the same key."""
    digest = hashlib.sha1("\x00".join(str(f[0]) for f in files).encode()).hexdigest()
    return f"b-{digest[:20]}"


def ingest_items(jobs: list[FileJob], force: bool, extraction: Extraction,
                 fetch_seconds: float = TOTAL_SECONDS) -> list[Item]:
    """The payload items of a batch's jobs, in order: the files' parsing streamed through one bounded child
    (pipeline/files.ingest_files), each web page fetched here and converted in a child."""
    files = [job for job in jobs if not is_web_path(job.path)]
    read = dict(zip((job.path for job in files), ingest_files(files, force, extraction)))
    return [_item(job, read[job.path]) if job.path in read else _page(job, force, fetch_seconds, extraction)
            for job in jobs]


def _page(job: FileJob, force: bool, fetch_seconds: float, extraction: Extraction) -> Item:
    """A web page's payload item: fetched, then converted under the extraction bound."""
    try:
        result = ingest_url(job, force=force, total_seconds=fetch_seconds, call=extraction.call)
    except Exception as exc:  # noqa: BLE001 - one bad page must not fail the run
        return _item(job, exc)
    if isinstance(result, PageUnchanged):
        return Touch(job.path, result.size, result.mtime_ns)
    return _item(job, result)


def _item(job: FileJob, outcome: Outcome | Exception) -> Item:
    """One job's payload item for the writer: a document, a touch, a skip or a failure."""
    if isinstance(outcome, FileSkipped):
        return Skipped(job.path, str(outcome))
    if isinstance(outcome, PipelineError):
        return Failed(job.path, str(outcome))
    if isinstance(outcome, Exception):
        return Failed(job.path, f"unexpected error: {type(outcome).__name__}: {outcome}")
    if isinstance(outcome, str):  # "unchanged": the content hash equals the stored one
        return Touch(job.path, job.size, job.mtime_ns)
    return DocumentItem(job.path, outcome)


def ingest_batch(runtime: Runtime, run_id: str, files: list[list[Any]], force: bool) -> str | None:
    """Process a batch and stage its payload; return the staged key to hand the writer.

    While the writer is STAGED_LIMIT payloads behind, the message waits (workers/backpressure.py).
    In a vector run, documents needing vectors are routed to the embedding backlog first, and the
    batches this message completed are sent (again, on a redelivery) after the payload is staged.
    While the backlog is full the message is sent again later instead and None is returned
    (workers/backpressure.py).
    """
    key = batch_key(files)
    plan = embed.run_plan(runtime, run_id)
    if runtime.ledger.staged(run_id, key) is None:
        if plan is not None:
            verdict = backpressure.admit(runtime, run_id, key, files, force, plan)
            if verdict is not Verdict.GO:
                return key if verdict is Verdict.DONE else None
        elif not backpressure.writer_room(runtime, run_id):
            backpressure.defer(runtime, run_id, files, force)
            return None
        items = ingest_items([FileJob.from_wire(f) for f in files], force, runtime.extraction,
                             runtime.settings.fetch_timeout)
        noted = [(i.path, i.document.front_matter_error) for i in items
                 if isinstance(i, DocumentItem) and i.document.front_matter_error]
        if noted:  # indexed as text all the same; the run summary lists why its fields were not kept
            runtime.ledger.skip(run_id, noted)
        if plan is not None:
            routed = embed.route(runtime, run_id, key, items, plan, backpressure.limit(runtime, plan))
            if routed is None:
                backpressure.defer(runtime, run_id, files, force)
                return None
            items = routed
        runtime.ledger.stage(run_id, key, payloads.to_wire(items))
    if plan is not None:
        embed.dispatch(runtime, run_id, key, plan)
    return key
