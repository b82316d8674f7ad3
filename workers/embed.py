"""The embed step of a vector run: route chunks to a backlog, embed full batches across documents.

Ingest (route): a document whose every chunk keeps a stored vector goes to the writer with its
batch; for any other, its chunks needing a vector are appended to the run's backlog in the ledger
(as EmbedWork: append-only positions, an item freed once its batch is embedded), then it is staged
under its own key.
Batch b is backlog positions [b*B, (b+1)*B): the ingest message that appended position (b+1)*B - 1
sends it, so requests carry B inputs whatever the file sizes, and the last of the expected ingests
to finish flushes the tail (the walk counts as one: its ingest messages leave as it goes, and it
sets the count and marks itself done once it has sent them all). The append is refused while too many chunks are pending
(workers/backpressure.py).

Embed (embed_batch): outside any transaction, POST the batch (halving on failure down to single
inputs), store each vector against its (document, ordinal) slot, and send every document whose
vectors are now all present to the writer, then count the batch embedded (freeing its items, so
waiting ingest messages find room). A single input that still fails fails its document, not the run.
Every step is idempotent: positions are recorded per ingest key, presence per chunk, a batch is
counted embedded once, and a document is settled once written or failed, so a redelivered message
repeats harmlessly.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import replace
from typing import Any, Self

from config.errors import EmbeddingError, VectorIdentityMismatch
from config.observability import tracer
from pipeline import db, schema, vector_codes
from pipeline.embeddings import EmbeddingsClient, RetryPolicy
from pipeline.vectors import (
    VectorPlan,
    VectorWriter,
    has_table,
    install,
    mismatch,
    pinned_identity,
    reusable_hashes,
    serves,
    to_blob,
)
from workers import embed_pace, tally
from workers.ledger import Ledger
from workers.ledger.shapes import Outcome
from workers.payloads import DocumentItem, EmbedWork, Item
from workers.queues import Actors
from workers.runtime import Runtime

_lock = threading.Lock()
# Retries of one request's transient failures, inside one message; the broker retries the message.
EMBED_RETRY = RetryPolicy()


def doc_key(path: str) -> str:
    """The staging key of a document waiting for its vectors."""
    return "d-" + hashlib.sha1(path.encode()).hexdigest()[:20]


def run_plan(runtime: Runtime, run_id: str) -> VectorPlan | None:
    """The run's vector plan (from the run info in the ledger), cached per process; None if lexical."""
    cache = runtime.vector_plans
    if run_id not in cache:
        plan = VectorPlan.from_info(runtime.ledger.summary(run_id).info.get("vectors"))
        with _lock:
            cache[run_id] = plan
    return cache[run_id]


def client_for(runtime: Runtime, plan: VectorPlan) -> EmbeddingsClient:
    """This process's embeddings client for the plan's identity (created once, shared by threads)."""
    settings, ident = runtime.settings.embeddings, plan.identity
    nxt = runtime.settings.embeddings_next
    if nxt is not None and serves(nxt, ident) and (settings is None or not serves(settings, ident)):
        settings = nxt  # the store switched models (knowledge vectors switch): the new server embeds
    if settings is None:
        raise VectorIdentityMismatch("this worker has no embeddings configured but the run embeds; "
                                     "give every worker the same knowledge.yaml")
    pinned = replace(settings, model=ident.model, query_prefix=ident.query_prefix,
                     document_prefix=ident.document_prefix)
    with _lock:
        client = runtime.embeddings_client
        if client is None or client.expected_dim != ident.dimension or client.settings != pinned:
            client = EmbeddingsClient(pinned, retry=EMBED_RETRY, expected_dim=ident.dimension)
            runtime.embeddings_client = client
        return client


