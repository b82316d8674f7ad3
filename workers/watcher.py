"""`knowledge watch`: keep the index current as files change, through the same runs as `index`.

Watcher starts with a full incremental run, then waits on watchfiles (inotify on Linux) for events
under the configured roots. Events that cannot matter (pipeline/changes.py Scope: the store, dot and
memory directories, excluded globs) are dropped before they wake anything. Events that arrive while
a run is in progress pile up (watchfiles keeps collecting) and become the next batch, so a burst
coalesces into few runs; decide() turns a batch into one run: the changed files and directories as
explicit roots (a file named alone never prunes) plus the stat-confirmed deletes (RunRequest.gone,
removed by the writer), or a full incremental run when the batch is large, a root itself changed,
a root became readable or unreadable, or the watcher lost events (its error, or an overflow).
A root replaced under its name (a new inode, or a delete event on it) is re-armed with a full run; a
failed run keeps its paths pending and is tried again with backoff (backlog(): the gauge
knowledge.watch.backlog); a name that is not UTF-8 is skipped once and re-walks only its directory.

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
from pipeline.paths import file_identity
from workers.engine import Engine
from workers.ledger import RunSummary
from workers.run import DELETED, RunRequest, Targets

DEBOUNCE_MS = 400  # group the events of one save (write, rename, chmod) into one batch at most this long
STEP_MS = 50  # a batch closes after this long with no new event
CHECK_MS = 5_000  # how often an idle watcher looks again at roots that were missing or unreadable
POLL_DELAY_MS = 300  # between polls, only where inotify is not available (WATCHFILES_FORCE_POLLING=1)
BUSY_RETRY_S = 2.0  # another run holds the store's run lock: try the batch again after this long
RETRY_FIRST_S = 1.0  # a failed run's paths are tried again after this long, doubling on each failure
RETRY_MAX_S = 60.0  # ... up to this long between tries
DELETED_CHANGE = 3  # watchfiles' Change.deleted
UNDECODABLE = "Unable to decode path "  # watchfiles' error for a file name that is not UTF-8 (sticky)
NOT_UTF8 = "file name is not UTF-8 (rename it to index it)"


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


def undecodable_dir(error: str) -> str | None:
    """The directory holding the non-UTF-8 name watchfiles' error names (its printable prefix), or None."""
    if not error.startswith(UNDECODABLE + '"') or not error.endswith('" to string'):
        return None
    shown = error[len(UNDECODABLE) + 1:-len('" to string')]  # Rust's escaped form: \xFF, \", \\
    parts = shown.split("/")[:-1]
    bad = next((i for i, part in enumerate(parts) if "\\" in part), len(parts))  # the first escaped name
    directory = "/".join(parts[:bad])
    return directory if directory.startswith("/") else None


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
        self.rewalk: set[str] = set()  # directories to re-walk whole (a root among them is walked alone)
        self.failures = 0  # runs failed in a row: the backoff doubles with each
        self.retry_at = 0.0  # monotonic time before which a failed batch is not tried again
        self.skipped: set[str] = set()  # non-UTF-8 names reported (once each)

    def backlog(self) -> int:
        """Paths waiting for a run (kept across failed runs until one succeeds)."""
        return len(self.pending.paths) + len(self.rewalk) + (1 if self.pending.full_reason is not None else 0)

    def run(self) -> int:
        """Watch until stop is set; return the number of runs made."""
        self.pending.need_full("start")
        state = roots_state(self.scope.roots)
        self._flush()  # the start run, before the watches (a re-arm runs after its watches, in _watch)
        while not self.stop.is_set():
            watchable = [r for r, ok in state.items() if ok]
            for root, ok in state.items():
                if not ok and root not in self._unreadable:
                    self.report("root-unreadable", {"root": root, "retry_s": self.check_ms / 1000})
            self._unreadable = {r for r, ok in state.items() if not ok}
            if not watchable:
                self.stop.wait(self.check_ms / 1000)
                state = self._recheck(state)
                self._flush()
                continue
            state = self._watch(watchable, state)
        return self.runs

    def _watch(self, watchable: list[str], state: dict[str, bool]) -> dict[str, bool]:
        """Consume events until a root's readability changes or a root is replaced, the watcher fails,
        or stop is set.

        RustNotify (the engine under watchfiles.watch) is used directly so that "watching" is said
        only once the watches are in place: a change after that line is never missed. A name that is
        not UTF-8 makes watchfiles' watcher fail for good (its error is sticky), so a new one is armed
        before the old one is closed (no gap), the name is reported skipped, and only its directory
        is re-walked (for the events the failed watcher held back), never a full run of every root.
        """
        polling = os.environ.get("WATCHFILES_FORCE_POLLING", "").lower() not in ("", "0", "false", "no")
        armed = {r: file_identity(r) for r in watchable}
        notify: RustNotify | None = None
        try:
            notify = RustNotify(watchable, False, polling, POLL_DELAY_MS, True, True).__enter__()
            self.report("watching", {"roots": watchable, "debounce_ms": self.debounce_ms})
            self._flush()  # what a re-arm asked for, now that the watches are in place
            while not self.stop.is_set():
                try:
                    raw = notify.watch(self.debounce_ms, self.step_ms, self._timeout_ms(), self.stop)
                except WatchfilesRustInternalError as exc:
                    directory = undecodable_dir(str(exc))
                    if directory is None or self.scope.root_of(directory) is None:
                        raise
                    fresh = RustNotify(watchable, False, polling, POLL_DELAY_MS, True, True).__enter__()
                    notify.__exit__(None, None, None)  # after the new one is armed: no gap
                    notify = fresh
                    self._skip_undecodable(str(exc), directory)
                    self._flush()
                    continue
                if isinstance(raw, str) and raw != "timeout":  # "stop", or "signal" (a handler raised)
                    break
                deleted: set[str] = set()
                if not isinstance(raw, str):
                    self.pending.add(path for _, path in raw if self.scope.relevant(path))
                    deleted = {os.path.normpath(p) for change, p in raw if change == DELETED_CHANGE} & set(armed)
                new_state = self._recheck(state)
                if new_state != state:
                    return new_state
                if self._replaced(armed, deleted):
                    return new_state
                self._flush()
        except (WatchfilesRustInternalError, OSError) as exc:
            self.pending.need_full(f"the file watcher failed ({exc}); events may be lost")
            self.report("watcher-error", {"error": str(exc)})
            self.stop.wait(min(self.check_ms / 1000, 1.0))
        finally:
            if notify is not None:
                notify.__exit__(None, None, None)
        return roots_state(self.scope.roots)

    def _timeout_ms(self) -> int:
        """How long an idle watch waits: the root check's period, or less when a failed batch is due sooner."""
        if not self.pending or self.retry_at <= 0:
            return self.check_ms
        due = int((self.retry_at - time.monotonic()) * 1000) + 1
        return max(self.step_ms, min(self.check_ms, due))

    def _replaced(self, armed: dict[str, tuple[int, int] | None], deleted: set[str]) -> bool:
        """True (and a full run asked for) when a watched root is now another directory (mv, rm -rf and mkdir):
        its watches are on the old one, so they are re-armed on the new one. A new inode says so, and so
        does a delete event on the root itself while it exists again (a re-created directory may reuse
        the inode number)."""
        replaced = [r for r, old in armed.items()
                    if (new := file_identity(r)) is not None and (new != old or r in deleted)]
        for root in replaced:
            self.report("root-replaced", {"root": root})
            self.pending.need_full(f"root replaced: {root}")
        return bool(replaced)

    def _skip_undecodable(self, error: str, directory: str) -> None:
        """Report a non-UTF-8 name once, and re-walk its directory (the walker skips the name with its reason)."""
        name = error[len(UNDECODABLE) + 1:-len('" to string')]
        if name not in self.skipped and len(self.skipped) < 10_000:
            self.skipped.add(name)
            self.report("skipped", {"path": name, "reason": NOT_UTF8})
        self.rewalk.add(directory)

    def _recheck(self, state: dict[str, bool]) -> dict[str, bool]:
        """The roots' state now; a change in it asks for a full run."""
        now = roots_state(self.scope.roots)
        for root, ok in now.items():
            if ok != state.get(root):
                self.pending.need_full(f"root {'readable again' if ok else 'unreadable'}: {root}")
        return now

    def _flush(self) -> None:
        """Apply what has piled up as one run (again while more piled up during it, until stop); a failed
        run keeps its paths pending and is tried again after a backoff (RETRY_FIRST_S doubling to RETRY_MAX_S)."""
        while (self.pending or self.rewalk) and not self.stop.is_set():
            if time.monotonic() < self.retry_at:
                return
            paths, reason = self.pending.take()
            rewalk, self.rewalk = self.rewalk, set()
            batch = decide(paths, self.scope, reason)
            if batch.full is None and rewalk:
                batch = Batch(changed=_outermost([*batch.changed, *rewalk]), gone=batch.gone)
            if not batch:
                return
            outcome = self._apply(batch)
            if outcome == "ok":
                self.failures, self.retry_at = 0, 0.0
                continue
            self.pending.add(paths)
            self.rewalk |= rewalk
            if reason is not None:
                self.pending.need_full(reason)
            if outcome == "busy":
                self.retry_at = time.monotonic() + BUSY_RETRY_S
            return

    def _apply(self, batch: Batch) -> str:
        """One run for batch: "ok", "busy" (another run holds the store's run lock) or "failed" (the run
        failed: its paths stay pending and the next try waits a backoff)."""
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
            return "busy"
        except KnowledgeError as exc:  # the run failed: its paths stay pending, tried again after a backoff
            self.runs += 1
            self.failures += 1
            wait = min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** min(self.failures - 1, 16))
            self.retry_at = time.monotonic() + wait
            fields = Applied(batch, None, time.monotonic() - started, str(exc)).fields()
            pending = len(batch.changed) + len(batch.gone) if batch.full is None else 1
            fields.update(pending=pending, retry_s=wait)
            self.report("run", fields)
            return "failed"
        self.runs += 1
        fields = Applied(batch, summary, time.monotonic() - started).fields()
        self.report("run", fields)
        return "ok"


def _outermost(paths: list[str]) -> tuple[str, ...]:
    """Sorted paths without those inside another of them (a re-walked directory covers its files)."""
    out: list[str] = []
    for path in sorted(set(paths)):
        if out and path.startswith(out[-1].rstrip("/") + "/"):
            continue
        out.append(path)
    return tuple(out)


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
