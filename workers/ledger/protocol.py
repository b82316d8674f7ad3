"""What actors, processes and the CLI need from a run ledger, whichever holds it.

A ledger records one store's index runs: per-path outcomes, the walk, staged payloads and the
final state. It owns four smaller parts, each a protocol here: the embedding backlog of a vector
run, the run lock (one run per store at a time), presence (which worker and writer processes are
alive) and replies (a writer's answer to an operator request). InMemoryLedger
(workers/ledger/memory.py) serves the embedded default; RedisLedger (workers/ledger/redis_ledger.py)
holds the same contract under expiring keys for the distributed shape.

Every write is idempotent: an outcome is recorded per path (first write wins), so a message
redelivered after a worker was killed repeats harmlessly; counters are derived from the recorded
outcomes, never counted down. The one exception is the walk's files unchanged by stat: the walk
happens once per run and those files are never enqueued, so they are counted, not listed, and a run
with nothing to read holds nothing per file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

# vectors_added: a document read again only to embed its sections (its content unchanged)
OUTCOME_NAMES = ("added", "updated", "unchanged", "skipped", "failed", "vectors_added")
# A run lock expires this long after its last refresh (the CLI and every processed message refresh it).
LOCK_TTL_MS = 120_000
# A process that has not announced itself for this long is not counted as alive.
ALIVE_WINDOW_S = 15.0
REPLY_TTL_S = 3600

Outcome = tuple[str, str, str | None]  # (path, outcome, reason)
Wire = dict[str, Any]  # one staged payload item as it crosses the ledger (workers/payloads.py)


@dataclass
class RunSummary:
    """What a run did, as printed at its end."""

    run_id: str
    state: str = "running"
    total: int = 0
    walked: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    removed: int = 0
    files: int = 0
    chunks: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    failures: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def accounted(self) -> int:
        """Files with a recorded outcome."""
        return sum(self.counts.values())

    @property
    def done(self) -> bool:
        """True when every walked file is accounted for."""
        return self.walked and self.accounted >= self.total

    def to_json(self) -> dict[str, Any]:
        """The summary object of `knowledge index --json`."""
        return {
            "run_id": self.run_id,
            "state": self.state,
            "added": self.counts.get("added", 0),
            "updated": self.counts.get("updated", 0),
            "unchanged": self.counts.get("unchanged", 0),
            "vectors_added": self.counts.get("vectors_added", 0),
            "removed": self.removed,
            "failed": self.counts.get("failed", 0),
            "files": self.files,
            "chunks": self.chunks,
            "skipped": self.skipped,
            "failures": self.failures,
            **({"error": self.error} if self.error else {}),
        }


class BacklogState(NamedTuple):
    """The embedding backlog of a run as one ingest message sees it."""

    appended: int  # chunks ever appended
    embedded: int  # chunks whose batch was embedded or given up
    queued: bool  # this message's chunks are in the backlog (it was admitted)
    done: bool  # this message is done
    unwritten: int = 0  # documents with every vector, not written yet

    @property
    def pending(self) -> int:
        """Chunks read but not embedded yet."""
        return self.appended - self.embedded


EmbedItem = list[Any]  # [doc key, path, ordinal, text] as the backlog holds it (workers/payloads.py)


class Backlog(Protocol):
    """The embedding backlog of vector runs (see workers/embed.py and workers/backpressure.py)."""

    def expect_ingests(self, run_id: str, count: int) -> None:
        """Record how many ingest messages the run sent (the embedding tail flushes after the last)."""

    def queue_embeds(self, run_id: str, key: str, items: list[EmbedItem],
                     limit: int | None = None) -> list[int] | None:
        """Append an ingest message's items once per key; their positions, or None when refused
        (a limit given and more than `limit` chunks pending)."""

    def backlog_state(self, run_id: str, key: str) -> BacklogState:
        """The run's backlog counters and where ingest message `key` stands."""

    def batch_embedded(self, run_id: str, start: int, stop: int) -> None:
        """Count the batch at positions [start, stop) as embedded (once) and free its items."""

    def ingest_done(self, run_id: str, key: str) -> tuple[bool, int]:
        """Mark an ingest message done; return (all expected ingests are done, backlog length)."""

    def embed_items(self, run_id: str, start: int, stop: int) -> list[EmbedItem]:
        """The backlog items at positions [start, stop) not yet freed."""

    def expect_vectors(self, run_id: str, counts: dict[str, int]) -> None:
        """Record how many vectors each pending document waits for."""

    def put_vectors(self, run_id: str, vectors: list[tuple[str, int, bytes]], check: list[str]) -> list[str]:
        """Store vectors per (doc key, ordinal); return the documents (touched or in check) now complete."""

    def present_vectors(self, run_id: str, slots: list[tuple[str, int]]) -> list[bool]:
        """Whether each (doc key, ordinal) already has its vector (or its document was settled)."""

    def vectors(self, run_id: str, doc_key: str) -> dict[int, bytes]:
        """The vectors embedded for a document, by ordinal (float32 blobs)."""

    def drop_vectors(self, run_id: str, doc_key: str) -> None:
        """Settle a written (or failed) document: forget its vectors; later puts for it are ignored."""

    def drop_backlog(self, run_id: str) -> None:
        """Free a finished run's embedding backlog and vectors (late duplicates then find nothing)."""