def route(runtime: Runtime, run_id: str, key: str, items: list[Item], plan: VectorPlan,
          limit: int | None = None) -> list[Item] | None:
    """Queue the chunks of the documents that need vectors, then stage those documents; return the
    rest of the payload.

    None when the backlog refused the chunks (more than `limit` pending): nothing was staged and
    the caller defers the message. A document is staged after its chunks are queued, so a batch
    may be embedded before its document is staged: the completeness check after staging sends
    such a document to the writer (a write that found nothing staged was a no-op).
    """
    rest: list[Item] = []
    waiting: dict[str, DocumentItem] = {}
    work: list[EmbedWork] = []
    expected: dict[str, int] = {}
    with _StoredVectors(runtime, plan) as stored:
        for item in items:
            if not isinstance(item, DocumentItem):
                rest.append(item)
                continue
            doc = item.document
            keep = stored.hashes(doc.path)
            todo = [c for c in doc.chunks if c.text_hash not in keep]
            if not todo:
                rest.append(item)
                continue
            dkey = doc_key(doc.path)
            waiting[dkey] = replace(item, embed=True)
            expected[dkey] = len(todo)
            work += [EmbedWork(dkey, doc.path, c.ordinal, plan.identity.document_text(c.body, c.heading_path))
                     for c in todo]
    backlog = runtime.ledger.backlog
    if backlog.queue_embeds(run_id, key, [w.to_wire() for w in work], limit) is None:
        return None
    embed_pace.routed(run_id, len(work))
    if expected:
        backlog.expect_vectors(run_id, expected)
        for dkey, item in waiting.items():
            runtime.ledger.stage(run_id, dkey, [item.to_wire()])
        for dkey in backlog.put_vectors(run_id, [], list(expected)):
            runtime.actors.write.send(run_id, dkey)
    return rest


