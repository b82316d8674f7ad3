"""The embedding backlog of a vector run: its state as one ingest message sees it, and the
in-process implementation InMemoryLedger inherits (RedisLedger's twin is workers/redis_backlog.py).

See workers/embed.py for the backlog (positions, batches, vectors per document) and
workers/backpressure.py for parking and waking ingest messages.
"""

from __future__ import annotations

import heapq
import threading
from typing import Any, NamedTuple


class BacklogState(NamedTuple):
    """The embedding backlog of a run as one ingest message sees it."""

    appended: int  # chunks ever appended
    embedded: int  # chunks whose batch was embedded or given up
    queued: bool  # this message's chunks are in the backlog (it was admitted)
    done: bool  # this message is done
    unwritten: int = 0  # documents with every vector, not written yet
    admitted: int = 0  # ingest messages whose chunks were queued
    woken: int = 0  # parked messages sent again, not admitted yet

    @property
    def pending(self) -> int:
        """Chunks read but not embedded yet."""
        return self.appended - self.embedded


class MemoryBacklog:
    """The embedding backlog methods of InMemoryLedger (which provides _lock and _run)."""

    _lock: threading.Lock

    def _run(self, run_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def expect_ingests(self, run_id: str, count: int) -> None:
        """Record how many ingest messages the run sent (the embedding tail flushes after the last)."""
        with self._lock:
            self._run(run_id)["ingests"] = count

    def queue_embeds(self, run_id: str, key: str, items: list[list[Any]],
                     limit: int | None = None) -> list[int] | None:
        """Append an ingest message's [doc_key, path, ordinal, text] items to the backlog, once per key.

        Returns their backlog positions; a repeat for the same key appends nothing and returns the
        positions recorded the first time, so a redelivered ingest finds its batches again. With a
        limit, new items are refused (None) while more than `limit` chunks wait for their vectors.
        Recording a key ends its parking (see park).
        """
        with self._lock:
            run = self._run(run_id)
            if key in run["positions"]:
                _forget_parked(run, key)
                return list(run["positions"][key])
            if limit is not None and items and len(run["backlog"]) - run["embedded"] > limit:
                return None
            _forget_parked(run, key)
            positions: list[int] = []
            for item in items:
                slot = (item[0], int(item[2]))
                if slot not in run["queued"]:
                    run["queued"][slot] = len(run["backlog"])
                    run["backlog"].append(list(item))
                positions.append(run["queued"][slot])
            run["positions"][key] = positions
            return list(positions)

    def backlog_state(self, run_id: str, key: str) -> BacklogState:
        """The run's backlog counters and where ingest message `key` stands."""
        with self._lock:
            run = self._run(run_id)
            return BacklogState(len(run["backlog"]), run["embedded"], key in run["positions"], key in run["ingested"],
                                len(run["complete"]), len(run["positions"]), len(run["woken"]))

    def batch_embedded(self, run_id: str, start: int, stop: int) -> None:
        """Count the batch at positions [start, stop) as embedded (once) and free its items."""
        with self._lock:
            run = self._run(run_id)
            if start in run["batches"]:
                return
            run["batches"].add(start)
            backlog = run["backlog"]
            for position in range(start, min(stop, len(backlog))):
                item = backlog[position]
                if item is not None:
                    run["embedded"] += 1
                    run["queued"].pop((item[0], int(item[2])), None)
                    backlog[position] = None

    def park(self, run_id: str, key: str, args: list[Any], now: float, ticker_after: float) -> str | None:
        """Hold a deferred ingest message's args until unpark: first parked, first woken, and one woken
        but parked again goes first. Returns a new ticker token when no ticker ran within ticker_after."""
        with self._lock:
            run = self._run(run_id)
            run["parked"][key] = args
            seq: int | None = None
            if run["woken"].pop(key, None) is not None:
                run["seq"] += 1
                seq = -run["seq"]
            elif key not in run["waiting"]:
                run["seq"] += 1
                seq = run["seq"]
            if seq is not None:
                run["waiting"][key] = seq
                heapq.heappush(run["heap"], (seq, key))
            ticker = run["ticker"]
            if ticker is not None and now - ticker[1] < ticker_after:
                return None
            token = f"{now:.6f}-{run['seq']}"
            run["ticker"] = (token, now)
            return token

    def unpark(self, run_id: str, count: int, now: float) -> list[list[Any]]:
        """Take up to count parked messages' args, oldest first, marking them woken at now."""
        with self._lock:
            run = self._run(run_id)
            out: list[list[Any]] = []
            heap, waiting = run["heap"], run["waiting"]
            while heap and len(out) < count:
                seq, key = heapq.heappop(heap)
                if waiting.get(key) != seq:
                    continue  # left over from an earlier parking of the key
                del waiting[key]
                run["woken"][key] = now
                out.append(run["parked"][key])
            return out

    def tick(self, run_id: str, token: str, now: float, stale_after: float) -> list[list[Any]] | None:
        """A ticker's turn: None when it must stop (superseded, or nothing parked any more), else the
        args of messages woken more than stale_after ago and still not admitted (woken again now)."""
        with self._lock:
            run = self._run(run_id)
            if run["ticker"] is None or run["ticker"][0] != token:
                return None
            if not run["waiting"] and not run["woken"]:
                run["ticker"] = None
                return None
            run["ticker"] = (token, now)
            stale = [k for k, at in run["woken"].items() if now - at > stale_after]
            for key in stale:
                run["woken"][key] = now
            return [run["parked"][k] for k in stale]

    def ingest_done(self, run_id: str, key: str) -> tuple[bool, int]:
        """Mark an ingest message done; return (all expected ingests are done, backlog length)."""
        with self._lock:
            run = self._run(run_id)
            run["ingested"].add(key)
            expected = run["ingests"]
            return expected is not None and len(run["ingested"]) >= expected, len(run["backlog"])

    def embed_items(self, run_id: str, start: int, stop: int) -> list[list[Any]]:
        """The backlog items at positions [start, stop)."""
        with self._lock:
            return [list(item) for item in self._run(run_id)["backlog"][start:stop] if item is not None]

    def expect_vectors(self, run_id: str, counts: dict[str, int]) -> None:
        """Record how many vectors each pending document waits for."""
        with self._lock:
            self._run(run_id)["expected"].update(counts)

    def put_vectors(self, run_id: str, vectors: list[tuple[str, int, bytes]], check: list[str]) -> list[str]:
        """Store vectors per (doc key, ordinal); return the documents (touched or in check) now complete."""
        with self._lock:
            run = self._run(run_id)
            touched = dict.fromkeys(k for k in check if k not in run["settled"])
            for doc_key, ordinal, blob in vectors:
                if doc_key in run["settled"]:
                    continue
                run["vectors"].setdefault(doc_key, {})[int(ordinal)] = blob
                touched[doc_key] = None
            expected = run["expected"]
            done = [k for k in touched if k in expected and len(run["vectors"].get(k, {})) >= expected[k]]
            run["complete"].update(done)
            return done

    def present_vectors(self, run_id: str, slots: list[tuple[str, int]]) -> list[bool]:
        """Whether each (doc key, ordinal) already has its vector (or its document was settled)."""
        with self._lock:
            run = self._run(run_id)
            stored, settled = run["vectors"], run["settled"]
            return [doc_key in settled or int(ordinal) in stored.get(doc_key, {}) for doc_key, ordinal in slots]

    def vectors(self, run_id: str, doc_key: str) -> dict[int, bytes]:
        """The vectors embedded for a document, by ordinal."""
        with self._lock:
            return dict(self._run(run_id)["vectors"].get(doc_key, {}))

    def drop_vectors(self, run_id: str, doc_key: str) -> None:
        """Settle a written (or failed) document: forget its vectors; later puts for it are ignored."""
        with self._lock:
            run = self._run(run_id)
            run["vectors"].pop(doc_key, None)
            run["expected"].pop(doc_key, None)
            run["complete"].discard(doc_key)
            run["settled"].add(doc_key)

    def drop_backlog(self, run_id: str) -> None:
        """Free a finished run's embedding backlog and vectors (late duplicates then find nothing)."""
        with self._lock:
            run = self._run(run_id)
            run["backlog"] = [None] * len(run["backlog"])  # positions stay valid, items are gone
            run["queued"].clear()
            run["vectors"].clear()
            for part in ("parked", "waiting", "woken"):
                run[part].clear()
            run["heap"], run["ticker"] = [], None


def _forget_parked(run: dict[str, Any], key: str) -> None:
    """An admitted ingest message is parked no more."""
    run["parked"].pop(key, None)
    run["waiting"].pop(key, None)
    run["woken"].pop(key, None)
