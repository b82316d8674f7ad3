"""The embedding backlog of vector runs held in this process: InMemoryLedger's backlog.

RedisBacklog (workers/ledger/redis_backlog.py) is its twin; the contract is in protocol.Backlog.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from workers.ledger.protocol import BacklogState, EmbedItem


@dataclass
class BacklogRun:
    """One run's embedding backlog."""

    ingests: int | None = None  # ingest messages the run sent (known after the walk)
    ingested: set[str] = field(default_factory=set)  # ingest keys done
    items: list[EmbedItem | None] = field(default_factory=list)  # by position; None once embedded
    queued: dict[tuple[str, int], int] = field(default_factory=dict)  # (doc key, ordinal) -> position
    positions: dict[str, list[int]] = field(default_factory=dict)  # ingest key -> its items' positions
    embedded: int = 0  # chunks whose batch was embedded or given up
    batches: set[int] = field(default_factory=set)  # start positions of the batches counted
    expected: dict[str, int] = field(default_factory=dict)  # doc key -> vectors awaited
    vectors: dict[str, dict[int, bytes]] = field(default_factory=dict)  # doc key -> ordinal -> blob
    settled: set[str] = field(default_factory=set)  # doc keys written or failed
    complete: set[str] = field(default_factory=set)  # doc keys with every vector, not settled yet


class MemoryBacklog:
    """The embedding backlog of every run of an InMemoryLedger."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, BacklogRun] = {}

    def _run(self, run_id: str) -> BacklogRun:
        return self._runs.setdefault(run_id, BacklogRun())

    def expect_ingests(self, run_id: str, count: int) -> None:
        """Record how many ingest messages the run sent (the embedding tail flushes after the last)."""
        with self._lock:
            self._run(run_id).ingests = count

    def queue_embeds(self, run_id: str, key: str, items: list[EmbedItem],
                     limit: int | None = None) -> list[int] | None:
        """Append an ingest message's [doc_key, path, ordinal, text] items to the backlog, once per key.

        Returns their backlog positions; a repeat for the same key appends nothing and returns the
        positions recorded the first time, so a redelivered ingest finds its batches again. With a
        limit, new items are refused (None) while more than `limit` chunks wait for their vectors.
        """
        with self._lock:
            run = self._run(run_id)
            if key in run.positions:
                return list(run.positions[key])
            if limit is not None and items and len(run.items) - run.embedded > limit:
                return None
            positions: list[int] = []
            for item in items:
                slot = (str(item[0]), int(item[2]))
                if slot not in run.queued:
                    run.queued[slot] = len(run.items)
                    run.items.append(list(item))
                positions.append(run.queued[slot])
            run.positions[key] = positions
            return list(positions)

    def backlog_state(self, run_id: str, key: str) -> BacklogState:
        """The run's backlog counters and where ingest message `key` stands."""
        with self._lock:
            run = self._run(run_id)
            return BacklogState(len(run.items), run.embedded, key in run.positions, key in run.ingested,
                                len(run.complete))

    def batch_embedded(self, run_id: str, start: int, stop: int) -> None:
        """Count the batch at positions [start, stop) as embedded (once) and free its items."""
        with self._lock:
            run = self._run(run_id)
            if start in run.batches:
                return
            run.batches.add(start)
            for position in range(start, min(stop, len(run.items))):
                item = run.items[position]
                if item is not None:
                    run.embedded += 1
                    run.queued.pop((str(item[0]), int(item[2])), None)
                    run.items[position] = None

    def ingest_done(self, run_id: str, key: str) -> tuple[bool, int]:
        """Mark an ingest message done; return (all expected ingests are done, backlog length)."""
        with self._lock:
            run = self._run(run_id)
            run.ingested.add(key)
            return run.ingests is not None and len(run.ingested) >= run.ingests, len(run.items)

    def embed_items(self, run_id: str, start: int, stop: int) -> list[EmbedItem]:
        """The backlog items at positions [start, stop) not yet freed."""
        with self._lock:
            return [list(item) for item in self._run(run_id).items[start:stop] if item is not None]

    def expect_vectors(self, run_id: str, counts: dict[str, int]) -> None:
        """Record how many vectors each pending document waits for."""
        with self._lock:
            self._run(run_id).expected.update(counts)

    def put_vectors(self, run_id: str, vectors: list[tuple[str, int, bytes]], check: list[str]) -> list[str]:
        """Store vectors per (doc key, ordinal); return the documents (touched or in check) now complete."""
        with self._lock:
            run = self._run(run_id)
            touched = dict.fromkeys(k for k in check if k not in run.settled)
            for doc_key, ordinal, blob in vectors:
                if doc_key in run.settled:
                    continue
                run.vectors.setdefault(doc_key, {})[int(ordinal)] = blob
                touched[doc_key] = None
            done = [k for k in touched if k in run.expected and len(run.vectors.get(k, {})) >= run.expected[k]]
            run.complete.update(done)
            return done

    def present_vectors(self, run_id: str, slots: list[tuple[str, int]]) -> list[bool]:
        """Whether each (doc key, ordinal) already has its vector (or its document was settled)."""
        with self._lock:
            run = self._run(run_id)
            return [doc_key in run.settled or int(ordinal) in run.vectors.get(doc_key, {})
                    for doc_key, ordinal in slots]

    def vectors(self, run_id: str, doc_key: str) -> dict[int, bytes]:
        """The vectors embedded for a document, by ordinal."""
        with self._lock:
            return dict(self._run(run_id).vectors.get(doc_key, {}))

    def drop_vectors(self, run_id: str, doc_key: str) -> None:
        """Settle a written (or failed) document: forget its vectors; later puts for it are ignored."""
        with self._lock:
            run = self._run(run_id)
            run.vectors.pop(doc_key, None)
            run.expected.pop(doc_key, None)
            run.complete.discard(doc_key)
            run.settled.add(doc_key)

    def drop_backlog(self, run_id: str) -> None:
        """Free a finished run's embedding backlog and vectors (late duplicates then find nothing)."""
        with self._lock:
            run = self._run(run_id)
            run.items = [None] * len(run.items)  # positions stay valid, items are gone
            run.queued.clear()
            run.vectors.clear()
