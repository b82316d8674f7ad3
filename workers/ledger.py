"""The run ledger: per-run outcomes, seen paths, failures, staged payloads and state.

Every write is idempotent: an outcome is recorded per path (first write wins), so a message
redelivered after a worker was killed repeats harmlessly; counters are derived from the recorded
outcomes, never counted down. InMemoryLedger serves the embedded default; RedisLedger
(workers/redis_ledger.py) holds the same data under expiring keys for the distributed shape.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from workers.backlog import BacklogState, MemoryBacklog

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


class InMemoryLedger(MemoryBacklog):
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
