"""Backpressure in a vector run: ingest waits while too many read chunks wait for their vectors.

Ingest is ~100x faster than embedding, so without a bound a large first run would read, chunk and
stage nearly every document in the ledger long before its vectors come back. The bound (`limit`)
applies to pending chunks: appended to the run's embedding backlog and not yet embedded (or given
up); and to unwritten documents: holding every vector but not written yet (a fast embedder ahead
of the writer). Both always drain while ingest waits: every full batch is sent as soon as it is
complete, the partial tail holds fewer than `batch_size` (<= limit) chunks, and the writer needs
nothing from ingest.

- Admission: an ingest message of a vector run first reads the backlog's counters (cheap, before
  any file is read); above the limit it is parked. queue_embeds then enforces the limit atomically
  with the append, so a run never holds more than the limit plus one message's chunks pending,
  however many workers race. A message refused there is parked too; what it staged is overwritten
  when it comes back. A message whose chunks were already queued (a redelivery) always goes on.
- Parking: the message's arguments are kept in the ledger and the message returns normally, so no
  worker thread blocks and the broker holds nothing. It is not done: it does not count towards the
  run's completion or the embedding tail flush.
- Waking: when a batch is embedded (or given up), when the writer writes an embedded document and
  when an admitted ingest message finishes, the oldest parked messages are sent again: as many as
  fit at the run's mean chunks per admitted message, counting those woken and not yet admitted. A parking message wakes too when
  the room appeared while it parked (its park and the waker's count are each one atomic ledger
  step, so one of the two sees the other).
- The ticker: one `resume` message per run, re-sent every TICK_S while anything is parked, sends
  again a woken message that never arrived (its sender died between taking it and sending it) and
  wakes if there is room. A parking message starts it when no ticker ran lately; a superseded
  ticker stops at its next turn.
"""

from __future__ import annotations

import time
from typing import Any

from config.settings import EmbeddingsSettings
from pipeline.vectors import VectorPlan
from workers.backlog import BacklogState
from workers.runtime import Runtime

TICK_S = 5.0
TICKER_AFTER_S = 3 * TICK_S  # a parking message starts a ticker when none ran for this long
STALE_S = 120.0  # a woken message not admitted after this long is sent again
MAX_WAKE = 8  # messages sent again by one wake
DEFAULT_LIMIT = 2048


def limit(runtime: Runtime, plan: VectorPlan) -> int:
    """Pending chunks allowed per run: this process's `embeddings.max_pending`, at least one batch."""
    settings: EmbeddingsSettings | None = runtime.settings.embeddings
    configured = settings.max_pending if settings is not None else DEFAULT_LIMIT
    return max(configured, plan.batch_size)


def room(runtime: Runtime, state: BacklogState, plan: VectorPlan) -> int:
    """How far the run is below its limit (negative: over it, ingest waits)."""
    bound = limit(runtime, plan)
    return min(bound - state.pending, bound - state.unwritten)


def admit(runtime: Runtime, run_id: str, key: str, files: list[list[Any]], force: bool, plan: VectorPlan) -> str:
    """Decide an ingest message before it reads anything: "go", "done" (it already ran) or "parked"."""
    state = runtime.ledger.backlog_state(run_id, key)
    if state.done:
        return "done"
    if state.queued or room(runtime, state, plan) >= 0:
        return "go"
    park(runtime, run_id, key, files, force, plan)
    return "parked"


def park(runtime: Runtime, run_id: str, key: str, files: list[list[Any]], force: bool, plan: VectorPlan) -> None:
    """Keep a deferred ingest message in the ledger; start the ticker if none runs; wake if room appeared."""
    token = runtime.ledger.park(run_id, key, [files, force], time.time(), TICKER_AFTER_S)
    if token is not None:
        runtime.actors.resume.send_with_options(args=(run_id, token), delay=int(TICK_S * 1000))
    wake(runtime, run_id, plan)


def wake(runtime: Runtime, run_id: str, plan: VectorPlan) -> int:
    """Send parked ingest messages again, about as many as there is room for beside those already
    on their way (at the run's mean chunks per admitted message); return how many."""
    state = runtime.ledger.backlog_state(run_id, "")
    per_message = max(1, -(-state.appended // max(1, state.admitted)))
    free = room(runtime, state, plan) - state.woken * per_message
    if free < 0:
        return 0
    count = min(MAX_WAKE, 1 + free // per_message)
    woken = runtime.ledger.unpark(run_id, count, time.time())
    for files, force in woken:
        runtime.actors.ingest.send(run_id, files, force)
    return len(woken)


def resume(runtime: Runtime, run_id: str, token: str, plan: VectorPlan) -> None:
    """One turn of the run's ticker: re-send lost wakes, wake if there is room, come back while needed."""
    if runtime.ledger.summary(run_id).state != "running":
        return
    stale = runtime.ledger.tick(run_id, token, time.time(), STALE_S)
    if stale is None:
        return
    for files, force in stale:
        runtime.actors.ingest.send(run_id, files, force)
    wake(runtime, run_id, plan)
    runtime.actors.resume.send_with_options(args=(run_id, token), delay=int(TICK_S * 1000))
