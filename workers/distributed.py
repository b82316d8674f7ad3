"""`knowledge index` with a broker: take the run lock, walk and enqueue onto Redis, follow the run.

The CLI process only walks and enqueues; `knowledge worker` processes ingest and one
`knowledge writer` applies. The run lock (a Redis key naming the run, set NX with a TTL that this
follower and every processed message refresh, deleted when the writer closes the run) refuses a
second, overlapping run on the same store with exit code 75.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import redis

from config.errors import BrokerError, RunInProgress
from config.observability import configure_logging, configure_tracing, tracer
from config.settings import Settings
from workers.actors import declare_actors
from workers.broker import connect_broker, namespace, redacted
from workers.ledger import RunSummary
from workers.redis_ledger import LOCK_TTL_MS, RedisLedger
from workers.run import Progress, RunRequest, follow, new_run_id, plan_and_enqueue

# How long the follower keeps retrying a lost Redis before it gives up on the run.
RECONNECT_GRACE_S = 5.0
# After this long without a file being accounted for, say which processes must be running.
STALL_WARNING_S = 30.0


def _say(text: str, err: bool = False) -> None:
    """One line to stdout (or stderr): workers/ stays free of the CLI library."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def open_ledger(settings: Settings) -> tuple[Any, RedisLedger]:
    """Connect to the configured broker (BrokerError naming the URL) and its run ledger."""
    broker = connect_broker(settings)
    return broker, RedisLedger(broker.client, namespace(settings))


class _Watch:
    """Called between polls: refresh the run lock and warn once when the run stalls."""

    def __init__(self, ledger: RedisLedger, run_id: str, stall_after: float = STALL_WARNING_S) -> None:
        self.ledger = ledger
        self.run_id = run_id
        self.stall_after = stall_after
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
            self.ledger.refresh_run_lock(self.run_id, LOCK_TTL_MS)
        if not self._warned and now - self._last_change > self.stall_after:
            self._warned = True
            missing = missing_processes(self.ledger)
            reason = (f"no {' and no '.join(missing)} is running for this store" if missing
                      else "the worker and writer processes are alive but busy or stuck")
            _say(f"knowledge: no progress for {self.stall_after:.0f} s on run {self.run_id}: {reason}", err=True)


def missing_processes(ledger: RedisLedger) -> list[str]:
    """The roles (`knowledge worker`, `knowledge writer`) with no live process for this store."""
    return [f"`knowledge {role}`" for role in ("worker", "writer") if not ledger.alive(role)]


def _note_missing(ledger: RedisLedger, run_id: str) -> None:
    """Say at once when the run cannot progress until a process starts."""
    missing = missing_processes(ledger)
    if missing:
        _say(f"knowledge: note: no {' and no '.join(missing)} is running for this store; run {run_id} "
             "waits in Redis until one starts (scripts/run-local.sh, or docker compose up)", err=True)


def _follow_with_grace(ledger: RedisLedger, run_id: str, view: Progress, watch: _Watch, url: str) -> RunSummary:
    """follow(), riding out a Redis blip of up to RECONNECT_GRACE_S; BrokerError past that."""
    lost_since: float | None = None

    def progress(summary: RunSummary) -> None:
        watch.progress(summary)
        view(summary)

    while True:
        try:
            return follow(ledger, run_id, progress, poll=0.1, alive=watch)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            now = time.monotonic()
            lost_since = lost_since if lost_since is not None else now
            if now - lost_since > RECONNECT_GRACE_S:
                raise BrokerError(
                    f"lost the broker at {url} during run {run_id}: {exc}; the run did not finish. "
                    "Re-run `knowledge index` once Redis is back: it converges on what was written"
                ) from None
            time.sleep(0.5)


def run_distributed(settings: Settings, request: RunRequest, view: Progress, detach: bool,
                    as_json: bool) -> RunSummary | None:
    """Run an index through the broker; None when detached (the run id was printed)."""
    configure_logging("WARNING")
    configure_tracing("knowledge-cli")
    url = redacted(settings.broker.url)  # type: ignore[union-attr]
    broker, ledger = open_ledger(settings)
    try:
        actors = declare_actors(broker)
        run_id = new_run_id()
        try:
            holder = ledger.acquire_run_lock(run_id, LOCK_TTL_MS)
        except redis.RedisError as exc:
            raise BrokerError(f"broker at {url} failed: {exc}") from None
        if holder is not None:
            raise RunInProgress(
                f"run {holder} is in progress for the store {settings.db_path}; wait for it to finish "
                "(`knowledge runs` shows it) and run `knowledge index` again"
            )
        watch = _Watch(ledger, run_id)
        try:
            with tracer().start_as_current_span(
                "index run", attributes={"knowledge.run_id": run_id, "knowledge.mode": "distributed",
                                         "knowledge.reindex": request.reindex},
            ) as span:
                with tracer().start_as_current_span("walk") as walk_span:
                    first = plan_and_enqueue(settings, ledger, actors, request, run_id)
                    walk_span.set_attribute("knowledge.files", first.total)
                    walk_span.set_attribute("knowledge.to_read", first.total - first.accounted)
                _note_missing(ledger, run_id)
                if detach:
                    _print_detached(first, as_json)
                    return None
                summary = _follow_with_grace(ledger, run_id, view, watch, url)
                span.set_attribute("knowledge.state", summary.state)
                for name, count in summary.counts.items():
                    span.set_attribute(f"knowledge.{name}", count)
                return summary
        except redis.RedisError as exc:
            raise BrokerError(
                f"lost the broker at {url} during run {run_id}: {exc}; re-run `knowledge index` once Redis is back"
            ) from None
        except KeyboardInterrupt:
            _say(f"\nstopped following run {run_id}; it continues in the workers (`knowledge runs`)", err=True)
            raise
        except BaseException:
            _release_quietly(ledger, run_id)
            raise
    finally:
        _close_quietly(broker)


def _print_detached(summary: RunSummary, as_json: bool) -> None:
    to_read = summary.total - summary.accounted
    if as_json:
        _say(json.dumps({"run_id": summary.run_id, "state": "running", "files": summary.total, "to_read": to_read}))
    else:
        _say(f"run {summary.run_id} enqueued: {summary.total} files, {to_read} to read; "
             "`knowledge runs` follows it")


def _release_quietly(ledger: RedisLedger, run_id: str) -> None:
    """A run that failed before anything was enqueued must not hold the lock."""
    try:
        summary = ledger.summary(run_id)
        if not summary.walked:
            ledger.fail(run_id, "the walk failed before anything was enqueued")
            ledger.release_run_lock(run_id)
    except redis.RedisError:
        pass


def _close_quietly(broker: Any) -> None:
    try:
        broker.close()
        broker.client.close()
    except Exception:  # noqa: BLE001 - closing is best effort
        pass


def recent_runs(settings: Settings, limit: int = 10) -> tuple[list[RunSummary], str | None, dict[str, list[str]]]:
    """The store's recent runs (newest first), the run holding the run lock, and the live processes by role."""
    broker, ledger = open_ledger(settings)
    try:
        alive = {role: ledger.alive(role) for role in ("worker", "writer")}
        return ledger.recent(limit), ledger.run_lock_holder(), alive
    except redis.RedisError as exc:
        raise BrokerError(f"broker at {redacted(settings.broker.url)} failed: {exc}") from None  # type: ignore[union-attr]
    finally:
        _close_quietly(broker)

