"""`knowledge watch`: keep the index current as files change, through the same runs as `index`.

Watcher starts with a full incremental run, then waits on watchfiles (inotify on Linux) for events
under the configured roots. Events that cannot matter (pipeline/changes.py Scope: the store, dot and
memory directories, excluded globs) are dropped before they wake anything. Events that arrive while
a run is in progress pile up (watchfiles keeps collecting) and become the next batch, so a burst
coalesces into few runs; decide() turns a batch into one run: the changed files and directories as
explicit roots (a file named alone never prunes) plus the stat-confirmed deletes (RunRequest.gone,
removed by the writer), or a full incremental run when the batch is large, a root itself changed,
a root became readable or unreadable, or the watcher lost events (its error, or an overflow).

A run is applied by an Apply callable: EngineApply hands it to the engine (workers/engine.py) held
for the watcher's life, which runs it in this process (holding the write lock) or enqueues it for
the workers and the writer and follows it. One watcher per store: watch_lock() holds
<store_dir>/watch.lock in either deployment. Nothing here prints: each event is handed to a Report
callable (cli/watch.py renders lines on a terminal, structlog JSON otherwise).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from watchfiles._rust_notify import RustNotify, WatchfilesRustInternalError

from config.errors import KnowledgeError, RunInProgress, UsageError
from config.settings import Settings
from pipeline.changes import Batch, Pending, Scope, decide
from pipeline.lock import WATCH_LOCK_NAME, WriteLock
from workers.engine import Engine
from workers.ledger import RunSummary
from workers.run import DELETED, RunRequest, Targets

DEBOUNCE_MS = 400  # group the events of one save (write, rename, chmod) into one batch at most this long
STEP_MS = 50  # a batch closes after this long with no new event
CHECK_MS = 5_000  # how often an idle watcher looks again at roots that were missing or unreadable
POLL_DELAY_MS = 300  # between polls, only where inotify is not available (WATCHFILES_FORCE_POLLING=1)
BUSY_RETRY_S = 2.0  # another run holds the store's run lock: try the batch again after this long


class Apply(Protocol):
    """Run one incremental index run and return its summary."""

    def __call__(self, request: RunRequest, targets: Targets) -> RunSummary: ...


@dataclass(frozen=True)
class Applied:
    """One run the watcher made: why, what it named, and its summary (None when it failed to run)."""

    batch: Batch
    summary: RunSummary | None
    seconds: float
    error: str | None = None

    @property
    def deleted(self) -> int:
        """Documents removed because their file was gone."""
        if self.summary is None:
            return 0
        return sum(1 for s in self.summary.skipped if s.get("reason") == DELETED)

    def fields(self) -> dict[str, object]:
        """The structured form of this run for a log line."""
        out: dict[str, object] = {"seconds": round(self.seconds, 3)}
        if self.batch.full is not None:
            out["full"] = self.batch.full
        else:
            out["changed"] = len(self.batch.changed)
            out["gone"] = len(self.batch.gone)
        if self.summary is not None:
            data = self.summary.to_json()
            out.update(run_id=self.summary.run_id, state=self.summary.state, added=data["added"],
                       updated=data["updated"], unchanged=data["unchanged"],
                       removed=data["removed"] + self.deleted, failed=data["failed"])
        if self.error is not None:
            out["error"] = self.error
        return out


Report = Callable[[str, dict[str, object]], None]


def roots_state(roots: tuple[str, ...]) -> dict[str, bool]:
    """Each root, and whether it can be watched now (exists and is readable)."""
    return {r: os.path.exists(r) and os.access(r, os.R_OK | (os.X_OK if os.path.isdir(r) else 0)) for r in roots}


@dataclass
class Watcher:
    """Watch settings' roots and apply their changes with apply until stop is set."""

    settings: Settings
    apply: Apply
    report: Report
    stop: threading.Event = field(default_factory=threading.Event)
    debounce_ms: int = DEBOUNCE_MS
    step_ms: int = STEP_MS
    check_ms: int = CHECK_MS
    runs: int = 0

    def __post_init__(self) -> None:
        self.full_targets = RunRequest().targets(self.settings)
        if not self.full_targets.roots:
            raise UsageError("nothing to watch: list directories under knowledge.paths")
        self.scope = Scope.of(self.full_targets.roots, self.settings.store_dir, self.settings.include,
                              self.settings.exclude)
        self.pending = Pending()
        self._unreadable: set[str] = set()  # roots reported missing or unreadable (once each)

    def run(self) -> int:
        """Watch until stop is set; return the number of runs made."""
        self.pending.need_full("start")
        state = roots_state(self.scope.roots)
        while not self.stop.is_set():
            self._flush()
            if self.stop.is_set():
                break
            watchable = [r for r, ok in state.items() if ok]
            for root, ok in state.items():
                if not ok and root not in self._unreadable:
                    self.report("root-unreadable", {"root": root, "retry_s": self.check_ms / 1000})
            self._unreadable = {r for r, ok in state.items() if not ok}
            if not watchable:
                self.stop.wait(self.check_ms / 1000)
                state = self._recheck(state)
                continue
            state = self._watch(watchable, state)
        return self.runs

    def _watch(self, watchable: list[str], state: dict[str, bool]) -> dict[str, bool]:
        """Consume events until a root's readability changes, the watcher fails, or stop is set.

        RustNotify (the engine under watchfiles.watch) is used directly so that "watching" is said
        only once the watches are in place: a change after that line is never missed.
        """
        polling = os.environ.get("WATCHFILES_FORCE_POLLING", "").lower() not in ("", "0", "false", "no")
        try:
            with RustNotify(watchable, False, polling, POLL_DELAY_MS, True, True) as notify:
                self.report("watching", {"roots": watchable, "debounce_ms": self.debounce_ms})
                while not self.stop.is_set():
                    raw = notify.watch(self.debounce_ms, self.step_ms, self.check_ms, self.stop)
                    if isinstance(raw, str) and raw != "timeout":  # "stop", or "signal" (a handler raised)
                        break
                    if isinstance(raw, str):  # idle: look at the roots again, retry a batch left waiting
                        new_state = self._recheck(state)
                        if new_state != state:
                            return new_state
                        self._flush()
                        continue
                    self.pending.add(path for _, path in raw if self.scope.relevant(path))
                    self._flush()
        except (WatchfilesRustInternalError, OSError) as exc:
            self.pending.need_full(f"the file watcher failed ({exc}); events may be lost")
            self.report("watcher-error", {"error": str(exc)})
            self.stop.wait(min(self.check_ms / 1000, 1.0))
        return roots_state(self.scope.roots)

    def _recheck(self, state: dict[str, bool]) -> dict[str, bool]:
        """The roots' state now; a change in it asks for a full run."""
        now = roots_state(self.scope.roots)
        for root, ok in now.items():
            if ok != state.get(root):
                self.pending.need_full(f"root {'readable again' if ok else 'unreadable'}: {root}")
        return now

    def _flush(self) -> None:
        """Apply what has piled up as one run (again while more piled up during it, until stop)."""
        while self.pending and not self.stop.is_set():
            paths, reason = self.pending.take()
            batch = decide(paths, self.scope, reason)
            if not batch:
                return
            if not self._apply(batch):
                self.pending.add(paths)
                if reason is not None:
                    self.pending.need_full(reason)
                self.stop.wait(BUSY_RETRY_S)
                return

    def _apply(self, batch: Batch) -> bool:
        """One run for batch; False when the store's run lock is held by another run (try again later)."""
        if batch.full is not None:
            request, targets = RunRequest(), self.full_targets
        else:
            request = RunRequest(paths=batch.changed, gone=batch.gone)
            targets = Targets(list(batch.changed), True, [])
        started = time.monotonic()
        try:
            summary = self.apply(request, targets)
        except RunInProgress as exc:
            self.report("busy", {"error": str(exc), "retry_s": BUSY_RETRY_S})
            return False
        except KnowledgeError as exc:  # the run failed; the next change (or start) converges
            self.runs += 1
            self.report("run", Applied(batch, None, time.monotonic() - started, str(exc)).fields())
            return True
        self.runs += 1
        self.report("run", Applied(batch, summary, time.monotonic() - started).fields())
        return True


class EngineApply:
    """Each watched run through the engine held for the watcher's life, followed to its end."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def __call__(self, request: RunRequest, targets: Targets) -> RunSummary:
        return self.engine.run(request, None, targets)


@contextmanager
def watch_lock(settings: Settings) -> Iterator[None]:
    """<store_dir>/watch.lock held while watching: a second watcher is refused (StoreBusy, exit 75)."""
    lock = WriteLock(settings.store_dir, WATCH_LOCK_NAME, role="watcher")
    lock.acquire("knowledge watch")
    try:
        yield
    finally:
        lock.release()
