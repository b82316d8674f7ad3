"""The embedding backlog of vector runs in Redis: RedisLedger's backlog (MemoryBacklog's twin).

Keys under `<namespace>:run:<run id>:`, all expiring with the run (see workers/embed.py and
workers/backpressure.py for how they are used):
  emb:positions  hash ingest key -> JSON positions of its items (once per key)
  emb:queued     hash "<doc key>\\x00<ordinal>" -> backlog position (until its batch is embedded)
  emb:items      hash position -> JSON [doc key, path, ordinal, text] (until its batch is embedded)
  emb:length     chunks ever appended (positions are 0..length-1)
  emb:embedded   chunks whose batch was embedded or given up;  emb:done  set of those batches' starts
  emb:ingested   set of ingest keys done;  emb:expected  hash doc key -> vectors awaited
  emb:settled    set of doc keys written or failed;  emb:vec:<doc key>  hash ordinal -> float32 blob
  emb:complete   set of doc keys with every vector, not settled yet (waiting for the writer)
The ingest count expected is the `ingests` field of the run's meta hash.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import redis

from workers.ledger.protocol import BacklogState, EmbedItem
from workers.ledger.redis_duties import text
from workers.ledger.scripts import Scripts


def _items(rows: list[Any] | None) -> list[EmbedItem]:
    return [json.loads(row) for row in rows or [] if row]


class RedisBacklog:
    """The embedding backlog of every run of a RedisLedger."""

    def __init__(self, client: redis.Redis, key: Callable[[str, str], str], ttl: int, scripts: Scripts) -> None:
        self.client = client
        self._key = key
        self.ttl = ttl
        self.scripts = scripts

    def _keys(self, run_id: str, *parts: str) -> list[str]:
        return [self._key(run_id, p) for p in parts]

    def expect_ingests(self, run_id: str, count: int) -> None:
        """Record how many ingest messages the run sent (the embedding tail flushes after the last)."""
        meta = self._key(run_id, "meta")
        pipe = self.client.pipeline()
        pipe.hset(meta, "ingests", count)
        pipe.expire(meta, self.ttl)
        pipe.execute()

    def queue_embeds(self, run_id: str, key: str, items: list[EmbedItem],
                     limit: int | None = None) -> list[int] | None:
        """Append an ingest message's items to the backlog once per key; return their positions, or
        None when a limit is given and more than `limit` chunks wait for their vectors."""
        keys = self._keys(run_id, "emb:positions", "emb:queued", "emb:items", "emb:length", "emb:embedded")
        args: list[Any] = [self.ttl, key, -1 if limit is None else int(limit)]
        for item in items:
            args += [f"{item[0]}\x00{int(item[2])}", json.dumps(item, separators=(",", ":"))]
        encoded = self.scripts["queue_embeds"](keys=keys, args=args)
        return None if encoded is None else [int(p) for p in json.loads(encoded)]

    def backlog_state(self, run_id: str, key: str) -> BacklogState:
        """The run's backlog counters and where ingest message `key` stands."""
        pipe = self.client.pipeline(transaction=False)
        pipe.get(self._key(run_id, "emb:length"))
        pipe.get(self._key(run_id, "emb:embedded"))
        pipe.hexists(self._key(run_id, "emb:positions"), key)
        pipe.sismember(self._key(run_id, "emb:ingested"), key)
        pipe.scard(self._key(run_id, "emb:complete"))
        length, embedded, queued, done, unwritten = pipe.execute()
        return BacklogState(int(length or 0), int(embedded or 0), bool(queued), bool(done), int(unwritten))

    def batch_embedded(self, run_id: str, start: int, stop: int) -> None:
        """Count the batch at positions [start, stop) as embedded (once) and free its items."""
        keys = self._keys(run_id, "emb:done", "emb:embedded", "emb:items", "emb:queued")
        self.scripts["batch_embedded"](keys=keys, args=[self.ttl, int(start), int(stop)])

    def ingest_done(self, run_id: str, key: str) -> tuple[bool, int]:
        """Mark an ingest message done; return (all expected ingests are done, backlog length)."""
        done_key = self._key(run_id, "emb:ingested")
        pipe = self.client.pipeline()
        pipe.sadd(done_key, key)
        pipe.expire(done_key, self.ttl)
        pipe.scard(done_key)
        pipe.hget(self._key(run_id, "meta"), "ingests")
        pipe.get(self._key(run_id, "emb:length"))
        _, _, done, expected, length = pipe.execute()
        return expected is not None and int(done) >= int(expected), int(length or 0)

    def embed_items(self, run_id: str, start: int, stop: int) -> list[EmbedItem]:
        """The backlog items at positions [start, stop) not yet freed."""
        if stop <= start:
            return []
        return _items(self.client.hmget(self._key(run_id, "emb:items"), list(range(start, stop))))

    def expect_vectors(self, run_id: str, counts: dict[str, int]) -> None:
        """Record how many vectors each pending document waits for."""
        if not counts:
            return
        key = self._key(run_id, "emb:expected")
        pipe = self.client.pipeline()
        for doc_key, count in counts.items():
            pipe.hset(key, doc_key, count)
        pipe.expire(key, self.ttl)
        pipe.execute()

    def put_vectors(self, run_id: str, vectors: list[tuple[str, int, bytes]], check: list[str]) -> list[str]:
        """Store vectors per (doc key, ordinal); return the documents (touched or in check) now complete."""
        keys = self._keys(run_id, "emb:expected", "emb:settled", "emb:complete")
        args: list[Any] = [self.ttl, self._key(run_id, "emb:vec:"), len(check), *check]
        for doc_key, ordinal, blob in vectors:
            args += [doc_key, int(ordinal), blob]
        done = self.scripts["put_vectors"](keys=keys, args=args)
        return [text(k) or "" for k in done]

    def present_vectors(self, run_id: str, slots: list[tuple[str, int]]) -> list[bool]:
        """Whether each (doc key, ordinal) already has its vector (or its document was settled)."""
        settled = self._key(run_id, "emb:settled")
        pipe = self.client.pipeline(transaction=False)
        for doc_key, ordinal in slots:
            pipe.sismember(settled, doc_key)
            pipe.hexists(self._key(run_id, f"emb:vec:{doc_key}"), str(int(ordinal)))
        answers = pipe.execute()
        return [bool(answers[2 * i]) or bool(answers[2 * i + 1]) for i in range(len(slots))]

    def vectors(self, run_id: str, doc_key: str) -> dict[int, bytes]:
        """The vectors embedded for a document, by ordinal."""
        rows = self.client.hgetall(self._key(run_id, f"emb:vec:{doc_key}"))
        return {int(k): v if isinstance(v, bytes) else v.encode() for k, v in rows.items()}

    def drop_vectors(self, run_id: str, doc_key: str) -> None:
        """Settle a written (or failed) document: forget its vectors; later puts for it are ignored."""
        settled = self._key(run_id, "emb:settled")
        pipe = self.client.pipeline()
        pipe.sadd(settled, doc_key)
        pipe.expire(settled, self.ttl)
        pipe.delete(self._key(run_id, f"emb:vec:{doc_key}"))
        pipe.hdel(self._key(run_id, "emb:expected"), doc_key)
        pipe.srem(self._key(run_id, "emb:complete"), doc_key)
        pipe.execute()

    def drop_backlog(self, run_id: str) -> None:
        """Free a finished run's embedding backlog and vectors (the counters stay)."""
        doomed = self._keys(run_id, "emb:items", "emb:queued", "emb:done", "emb:complete")
        doomed += [text(k) or "" for k in self.client.scan_iter(match=self._key(run_id, "emb:vec:*"), count=1000)]
        for start in range(0, len(doomed), 500):
            self.client.delete(*doomed[start:start + 500])
