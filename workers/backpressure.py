"""Backpressure: ingest waits while the writer is behind (any run) or vectors are (a vector run).

Every run: ingest is several times faster than the single writer, so without a bound a large first
run would stage nearly the whole tree in the ledger (Redis) before the writer caught up: the
ledger's peak grew with the tree (bench/RESULTS.md, "A large tree end to end"). An ingest message
whose run already holds STAGED_LIMIT payloads not yet applied waits in its thread (polling, at most
WRITER_WAIT_S), and past that is sent again with a delay like a vector run's (below). The check is
not atomic with the staging, so threads that pass it together may each stage one more. The writer
needs nothing from ingest, so the staged payloads always drain while ingest waits; a run that is no
longer running never waits.

Vector runs, in addition:

Ingest is ~100x faster than embedding, so without a bound a large first run would read, chunk and
stage nearly every document in the ledger long before its vectors come back. The bound (`limit`)
applies to pending chunks: appended to the run's embedding backlog and not yet embedded (or given
up); and to unwritten documents: holding every vector but not written yet (a fast embedder ahead
of the writer). Both always drain while ingest waits: every full batch is sent as soon as it is
complete, the partial tail holds fewer than `batch_size` (<= limit) chunks, and the writer needs
nothing from ingest.

- Admission: an ingest message of a vector run first reads the backlog's counters (cheap, before
  any file is read); above the limit it waits. The backlog then enforces the limit atomically with
  the append (queue_embeds), so a run never holds more than the limit plus one message's chunks
  pending, however many workers race. A message whose chunks were already queued (a redelivery)
  always goes on.
- Waiting: a message that must wait sends itself again with a delay (DEFER_MS) and returns
  normally, so no worker thread blocks and nothing is kept aside: the broker holds the message
  like any other. It is not done: it does not count towards the run's completion or the embedding
  tail flush. A message refused at the append (another took the room while it read) has staged
  nothing (its documents are staged only once their chunks are queued) and waits the same way.

This replaced a parking lot (parked arguments in the ledger, woken by embed and write steps, a
ticker re-sending lost wakes): bench/RESULTS.md compares the two.
"""

from __future__ import annotations

import random
import time
from enum import Enum
from typing import Any

from config.settings import EmbeddingsSettings
from pipeline.vectors import VectorPlan
from workers.ledger import BacklogState
from workers.runtime import Runtime

DEFER_MS = 250  # a waiting ingest message comes back after about this long (0.5x to 1.5x)
DEFAULT_LIMIT = 2048
# Staged payloads a run may hold ahead of the writer (at 32 files a batch, ~4 MB of compressed chunks
# on the bench corpus and several seconds of the writer's work, so it never starves).
STAGED_LIMIT = 16
WRITER_WAIT_S = 5.0
WRITER_POLL_S = 0.1


class Verdict(Enum):
    """What an ingest message of a vector run does before reading its files."""

    GO = "go"
    DONE = "done"  # it already ran (a redelivery of a finished message)
    WAIT = "wait"  # the backlog is full: it was sent again with a delay


def limit(runtime: Runtime, plan: VectorPlan) -> int:
    """Pending chunks allowed per run: this process's `embeddings.max_pending`, at least one batch."""
    settings: EmbeddingsSettings | None = runtime.settings.embeddings
    configured = settings.max_pending if settings is not None else DEFAULT_LIMIT
    return max(configured, plan.batch_size)


def room(runtime: Runtime, state: BacklogState, plan: VectorPlan) -> int:
    """How far the run is below its limit (negative: over it, ingest waits)."""
    bound = limit(runtime, plan)
    return min(bound - state.pending, bound - state.unwritten)


def admit(runtime: Runtime, run_id: str, key: str, files: list[list[Any]], force: bool, plan: VectorPlan) -> Verdict:
    """Decide an ingest message before it reads anything; a message that must wait is deferred here."""
    state = runtime.ledger.backlog.backlog_state(run_id, key)
    if state.done:
        return Verdict.DONE
    if state.queued or room(runtime, state, plan) >= 0:
        return Verdict.GO
    defer(runtime, run_id, files, force)
    return Verdict.WAIT


def writer_room(runtime: Runtime, run_id: str, limit: int = STAGED_LIMIT, wait_s: float = WRITER_WAIT_S) -> bool:
    """True once the run holds fewer than `limit` staged payloads not yet applied (or is no longer
    running), waiting for that at most wait_s; False when the writer is still that far behind."""
    deadline = time.monotonic() + wait_s
    while runtime.ledger.staged_count(run_id) >= limit:
        if time.monotonic() >= deadline:
            return runtime.ledger.summary(run_id).state != "running"
        time.sleep(WRITER_POLL_S)
    return True


def defer(runtime: Runtime, run_id: str, files: list[list[Any]], force: bool) -> None:
    """Send an ingest message again after about DEFER_MS: it finds out then whether there is room.

    The delay is spread (jitter) so the messages waiting together do not all come back at once,
    read their files and race for the same room.
    """
    delay = int(DEFER_MS * random.uniform(0.5, 1.5))  # spreading, not secrecy
    runtime.actors.ingest.send_with_options(args=(run_id, files, force), delay=delay)
