"""The run ledger: per-run outcomes, seen paths, failures, staged payloads and state.

Every write is idempotent: an outcome is recorded per path (first write wins), so a message
redelivered after a worker was killed repeats harmlessly; counters are derived from the recorded
outcomes, never counted down. InMemoryLedger serves the embedded default; RedisLedger
(workers/redis_ledger.py) holds the same data under expiring keys for the distributed shape.
"""

from __future__ import annotations

import heapq
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

RUN_STATES = ("running", "complete", "failed")


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


class Ledger(Protocol):
    """What actors and the CLI need from a run ledger."""

    def start(self, run_id: str, info: dict[str, Any]) -> None: ...
    def walked(self, run_id: str, total: int, seen: dict[str, list[str]], prunable: list[str]) -> None: ...
    def record(self, run_id: str, outcomes: list[tuple[str, str, str | None]]) -> None: ...
    def skip(self, run_id: str, skips: list[tuple[str, str]]) -> None: ...
    def stage(self, run_id: str, key: str, payload: list[dict[str, Any]]) -> None: ...
    def staged(self, run_id: str, key: str) -> list[dict[str, Any]] | None: ...
    def unstage(self, run_id: str, key: str) -> None: ...
    def seen(self, run_id: str, root: str) -> set[str]: ...
    def prunable(self, run_id: str) -> list[str]: ...
    def claim_finish(self, run_id: str) -> bool: ...
    def finish(self, run_id: str, state: str, removed: int, files: int, chunks: int, error: str | None) -> None: ...
    def summary(self, run_id: str) -> RunSummary: ...
    def recent(self, limit: int = 10) -> list[RunSummary]: ...
    # The embedding backlog of a vector run (see workers/embed.py).
    def expect_ingests(self, run_id: str, count: int) -> None: ...
    def queue_embeds(self, run_id: str, key: str, items: list[list[Any]],
                     limit: int | None = None) -> list[int] | None: ...
    def backlog_state(self, run_id: str, key: str) -> BacklogState: ...
    def batch_embedded(self, run_id: str, start: int, stop: int) -> None: ...
    def park(self, run_id: str, key: str, args: list[Any], now: float, ticker_after: float) -> str | None: ...
    def unpark(self, run_id: str, count: int, now: float) -> list[list[Any]]: ...
    def tick(self, run_id: str, token: str, now: float, stale_after: float) -> list[list[Any]] | None: ...
    def ingest_done(self, run_id: str, key: str) -> tuple[bool, int]: ...
    def embed_items(self, run_id: str, start: int, stop: int) -> list[list[Any]]: ...
    def expect_vectors(self, run_id: str, counts: dict[str, int]) -> None: ...
    def put_vectors(self, run_id: str, vectors: list[tuple[str, int, bytes]], check: list[str]) -> list[str]: ...
    def present_vectors(self, run_id: str, slots: list[tuple[str, int]]) -> list[bool]: ...
    def vectors(self, run_id: str, doc_key: str) -> dict[int, bytes]: ...
    def drop_vectors(self, run_id: str, doc_key: str) -> None: ...
    def drop_backlog(self, run_id: str) -> None: ...