class RunLock(Protocol):
    """One run per store at a time: a lock naming the run, with a TTL its followers refresh."""

    def acquire(self, run_id: str, ttl_ms: int = LOCK_TTL_MS) -> str | None:
        """Take the lock for run_id; None on success, else the run holding it."""

    def refresh(self, run_id: str, ttl_ms: int = LOCK_TTL_MS) -> bool:
        """Extend the lock if run_id still holds it."""

    def release(self, run_id: str) -> bool:
        """Drop the lock if run_id holds it."""

    def holder(self) -> str | None:
        """The run holding the lock, if any."""


class Presence(Protocol):
    """Which processes of a role (worker, writer) serve the store."""

    def announce(self, role: str, member: str) -> None:
        """Mark a process (`host:pid`) of a role alive now."""

    def withdraw(self, role: str, member: str) -> None:
        """Forget a process that is stopping."""

    def alive(self, role: str, within_s: float = ALIVE_WINDOW_S) -> list[str]:
        """The processes of a role that announced themselves within the last within_s seconds."""


class Replies(Protocol):
    """Answers to operator requests handled by another process (e.g. `knowledge rm` via the writer)."""

    def put(self, request_id: str, value: Any, ttl_s: int = REPLY_TTL_S) -> None:
        """Answer a request; the first answer stays."""

    def get(self, request_id: str) -> str | None:
        """The JSON answer to a request, once given."""


class Ledger(Protocol):
    """The run ledger of one store, with its backlog, run lock, presence and replies."""

    @property
    def backlog(self) -> Backlog:
        """The embedding backlog of vector runs."""

    @property
    def run_lock(self) -> RunLock:
        """The store's run lock."""

    @property
    def presence(self) -> Presence:
        """The live worker and writer processes."""

    @property
    def replies(self) -> Replies:
        """Answers to operator requests."""

    def start(self, run_id: str, info: dict[str, Any]) -> None:
        """Create the run and list it among the recent runs."""

    def walked(self, run_id: str, total: int, unchanged: int, removals: list[str]) -> None:
        """Record the finished walk: its file count; how many of those files are unchanged by stat (counted
        as outcomes, not listed: a run with nothing to read records nothing per file); and the stored
        paths its complete roots no longer hold, which the writer removes when the run finishes."""

    def record(self, run_id: str, outcomes: list[Outcome]) -> None:
        """Record (path, outcome, reason) triples; the first outcome of a path wins."""

    def skip(self, run_id: str, skips: list[tuple[str, str]]) -> None:
        """Record paths the walk skipped before reading, with reasons."""

    def stage(self, run_id: str, key: str, payload: list[Wire]) -> None:
        """Hold a payload for the writer under key."""

    def staged(self, run_id: str, key: str) -> list[Wire] | None:
        """The payload under key, or None if it was already applied."""

    def unstage(self, run_id: str, key: str) -> None:
        """Drop an applied payload."""

    def staged_count(self, run_id: str) -> int:
        """How many payloads of the run are staged and not applied yet."""

    def removals(self, run_id: str) -> list[str]:
        """The stored paths the walk's complete roots no longer hold (see walked)."""

    def claim_finish(self, run_id: str) -> bool:
        """True exactly once for a running run: the caller runs the finishing step."""

    def finish(self, run_id: str, state: str, removed: int, files: int, chunks: int, error: str | None) -> None:
        """Close the run with its final state and store totals, and release its run lock."""

    def fail(self, run_id: str, error: str) -> None:
        """Mark a still-running run failed (abandoned or lost); a later finish of it is refused."""

    def summary(self, run_id: str) -> RunSummary:
        """A snapshot of the run."""

    def recent(self, limit: int = 10) -> list[RunSummary]:
        """The most recent runs, newest first."""
