"""`knowledge index` with a broker: take the run lock, walk and enqueue onto Redis, follow the run.

The CLI process only walks and enqueues; `knowledge worker` processes ingest and one
`knowledge writer` applies. The run lock (a Redis key naming the run, set NX with a TTL that this
follower and every processed message refresh, deleted when the writer closes the run) refuses a
second, overlapping run on the same store with exit code 75.

Nothing here prints: what the operator should hear while the run goes on (a missing process, a
stall) is handed to a `notes` callback, and the result is returned (cli/index.py prints both).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass

import redis
from dramatiq.brokers.redis import RedisBroker

from config.errors import BrokerError, KnowledgeError, RunInProgress
from config.observability import tracer
from config.settings import Settings
from pipeline.paths import under
from workers.actors import declare_actors
from workers.broker import broker_url, connect_broker, namespace, redacted
from workers.ledger import Presence, RunSummary
from workers.ledger.redis_ledger import RedisLedger
from workers.ledger.shapes import LOCK_TTL_MS
from workers.run import (
    Progress,
    RunRequest,
    Targets,
    follow,
    new_run_id,
    plan_and_enqueue,
)

# How long the follower keeps retrying a lost Redis before it gives up on the run.
RECONNECT_GRACE_S = 5.0
# After this long without a file being accounted for, say which processes must be running.
STALL_WARNING_S = 30.0
# After this long with no progress and no worker or writer alive, stop following (the run stays queued).
NO_PROCESS_GRACE_S = 30.0
ROLES = ("worker", "writer")

Notes = Callable[[str], None]


@dataclass(frozen=True)
class Enqueued:
    """A detached run: walked and enqueued, not followed."""

    run_id: str
    files: int
    to_read: int

    def to_json(self) -> dict[str, object]:
        """The object `knowledge index --detach --json` prints."""
        return {"run_id": self.run_id, "state": "running", "files": self.files, "to_read": self.to_read}


def open_ledger(settings: Settings) -> tuple[RedisBroker, RedisLedger]:
    """Connect to the configured broker (BrokerError naming the URL) and its run ledger."""
    broker = connect_broker(settings)
    return broker, RedisLedger(broker.client, namespace(settings))


def missing_processes(presence: Presence) -> list[str]:
    """The roles (`knowledge worker`, `knowledge writer`) with no live process for this store."""
    return [f"`knowledge {role}`" for role in ROLES if not presence.alive(role)]


class NoProcesses(KnowledgeError):
    """A followed run cannot progress: no worker or no writer is alive for the store."""


class _Watch:
    """Called between polls: refresh the run lock, note once when the run stalls, and give up
    following (NoProcesses) when it has made no progress for `grace` seconds with a role missing."""

    def __init__(self, ledger: RedisLedger, run_id: str, notes: Notes, stall_after: float = STALL_WARNING_S,
                 grace: float = NO_PROCESS_GRACE_S) -> None:
        self.ledger = ledger
        self.run_id = run_id
        self.notes = notes
        self.stall_after = stall_after
        self.grace = grace
        self._last_refresh = 0.0
        self._last_count = -1
        self._last_change = time.monotonic()
        self._warned = False

    def progress(self, summary: RunSummary) -> None:
        """Note the latest count of accounted files."""
        if summary.accounted != self._last_count:
            self._last_count = summary.accounted
            self._last_change = time.monotonic()

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self._last_refresh >= 2.0:
            self._last_refresh = now
            self.ledger.run_lock.refresh(self.run_id, LOCK_TTL_MS)
        if now - self._last_change > self.grace:
            missing = missing_processes(self.ledger.presence)
            if missing:
                raise NoProcesses(
                    f"no progress for {self.grace:.0f} s on run {self.run_id}: no {' and no '.join(missing)} is "
                    "running for this store; start them (scripts/run-local.sh, or docker compose up) and the "
                    "queued run completes (`knowledge runs` shows it)"
                )
        if not self._warned and now - self._last_change > self.stall_after:
            self._warned = True
            missing = missing_processes(self.ledger.presence)
            reason = (f"no {' and no '.join(missing)} is running for this store" if missing
                      else "the worker and writer processes are alive but busy or stuck")
            self.notes(f"knowledge: no progress for {self.stall_after:.0f} s on run {self.run_id}: {reason}")


def _note_missing(ledger: RedisLedger, run_id: str, notes: Notes, detach: bool,
                  grace: float = NO_PROCESS_GRACE_S) -> None:
    """Say at once (before the walk: presence is known from the ledger) when the run cannot progress
    until a process starts, and how to start it."""
    missing = missing_processes(ledger.presence)
    if not missing:
        return
    start = " and ".join(missing)
    then = ("" if detach else f"; this command waits for them and stops following after {grace:.0f} s "
            "without progress (the run stays queued)")
    notes(f"knowledge: note: no {' and no '.join(missing)} is running for this store, so run {run_id} waits "
          f"in Redis until one starts: start {'it' if len(missing) == 1 else 'them'} with {start} (same "
          f"knowledge.yaml, another terminal or host), or scripts/run-local.sh, or docker compose up{then}")


def _follow_with_grace(ledger: RedisLedger, run_id: str, view: Progress, watch: _Watch, url: str,
                       timeout: float | None) -> RunSummary:
    """follow(), riding out a Redis blip of up to RECONNECT_GRACE_S; BrokerError past that."""
    lost_since: float | None = None

    def progress(summary: RunSummary) -> None:
        watch.progress(summary)
        view(summary)

    while True:
        try:
            return follow(ledger, run_id, progress, poll=0.1, timeout=timeout, alive=watch)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            now = time.monotonic()
            lost_since = lost_since if lost_since is not None else now
            if now - lost_since > RECONNECT_GRACE_S:
                raise BrokerError(
                    f"lost the broker at {url} during run {run_id}: {exc}; the run did not finish. "
                    "Re-run `knowledge index` once Redis is back: it converges on what was written"
                ) from None
            time.sleep(0.5)


def _take_run_lock(settings: Settings, ledger: RedisLedger, run_id: str, url: str) -> None:
    """Take the store's run lock for run_id; RunInProgress while another run holds it, BrokerError on Redis."""
    try:
        holder = ledger.run_lock.acquire(run_id, LOCK_TTL_MS)
    except redis.RedisError as exc:
        if out_of_memory(exc):
            raise full_broker(ledger, url, exc, "taking the run lock") from None
        raise BrokerError(f"broker at {url} failed: {exc}") from None
    if holder is not None:
        raise RunInProgress(
            f"run {holder} is in progress for the store {settings.db_path}; wait for it to finish "
            "(`knowledge runs` shows it) and run `knowledge index` again"
        )