class InMemoryLedger:
    """The Stub twin of RedisLedger: the same contract, held in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, dict[str, Any]] = {}

    def _run(self, run_id: str) -> dict[str, Any]:
        return self._runs.setdefault(
            run_id,
            {"info": {}, "state": "running", "total": 0, "walked": False, "outcomes": {}, "reasons": {},
             "skips": {}, "staged": {}, "seen": {}, "prunable": [], "finished": False, "removed": 0,
             "files": 0, "chunks": 0, "error": None, "ingests": None, "ingested": set(), "backlog": [],
             "queued": {}, "positions": {}, "expected": {}, "vectors": {}, "settled": set(), "embedded": 0,
             "batches": set(), "parked": {}, "waiting": {}, "heap": [], "woken": {}, "seq": 0, "ticker": None,
             "complete": set()},
        )

    def start(self, run_id: str, info: dict[str, Any]) -> None:
        """Create the run."""
        with self._lock:
            self._run(run_id)["info"] = dict(info)

    def walked(self, run_id: str, total: int, seen: dict[str, list[str]], prunable: list[str]) -> None:
        """Record the finished walk: how many files it found, which it saw per root, which roots may prune."""
        with self._lock:
            run = self._run(run_id)
            run["seen"] = {root: set(paths) for root, paths in seen.items()}
            run["prunable"] = list(prunable)
            run["total"] = total
            run["walked"] = True

    def record(self, run_id: str, outcomes: list[tuple[str, str, str | None]]) -> None:
        """Record (path, outcome, reason) triples; the first outcome of a path wins."""
        with self._lock:
            run = self._run(run_id)
            for path, outcome, reason in outcomes:
                if path not in run["outcomes"]:
                    run["outcomes"][path] = outcome
                    if reason:
                        run["reasons"][path] = reason

    def skip(self, run_id: str, skips: list[tuple[str, str]]) -> None:
        """Record paths skipped before reading (walk-time), with reasons."""
        with self._lock:
            self._run(run_id)["skips"].update(dict(skips))

    def stage(self, run_id: str, key: str, payload: list[dict[str, Any]]) -> None:
        """Hold a payload for the writer under key."""
        with self._lock:
            self._run(run_id)["staged"][key] = payload

    def staged(self, run_id: str, key: str) -> list[dict[str, Any]] | None:
        """The payload under key, or None if it was already applied."""
        with self._lock:
            return self._run(run_id)["staged"].get(key)

    def unstage(self, run_id: str, key: str) -> None:
        """Drop an applied payload."""
        with self._lock:
            self._run(run_id)["staged"].pop(key, None)

    def seen(self, run_id: str, root: str) -> set[str]:
        """Paths the walk saw under root."""
        with self._lock:
            return set(self._run(run_id)["seen"].get(root, set()))

    def prunable(self, run_id: str) -> list[str]:
        """Roots whose walk was complete and saw at least one file."""
        with self._lock:
            return list(self._run(run_id)["prunable"])

    def claim_finish(self, run_id: str) -> bool:
        """True exactly once per run: the caller runs the finishing step."""
        with self._lock:
            run = self._run(run_id)
            if run["finished"]:
                return False
            run["finished"] = True
            return True

    def finish(self, run_id: str, state: str, removed: int, files: int, chunks: int, error: str | None) -> None:
        """Close the run with its final state and store totals."""
        with self._lock:
            run = self._run(run_id)
            run.update(state=state, removed=removed, files=files, chunks=chunks, error=error)

    def summary(self, run_id: str) -> RunSummary:
        """A snapshot of the run."""
        with self._lock:
            run = self._run(run_id)
            return _summarise(run_id, run)

    def recent(self, limit: int = 10) -> list[RunSummary]:
        """The most recent runs, newest first."""
        with self._lock:
            ids = list(self._runs)[-limit:][::-1]
            return [_summarise(i, self._runs[i]) for i in ids]

    def expect_ingests(self, run_id: str, count: int) -> None:
        """Record how many ingest messages the run sent (the embedding tail flushes after the last)."""
        with self._lock:
            self._run(run_id)["ingests"] = count

    def queue_embeds(self, run_id: str, key: str, items: list[list[Any]], limit: int | None = None) -> list[int] | None:
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
                                len(run["complete"]))

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


def _summarise(run_id: str, run: dict[str, Any]) -> RunSummary:
    outcomes: dict[str, str] = run["outcomes"]
    reasons: dict[str, str] = run["reasons"]
    counts = Counter(outcomes.values())
    skipped = {**run["skips"], **{p: reasons.get(p, "") for p, o in outcomes.items() if o == "skipped"}}
    return RunSummary(
        run_id=run_id,
        state=run["state"],
        total=run["total"],
        walked=run["walked"],
        counts={k: counts.get(k, 0) for k in ("added", "updated", "unchanged", "skipped", "failed")},
        removed=run["removed"],
        files=run["files"],
        chunks=run["chunks"],
        skipped=[{"path": p, "reason": r} for p, r in sorted(skipped.items())],
        failures=[{"path": p, "reason": reasons.get(p, "")} for p, o in sorted(outcomes.items()) if o == "failed"],
        error=run["error"],
        info=dict(run["info"]),
    )
