"""The run ledger held in this process (the embedded default): the twin of RedisLedger."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from workers.ledger.memory_backlog import MemoryBacklog
from workers.ledger.memory_duties import MemoryPresence, MemoryReplies, MemoryRunLock
from workers.ledger.protocol import OUTCOME_NAMES, Outcome, RunSummary, Wire


@dataclass
class RunState:
    """One run as InMemoryLedger holds it."""

    info: dict[str, Any] = field(default_factory=dict)
    state: str = "running"
    total: int = 0
    walked: bool = False
    outcomes: dict[str, str] = field(default_factory=dict)  # path -> first recorded outcome
    walk_unchanged: int = 0  # files the walk found unchanged by stat (counted, never listed)
    reasons: dict[str, str] = field(default_factory=dict)  # path -> reason of a failure or skip
    skips: dict[str, str] = field(default_factory=dict)  # path -> reason the walk skipped it
    staged: dict[str, list[Wire]] = field(default_factory=dict)
    removals: list[str] = field(default_factory=list)  # stored paths the walk's complete roots no longer hold
    finished: bool = False
    removed: int = 0
    files: int = 0
    chunks: int = 0
    error: str | None = None

    def summary(self, run_id: str) -> RunSummary:
        """A snapshot of the run."""
        counts = Counter(self.outcomes.values())
        counts["unchanged"] += self.walk_unchanged
        skipped = {**self.skips,
                   **{p: self.reasons.get(p, "") for p, o in self.outcomes.items() if o == "skipped"}}
        return RunSummary(
            run_id=run_id,
            state=self.state,
            total=self.total,
            walked=self.walked,
            counts={k: counts.get(k, 0) for k in OUTCOME_NAMES},
            removed=self.removed,
            files=self.files,
            chunks=self.chunks,
            skipped=[{"path": p, "reason": r} for p, r in sorted(skipped.items())],
            failures=[{"path": p, "reason": self.reasons.get(p, "")}
                      for p, o in sorted(self.outcomes.items()) if o == "failed"],
            error=self.error,
            info=dict(self.info),
        )


class InMemoryLedger:
    """The run ledger of the embedded default: the same contract as RedisLedger, held in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, RunState] = {}
        self.backlog = MemoryBacklog()
        self.run_lock = MemoryRunLock()
        self.presence = MemoryPresence()
        self.replies = MemoryReplies()

    def _run(self, run_id: str) -> RunState:
        return self._runs.setdefault(run_id, RunState())

    def start(self, run_id: str, info: dict[str, Any]) -> None:
        """Create the run."""
        with self._lock:
            self._run(run_id).info = dict(info)

    def walked(self, run_id: str, total: int, unchanged: int, removals: list[str]) -> None:
        """Record the finished walk: how many files it found, how many of them are unchanged by stat, and
        the stored paths to remove when the run finishes."""
        with self._lock:
            run = self._run(run_id)
            run.walk_unchanged += unchanged
            run.removals = list(removals)
            run.total = total
            run.walked = True

    def record(self, run_id: str, outcomes: list[Outcome]) -> None:
        """Record (path, outcome, reason) triples; the first outcome of a path wins."""
        with self._lock:
            run = self._run(run_id)
            for path, outcome, reason in outcomes:
                if path not in run.outcomes:
                    run.outcomes[path] = outcome
                    if reason:
                        run.reasons[path] = reason

    def skip(self, run_id: str, skips: list[tuple[str, str]]) -> None:
        """Record paths skipped before reading (walk-time), with reasons."""
        with self._lock:
            self._run(run_id).skips.update(dict(skips))

    def stage(self, run_id: str, key: str, payload: list[Wire]) -> None:
        """Hold a payload for the writer under key."""
        with self._lock:
            self._run(run_id).staged[key] = payload

    def staged(self, run_id: str, key: str) -> list[Wire] | None:
        """The payload under key, or None if it was already applied."""
        with self._lock:
            return self._run(run_id).staged.get(key)

    def unstage(self, run_id: str, key: str) -> None:
        """Drop an applied payload."""
        with self._lock:
            self._run(run_id).staged.pop(key, None)

    def staged_count(self, run_id: str) -> int:
        """How many payloads of the run are staged and not applied yet."""
        with self._lock:
            return len(self._run(run_id).staged)

    def removals(self, run_id: str) -> list[str]:
        """The stored paths the walk's complete roots no longer hold."""
        with self._lock:
            return list(self._run(run_id).removals)

    def claim_finish(self, run_id: str) -> bool:
        """True exactly once for a running run: the caller runs the finishing step."""
        with self._lock:
            run = self._run(run_id)
            if run.finished or run.state != "running":
                return False
            run.finished = True
            return True

    def finish(self, run_id: str, state: str, removed: int, files: int, chunks: int, error: str | None) -> None:
        """Close the run with its final state and store totals, and release its run lock."""
        with self._lock:
            run = self._run(run_id)
            run.state, run.removed, run.files, run.chunks, run.error = state, removed, files, chunks, error
        self.run_lock.release(run_id)

    def fail(self, run_id: str, error: str) -> None:
        """Mark a still-running run failed; a later finish of it is refused."""
        with self._lock:
            run = self._run(run_id)
            if run.state == "running":
                run.state, run.error, run.finished = "failed", error, True

    def summary(self, run_id: str) -> RunSummary:
        """A snapshot of the run."""
        with self._lock:
            return self._run(run_id).summary(run_id)

    def recent(self, limit: int = 10) -> list[RunSummary]:
        """The most recent runs, newest first."""
        with self._lock:
            ids = list(self._runs)[-limit:][::-1]
            return [self._runs[i].summary(i) for i in ids]