def run_distributed(settings: Settings, request: RunRequest, targets: Targets, view: Progress, notes: Notes,
                    detach: bool, timeout: float | None = None, grace: float = NO_PROCESS_GRACE_S,
                    ) -> RunSummary | Enqueued:
    """Run an index through the broker: its final summary, or what was enqueued when detached.

    Following stops with NoProcesses after `grace` seconds without progress while no worker or
    writer is alive, and with TimeoutError after `timeout` seconds; the run stays queued either way.
    """
    url = redacted(broker_url(settings))
    broker, ledger = open_ledger(settings)
    try:
        actors = declare_actors(broker)
        run_id = new_run_id()
        _take_run_lock(settings, ledger, run_id, url)
        watch = _Watch(ledger, run_id, notes, grace=grace)
        _note_missing(ledger, run_id, notes, detach, grace)
        try:
            with tracer().start_as_current_span(
                "index run", attributes={"knowledge.run_id": run_id, "knowledge.mode": "distributed",
                                         "knowledge.reindex": request.reindex},
            ) as span:
                with tracer().start_as_current_span("walk") as walk_span:
                    first = plan_and_enqueue(settings, ledger, actors, request, targets, run_id)
                    walk_span.set_attribute("knowledge.files", first.total)
                    walk_span.set_attribute("knowledge.to_read", first.total - first.accounted)
                if detach:
                    return Enqueued(run_id, first.total, first.total - first.accounted)
                summary = _follow_with_grace(ledger, run_id, view, watch, url, timeout)
                span.set_attribute("knowledge.state", summary.state)
                for name, count in summary.counts.items():
                    span.set_attribute(f"knowledge.{name}", count)
                return summary
        except redis.RedisError as exc:
            if out_of_memory(exc):  # Redis is up and full: say so, and free the run lock at once
                _stop_quietly(ledger, run_id, f"Redis is out of memory: {exc}")
                raise full_broker(ledger, url, exc, f"during run {run_id}; the run did not finish") from None
            raise BrokerError(
                f"lost the broker at {url} during run {run_id}: {exc}; re-run `knowledge index` once Redis is back"
            ) from None
        except KeyboardInterrupt:
            notes(f"\nstopped following run {run_id}; it continues in the workers (`knowledge runs`)")
            raise
        except TimeoutError as exc:
            raise KnowledgeError(f"{exc}; stopped following it, and it continues in the workers (`knowledge runs`)"
                                 ) from None
        except BaseException:
            _release_quietly(ledger, run_id)
            raise
    finally:
        _close_quietly(broker)


