"""The embedding backlog of vector runs, on the ledger's primitives (see workers/embed.py and
workers/backpressure.py for how it is used).

Keys under `run:<run id>:`, all expiring with the run:
  emb:log        the log of chunks to embed: one append per ingest key, slot "<doc key>\\x00<ordinal>",
                 value the JSON [doc key, path, ordinal, text]; a batch's values are freed once embedded
  emb:ingested   set of ingest keys done (the count expected is the `ingests` field of the run's meta)
  emb:expected   hash doc key -> vectors awaited;  emb:vec:<doc key>  hash ordinal -> float32 blob
  emb:settled    set of doc keys written or failed;  emb:complete  set of doc keys with every vector,
                 not settled yet (waiting for the writer)

The steps that must be atomic are single primitives: the append (positions once per key, a chunk
once while live, the limit checked with the append: log_append), freeing a batch (log_free),
counting ingests done (set_add answers the size after its own add, so one caller sees the last).
Settling a document is one batch; storing vectors is several steps, each safe to repeat: a
document settled meanwhile reads as present, and is dropped again from emb:complete by the next put
that sees it settled.
"""

from __future__ import annotations

import json

from workers.ledger.primitives import Primitives
from workers.ledger.shapes import BacklogState, EmbedItem


def _slot(doc_key: str, ordinal: int) -> str:
    return f"{doc_key}\x00{int(ordinal)}"