def dispatch(runtime: Runtime, run_id: str, key: str, plan: VectorPlan) -> None:
    """Send the full batches this ingest message completed and, after the last ingest, the tail.

    A redelivery of a message that got this far before (it was marked done, so its batches and any
    tail were sent) sends nothing again: a second message for a batch still queued could run beside
    the first and embed its chunks twice.
    """
    backlog = runtime.ledger.backlog
    if backlog.backlog_state(run_id, key).done:
        return
    size = plan.batch_size
    for position in backlog.queue_embeds(run_id, key, []) or []:
        if (position + 1) % size == 0:
            runtime.actors.embed.send(run_id, position // size)
    ingest_finished(runtime, run_id, key, plan)


def ingest_finished(runtime: Runtime, run_id: str, key: str, plan: VectorPlan) -> None:
    """Mark an ingest message done (or given up); after the last one, send the backlog's tail batch."""
    finish_ingest(runtime.ledger, runtime.actors, run_id, key, plan)


def finish_ingest(ledger: Ledger, actors: Actors, run_id: str, key: str, plan: VectorPlan) -> None:
    """Mark `key` done (an ingest message, or the walk that enqueued them: workers/run.py); whichever
    is the last of the expected ones sends the backlog's tail batch."""
    all_done, length = ledger.backlog.ingest_done(run_id, key)
    if all_done and length % plan.batch_size:
        actors.embed.send(run_id, (length - 1) // plan.batch_size)


def _batch(runtime: Runtime, run_id: str, index: int, size: int) -> tuple[list[EmbedWork], list[EmbedWork]]:
    """The chunks of backlog batch `index`, and those of them that have no vector yet."""
    backlog = runtime.ledger.backlog
    work = [EmbedWork.from_wire(w) for w in backlog.embed_items(run_id, index * size, (index + 1) * size)]
    present = backlog.present_vectors(run_id, [w.slot for w in work])
    return work, [w for w, have in zip(work, present) if not have]


def embed_batch(runtime: Runtime, run_id: str, index: int) -> None:
    """Embed backlog batch `index`, store the vectors, send completed documents to the writer.

    An unreachable server raises (EmbeddingUnavailable) so the broker retries the message; when
    the retries run out, give_up_batch fails the batch's documents.
    """
    plan = run_plan(runtime, run_id)
    if plan is None:
        return
    work, todo = _batch(runtime, run_id, index, plan.batch_size)
    failed: dict[str, tuple[str, str]] = {}
    vectors: list[tuple[str, int, bytes]] = []
    if todo:
        failed, vectors = _partition(todo, _embed_texts(runtime, run_id, index, plan, todo))
    if failed:
        fail_documents(runtime, run_id, failed)
    complete = runtime.ledger.backlog.put_vectors(run_id, vectors, sorted({w.doc_key for w in work}))
    for dkey in complete:
        if dkey not in failed:
            runtime.actors.write.send(run_id, dkey)
    batch_finished(runtime, run_id, index, plan)


def _embed_texts(runtime: Runtime, run_id: str, index: int, plan: VectorPlan, todo: list[EmbedWork],
                 ) -> list[list[float] | EmbeddingError]:
    """Embed todo's texts at the server's pace, traced: a vector or the error per input, in order."""
    splits: list[int] = []
    health = embed_pace.run_health(run_id)
    observer: embed_pace.Observer | None = None

    def on_split(size: int) -> None:
        splits.append(size)
        if observer is not None:
            observer.split(size)

    def on_request(inputs: int, seconds: float, ok: bool) -> None:
        tally.embed_request(inputs, seconds, ok)
        if observer is not None:
            observer.request(inputs, seconds, ok)

    with tracer().start_as_current_span("embed batch", attributes={"knowledge.run_id": run_id,
                                                                   "knowledge.batch": index,
                                                                   "knowledge.inputs": len(todo)}) as span:
        results: list[list[float] | EmbeddingError]
        try:
            client = client_for(runtime, plan)
            pace = embed_pace.pace_for(client.settings.concurrency, client.settings.timeout)
            observer = embed_pace.Observer(health, pace)
            with pace.slot():  # fewer requests in flight while the server's latency climbs
                results = list(client.embed_halving([w.text for w in todo], on_split, on_request))
        except VectorIdentityMismatch as exc:
            results = [exc] * len(todo)
        span.set_attribute("knowledge.halvings", len(splits))
        tally.count_halvings(len(splits))
        span.set_attribute("knowledge.failed_inputs", sum(isinstance(r, EmbeddingError) for r in results))
    return results


def _partition(todo: list[EmbedWork], results: list[list[float] | EmbeddingError],
               ) -> tuple[dict[str, tuple[str, str]], list[tuple[str, int, bytes]]]:
    """The documents failed (key -> path, reason) and the vectors as blobs, from todo's results."""
    failed: dict[str, tuple[str, str]] = {}
    vectors: list[tuple[str, int, bytes]] = []
    for chunk, result in zip(todo, results):
        if isinstance(result, EmbeddingError):
            failed.setdefault(chunk.doc_key, (chunk.path, f"embedding section {chunk.ordinal} failed: {result}"))
        else:  # the one float -> blob step: from here on a vector is bytes
            vectors.append((chunk.doc_key, chunk.ordinal, to_blob(result)))
    return failed, vectors


def batch_finished(runtime: Runtime, run_id: str, index: int, plan: VectorPlan) -> None:
    """Count a batch embedded (once; its items are freed): room for waiting ingest messages."""
    runtime.ledger.backlog.batch_embedded(run_id, index * plan.batch_size, (index + 1) * plan.batch_size)


def fail_documents(runtime: Runtime, run_id: str, failed: dict[str, tuple[str, str]]) -> None:
    """Record documents as failed (their stored version stays), settle them and let the run finish."""
    ledger = runtime.ledger
    outcomes: list[Outcome] = [(path, "failed", reason) for path, reason in failed.values()]
    ledger.record(run_id, outcomes)
    tally.count_outcomes(outcomes, "embed")
    for dkey in failed:
        ledger.backlog.drop_vectors(run_id, dkey)
        ledger.unstage(run_id, dkey)
    runtime.actors.finalize.send(run_id)


def give_up_batch(runtime: Runtime, run_id: str, index: int, reason: str) -> None:
    """Fail the documents of a batch whose message ran out of retries (chunks still without vectors)."""
    plan = run_plan(runtime, run_id)
    if plan is None:
        return
    _, missing = _batch(runtime, run_id, index, plan.batch_size)
    failed = {w.doc_key: (w.path, f"embedding failed: {reason}") for w in missing}
    if failed:
        fail_documents(runtime, run_id, failed)
    batch_finished(runtime, run_id, index, plan)


def attach_vectors(runtime: Runtime, run_id: str, key: str, items: list[Item]) -> list[Item]:
    """The writer's view of a staged payload: a pending document gets its embedded vectors (blobs, as stored)."""
    out: list[Item] = []
    for item in items:
        if isinstance(item, DocumentItem) and item.embed:
            blobs = runtime.ledger.backlog.vectors(run_id, key)
            item = replace(item, document=replace(item.document, vectors=blobs))
        out.append(item)
    return out


VECTORS_ADDED = "vectors_added"  # the outcome of a document rewritten only to give its sections vectors


def stored_hashes(runtime: Runtime, run_id: str, items: list[Item]) -> dict[str, str]:
    """In the writer, before a batch is applied: the stored content hash of each document waiting for
    vectors in a run without --reindex; what name_backfills compares with."""
    paths = [item.path for item in items if isinstance(item, DocumentItem) and item.embed]
    if not paths or _reindexing(runtime, run_id):
        return {}
    conn = runtime.writer_store().conn
    found: dict[str, str] = {}
    for start in range(0, len(paths), 500):
        part = paths[start:start + 500]
        rows = conn.execute(f"SELECT path, sha256 FROM documents WHERE path IN ({','.join('?' * len(part))})", part)
        found.update((path, sha) for path, sha in rows)
    return found


_reindex_runs: dict[str, bool] = {}


def _reindexing(runtime: Runtime, run_id: str) -> bool:
    """Whether the run was asked with --reindex (from its run info, read once per run and process)."""
    if run_id not in _reindex_runs:
        with _lock:
            if len(_reindex_runs) > 64:
                _reindex_runs.clear()
            _reindex_runs[run_id] = bool(runtime.ledger.summary(run_id).info.get("reindex"))
    return _reindex_runs[run_id]


def name_backfills(outcomes: list[Outcome], items: list[Item], before: dict[str, str]) -> list[Outcome]:
    """An `updated` document whose content hash equals the stored one is `vectors_added` (only its vectors are new)."""
    if not before:
        return outcomes
    same = {item.path for item in items
            if isinstance(item, DocumentItem) and before.get(item.path) == item.document.sha256}
    return [(path, VECTORS_ADDED, reason) if outcome == "updated" and path in same else (path, outcome, reason)
            for path, outcome, reason in outcomes]


def prepare_writer(runtime: Runtime, run_id: str) -> None:
    """In the writer, before a run's first write: install the vector table and set the store's hook."""
    if run_id in runtime.prepared_runs:
        return
    store = runtime.writer_store()
    plan = run_plan(runtime, run_id)
    if plan is None:
        store.vector_hook = None
    else:
        with store.transaction() as conn:
            pinned = pinned_identity(schema.read_meta(conn))
            if plan.reuse and pinned is not None and pinned != plan.identity:  # a switch swapped since the plan
                raise mismatch(runtime.settings.db_path, pinned, plan.identity)
            install(conn, plan.identity)
        store.vector_hook = VectorWriter(reuse=plan.reuse)
    runtime.prepared_runs.add(run_id)


def refresh_codes(runtime: Runtime, run_id: str) -> None:
    """In the writer, when a vector run finishes: file codes for a store that had none, retrain outgrown lists.

    A first run starts from an empty store, so its centroids are trained here, on what it wrote.
    """
    plan = run_plan(runtime, run_id)
    if plan is None:
        return
    with runtime.writer_store().transaction() as conn:
        if has_table(conn) and pinned_identity(schema.read_meta(conn)) == plan.identity:
            vector_codes.refresh(conn, plan.identity.dimension)


class _StoredVectors:
    """Read-only access to the stored vectors an ingest may keep (none when reuse is off or no store)."""

    def __init__(self, runtime: Runtime, plan: VectorPlan) -> None:
        self.path = runtime.settings.db_path
        self.enabled = plan.reuse
        self.conn: Any = None

    def __enter__(self) -> Self:
        if self.enabled and self.path.is_file():
            try:
                self.conn = db.connect_readonly(self.path)
            except Exception:  # noqa: BLE001 - no reuse is always correct, only slower
                self.conn = None
        return self

    def hashes(self, path: str) -> set[str]:
        """Text hashes of path's stored chunks that have a vector."""
        if self.conn is None:
            return set()
        try:
            return reusable_hashes(self.conn, path)
        except db.DatabaseError:
            return set()

    def __exit__(self, *exc: object) -> None:
        if self.conn is not None:
            self.conn.close()
