"""How the embeddings server keeps up, in this process: the pace of the embed actor and a run's health.

Pace caps the embed batches in flight (each is one request at a time: halving is sequential) at
`embeddings.concurrency`, and backs off when latency climbs: a request that timed out or took
more than half the timeout lowers the cap by one (down to 1); SPEEDUP_AFTER quick requests in a
row (under a quarter of the timeout) raise it by one again. A serialising server (a CPU model
answering one request at a time) then gets one request at a time instead of two that both time out.
RunHealth counts what a run's embedding did in this process (the in-process engine's embed actor
runs in the CLI process, so `knowledge index` shows it as the run goes and in its summary).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

SLOW_SHARE = 0.5  # of the timeout: a request slower than this is latency climbing
QUICK_SHARE = 0.25  # of the timeout: a request quicker than this is a sign to speed up
SPEEDUP_AFTER = 8
TIMEOUT_SHARE = 0.9  # a failed request that lasted this share of the timeout timed out
_KEPT_RUNS = 32


@dataclass
class RunHealth:
    """What one run's embedding did in this process."""

    queued: int = 0  # sections routed to the backlog here
    embedded: int = 0  # inputs answered with a vector
    requests: int = 0
    timeouts: int = 0
    halvings: int = 0  # batches split after a failure
    retried: int = 0  # inputs sent again in smaller batches (the sizes of the split batches)
    last_inputs: int = 0
    last_seconds: float = 0.0
    limit: int = 0  # the pace's cap after the last request
    ceiling: int = 0  # embeddings.concurrency

    def slow(self, timeout: float) -> bool:
        """Whether the server is struggling: a timeout seen, or the last request slower than half the timeout."""
        return self.timeouts > 0 or self.last_seconds > SLOW_SHARE * timeout

    def line(self, timeout: float) -> str:
        """The embedding part of a progress line."""
        done = f"embedded {self.embedded}/{self.queued} sections"
        if not self.slow(timeout):
            return done
        state = f"embeddings slow: {self.last_inputs} inputs in {self.last_seconds:.0f} s"
        if self.timeouts:
            state += f"; {self.timeouts} timeout{'' if self.timeouts == 1 else 's'}, retrying smaller"
        if self.limit < self.ceiling:
            state += f"; {self.limit} request{'' if self.limit == 1 else 's'} at a time (of {self.ceiling})"
        return f"{done}; {state}"

    def to_json(self) -> dict[str, int | float]:
        """The `embeddings` object of `knowledge index --json`."""
        return {k: v for k, v in asdict(self).items() if k not in ("last_inputs", "last_seconds")}


class Pace:
    """At most `limit` embed batches in flight, the limit backing off as latency climbs."""

    def __init__(self, ceiling: int, timeout: float) -> None:
        self.ceiling = max(1, ceiling)
        self.timeout = timeout
        self.limit = self.ceiling
        self.in_flight = 0
        self.peak = 0  # the most batches in flight at once (what a test measures)
        self._quick = 0
        self._cond = threading.Condition()

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of the `limit` slots for one batch."""
        with self._cond:
            while self.in_flight >= self.limit:
                self._cond.wait(1.0)
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            yield
        finally:
            with self._cond:
                self.in_flight -= 1
                self._cond.notify_all()

    def observe(self, seconds: float, ok: bool) -> bool:
        """Adjust the limit after one request; True when it timed out."""
        timed_out = not ok and seconds >= TIMEOUT_SHARE * self.timeout
        with self._cond:
            if timed_out or seconds > SLOW_SHARE * self.timeout:
                self.limit, self._quick = max(1, self.limit - 1), 0
            elif ok and seconds < QUICK_SHARE * self.timeout:
                self._quick += 1
                if self._quick >= SPEEDUP_AFTER and self.limit < self.ceiling:
                    self.limit, self._quick = self.limit + 1, 0
                    self._cond.notify_all()
        return timed_out


_lock = threading.Lock()
_pace: Pace | None = None
_runs: dict[str, RunHealth] = {}


def pace_for(ceiling: int, timeout: float) -> Pace:
    """This process's pace for an embeddings server of that concurrency and timeout."""
    global _pace
    with _lock:
        if _pace is None or (_pace.ceiling, _pace.timeout) != (max(1, ceiling), timeout):
            _pace = Pace(ceiling, timeout)
        return _pace


def run_health(run_id: str) -> RunHealth:
    """The run's health in this process (created on first use; the oldest runs are forgotten)."""
    with _lock:
        health = _runs.get(run_id)
        if health is None:
            while len(_runs) >= _KEPT_RUNS:
                _runs.pop(next(iter(_runs)))
            health = _runs[run_id] = RunHealth()
        return health


def known_health(run_id: str) -> RunHealth | None:
    """The run's health if this process embedded or routed for it (None in a CLI following workers)."""
    with _lock:
        return _runs.get(run_id)


class Observer:
    """The callbacks of one batch's embed_halving: count into the run's health and steer the pace."""

    def __init__(self, health: RunHealth, pace: Pace) -> None:
        self.health = health
        self.pace = pace

    def request(self, inputs: int, seconds: float, ok: bool) -> None:
        """After each request."""
        timed_out = self.pace.observe(seconds, ok)
        with _lock:
            h = self.health
            h.requests += 1
            h.timeouts += timed_out
            h.embedded += inputs if ok else 0
            h.last_inputs, h.last_seconds = inputs, seconds
            h.limit, h.ceiling = self.pace.limit, self.pace.ceiling

    def split(self, size: int) -> None:
        """A batch of `size` inputs failed and goes again in halves."""
        with _lock:
            self.health.halvings += 1
            self.health.retried += size


def routed(run_id: str, sections: int) -> None:
    """Sections this process routed to the run's backlog."""
    if sections:
        health = run_health(run_id)
        with _lock:
            health.queued += sections