class Backlog:
    """The embedding backlog of every run of a ledger."""

    def __init__(self, store: Primitives, ttl: float) -> None:
        self.store = store
        self.ttl = ttl

    @staticmethod
    def _key(run_id: str, part: str) -> str:
        return f"run:{run_id}:{part}"

    def expect_ingests(self, run_id: str, count: int) -> None:
        """Record how many ingest messages the run sent (the embedding tail flushes after the last)."""
        self.store.hash_put(self._key(run_id, "meta"), {"ingests": count}, self.ttl)

    def queue_embeds(self, run_id: str, key: str, items: list[EmbedItem],
                     limit: int | None = None) -> list[int] | None:
        """Append an ingest message's [doc key, path, ordinal, text] items once per key; their positions.

        A repeat for the same key appends nothing and returns the positions recorded the first time, so
        a redelivered ingest finds its batches again. With a limit, new items are refused (None) while
        more than `limit` chunks wait for their vectors.
        """
        entries: list[tuple[str, str | bytes | int | float]] = [
            (_slot(str(item[0]), int(item[2])), json.dumps(item, separators=(",", ":"))) for item in items]
        return self.store.log_append(self._key(run_id, "emb:log"), key, entries, self.ttl, limit)

    def backlog_state(self, run_id: str, key: str) -> BacklogState:
        """The run's backlog counters and where ingest message `key` stands."""
        appended, live, queued = self.store.log_counts(self._key(run_id, "emb:log"), key)
        done = self.store.set_has(self._key(run_id, "emb:ingested"), [key])[0]
        unwritten = self.store.set_len(self._key(run_id, "emb:complete"))
        return BacklogState(appended, appended - live, queued, done, unwritten)

    def batch_embedded(self, run_id: str, start: int, stop: int) -> None:
        """Count the batch at positions [start, stop) as embedded and free its items (a repeat frees nothing)."""
        self.store.log_free(self._key(run_id, "emb:log"), start, stop)

    def ingest_done(self, run_id: str, key: str) -> tuple[bool, int]:
        """Mark an ingest message done; return (all expected ingests are done, backlog length)."""
        done = self.store.set_add(self._key(run_id, "emb:ingested"), [key], self.ttl)
        expected = self.store.hash_get(self._key(run_id, "meta"), ["ingests"])[0]
        length = self.store.log_counts(self._key(run_id, "emb:log"))[0]
        return expected is not None and done >= int(expected), length

    def embed_items(self, run_id: str, start: int, stop: int) -> list[EmbedItem]:
        """The backlog items at positions [start, stop) not yet freed."""
        return [json.loads(row) for row in self.store.log_read(self._key(run_id, "emb:log"), start, stop)]

    def expect_vectors(self, run_id: str, counts: dict[str, int]) -> None:
        """Record how many vectors each pending document waits for."""
        self.store.hash_put(self._key(run_id, "emb:expected"), dict(counts), self.ttl)

    def _settled(self, run_id: str, docs: list[str]) -> set[str]:
        return {d for d, s in zip(docs, self.store.set_has(self._key(run_id, "emb:settled"), docs)) if s}

    def put_vectors(self, run_id: str, vectors: list[tuple[str, int, bytes]], check: list[str]) -> list[str]:
        """Store vectors per (doc key, ordinal); return the documents (touched or in check) now complete.

        Presence is per chunk (a repeat stores the same vector again, nothing is counted down); a
        settled document's vectors are ignored.
        """
        docs = list(dict.fromkeys([*check, *(d for d, _, _ in vectors)]))
        settled = self._settled(run_id, docs)
        by_doc: dict[str, dict[str, bytes]] = {}
        for doc_key, ordinal, blob in vectors:
            if doc_key not in settled:
                by_doc.setdefault(doc_key, {})[str(int(ordinal))] = blob
        with self.store.batch() as batch:
            for doc_key, blobs in by_doc.items():
                batch.hash_put(self._key(run_id, f"emb:vec:{doc_key}"), dict(blobs), self.ttl)
        open_docs = [d for d in docs if d not in settled]
        wanted = self.store.hash_get(self._key(run_id, "emb:expected"), open_docs)
        waiting = [(d, int(w)) for d, w in zip(open_docs, wanted) if w is not None]
        have = self.store.hash_len([self._key(run_id, f"emb:vec:{d}") for d, _ in waiting])
        done = [d for (d, want), n in zip(waiting, have) if n >= want]
        complete = self._key(run_id, "emb:complete")
        if done:
            self.store.set_add(complete, done, self.ttl)
        settled = self._settled(run_id, docs)  # settled meanwhile (or before a crash): not waiting
        if settled:
            self.store.set_drop(complete, sorted(settled))
        return [d for d in done if d not in settled]

    def present_vectors(self, run_id: str, slots: list[tuple[str, int]]) -> list[bool]:
        """Whether each (doc key, ordinal) already has its vector (or its document was settled)."""
        settled = self._settled(run_id, list(dict.fromkeys(d for d, _ in slots)))
        asked = [(self._key(run_id, f"emb:vec:{d}"), str(int(o))) for d, o in slots if d not in settled]
        have = iter(self.store.hash_has(asked))
        return [d in settled or next(have) for d, _ in slots]

    def vectors(self, run_id: str, doc_key: str) -> dict[int, bytes]:
        """The vectors embedded for a document, by ordinal (float32 blobs)."""
        return {int(k): v for k, v in self.store.hash_all([self._key(run_id, f"emb:vec:{doc_key}")])[0].items()}

    def drop_vectors(self, run_id: str, doc_key: str) -> None:
        """Settle a written (or failed) document: forget its vectors; later puts for it are ignored."""
        with self.store.batch() as batch:  # settled first: a put that reads it after ignores the document
            batch.set_add(self._key(run_id, "emb:settled"), [doc_key], self.ttl)
            batch.delete([self._key(run_id, f"emb:vec:{doc_key}")])
            batch.hash_drop(self._key(run_id, "emb:expected"), [doc_key])
            batch.set_drop(self._key(run_id, "emb:complete"), [doc_key])

    def drop_backlog(self, run_id: str) -> None:
        """Free a finished run's embedding backlog and vectors (the counts of the log stay)."""
        self.store.log_free(self._key(run_id, "emb:log"))
        self.store.delete([self._key(run_id, "emb:complete")])
        self.store.delete_prefix(self._key(run_id, "emb:vec:"))