def out_of_memory(exc: BaseException) -> bool:
    """True when Redis refused a command because it is at maxmemory (an OOM error, not a lost connection)."""
    return isinstance(exc, redis.exceptions.OutOfMemoryError) or "used memory > 'maxmemory'" in str(exc)


def full_broker(ledger: RedisLedger, url: str, exc: BaseException, during: str) -> BrokerError:
    """The one line for a Redis at maxmemory: its memory, its limit and its eviction policy, and the way out."""
    state = ""
    try:
        info = ledger.client.info("memory")
        state = (f" (used {info.get('used_memory_human', '?')} of maxmemory {info.get('maxmemory_human', '?')}, "
                 f"policy {info.get('maxmemory_policy', '?')})")
    except redis.RedisError:
        pass
    return BrokerError(
        f"Redis at {url} is up but out of memory{state} and refused a write {during}: {exc} Raise its maxmemory "
        "or free memory (an evicting policy would drop queued work; keep noeviction), then re-run `knowledge index`"
    )


def _stop_quietly(ledger: RedisLedger, run_id: str, error: str) -> None:
    """Mark the run failed and release its lock, as far as a full Redis allows (DEL is allowed, HSET may not be)."""
    with suppress(redis.RedisError):
        ledger.fail(run_id, error)
    with suppress(redis.RedisError):
        ledger.run_lock.release(run_id)


def _release_quietly(ledger: RedisLedger, run_id: str) -> None:
    """A run that failed before anything was enqueued must not hold the lock."""
    try:
        summary = ledger.summary(run_id)
        if not summary.walked:
            ledger.fail(run_id, "the walk failed before anything was enqueued")
            ledger.run_lock.release(run_id)
    except redis.RedisError:
        pass


def _close_quietly(broker: RedisBroker) -> None:
    try:
        broker.close()
        broker.client.close()
    except Exception:  # noqa: BLE001 - closing is best effort
        pass


MAX_RUNS_READ = 5000  # runs read to find those of a path (the broker keeps a week of them)


def walked(root: str, path: str) -> bool:
    """Whether a run over root walked path, or a part of it: root is path, beneath it, or above it."""
    directory = path.rstrip("/") or "/"
    return under(root, directory) or under(directory, root.rstrip("/") or "/")


def recent_runs(settings: Settings, limit: int = 10, offset: int = 0, paths: Sequence[str] = (),
                ) -> tuple[list[RunSummary], str | None, dict[str, list[str]]]:
    """The store's recent runs (newest first; offset skipped, at most limit, only those that walked one of paths
    when given: a root at, beneath or above it), the run holding the run lock, and the live processes by role."""
    broker, ledger = open_ledger(settings)
    try:
        alive = {role: ledger.presence.alive(role) for role in ROLES}
        held = ledger.recent(MAX_RUNS_READ if paths else offset + limit)
        if paths:
            held = [r for r in held if any(walked(root, p) for root in r.info.get("roots", []) for p in paths)]
        return held[offset:offset + limit], ledger.run_lock.holder(), alive
    except redis.RedisError as exc:
        raise BrokerError(f"broker at {redacted(broker_url(settings))} failed: {exc}") from None
    finally:
        _close_quietly(broker)
