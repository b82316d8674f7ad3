"""The knowledge Dramatiq middleware: per-message log context, trace propagation, run-lock upkeep.

On enqueue it injects the current OpenTelemetry context into the message options (`otel`), so a
message sent inside a span continues that span's trace in whatever process consumes it. Around
each processed message it clears and binds structlog's context variables (run id, actor, message
id, number of paths), starts a span named after the actor as a child of the carried context,
refreshes the run lock of the message's run, and settles a message that exhausted its retries
(workers/exhaustion.py, the one place that does) so the run can still complete.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import dramatiq
import structlog
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Status, StatusCode

from config.errors import KnowledgeError
from config.observability import get_logger, tracer
from workers import exhaustion
from workers import runtime as runtime_module

OPTION = "otel"
LOCK_REFRESH_EVERY = 5.0

log = get_logger("knowledge.worker")


def message_run_id(message: Any) -> str:
    """The run a message belongs to: its first argument, or that of the message a callback is about."""
    args = message.args
    if not args:
        return ""
    first = args[0]
    if isinstance(first, dict):  # on_retry_exhausted callbacks get (message dict, info)
        inner = first.get("args") or []
        return str(inner[0]) if inner and isinstance(inner[0], str) else ""
    return str(first)


def message_paths(message: Any) -> int | None:
    """How many files a message carries (an ingest batch's length), when it says."""
    args = message.args
    if len(args) > 1 and isinstance(args[1], list):
        return len(args[1])
    return None


class KnowledgeMiddleware(dramatiq.Middleware):
    """Binds logs, carries traces and keeps run bookkeeping for every knowledge message."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._refreshed: dict[str, float] = {}
        self._refresh_lock = threading.Lock()

    def before_enqueue(self, broker: dramatiq.Broker, message: Any, delay: int | None) -> None:
        """Carry the current trace context (a retried message keeps its original one)."""
        if OPTION in message.options:
            return
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        if carrier:
            message.options[OPTION] = carrier

    def before_process_message(self, broker: dramatiq.Broker, message: Any) -> None:
        """Bind the log context and open the message's span under the carried trace context."""
        run_id = message_run_id(message)
        paths = message_paths(message)
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(
            run_id=run_id, actor=message.actor_name, message_id=message.message_id,
            **({"paths": paths} if paths is not None else {}),
        )
        parent = propagate.extract(message.options.get(OPTION) or {})
        attributes: dict[str, Any] = {"knowledge.run_id": run_id, "messaging.message.id": message.message_id,
                                      "messaging.destination.name": message.queue_name,
                                      "knowledge.retries": message.options.get("retries", 0)}
        if paths is not None:
            attributes["knowledge.paths"] = paths
        span = tracer().start_span(message.actor_name, context=parent, attributes=attributes,
                                   kind=trace.SpanKind.CONSUMER)
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        stack.append((span, token, time.monotonic()))
        if run_id:
            self._refresh_run_lock(run_id)

    def after_process_message(self, broker: dramatiq.Broker, message: Any, *, result: Any = None,
                              exception: BaseException | None = None) -> None:
        """Close the span, log failures and give up cleanly on a message out of retries."""
        self._close(message, exception)
        if exception is not None and message.failed:
            give_up(message, exception)
        structlog.contextvars.clear_contextvars()

    def after_skip_message(self, broker: dramatiq.Broker, message: Any) -> None:
        """A skipped message still closes its span."""
        self._close(message, None)
        structlog.contextvars.clear_contextvars()

    def _close(self, message: Any, exception: BaseException | None) -> None:
        stack = getattr(self._local, "stack", None)
        if not stack:
            return
        span, token, started = stack.pop()
        elapsed_ms = round((time.monotonic() - started) * 1000, 1)
        if exception is not None:
            span.record_exception(exception)
            span.set_status(Status(StatusCode.ERROR, f"{type(exception).__name__}: {exception}"))
            log.warning("message failed", error=f"{type(exception).__name__}: {exception}",
                        retries=message.options.get("retries", 0), will_retry=not message.failed,
                        elapsed_ms=elapsed_ms)
        else:
            log.debug("message done", elapsed_ms=elapsed_ms)
        span.end()
        otel_context.detach(token)

    def _refresh_run_lock(self, run_id: str) -> None:
        """Keep the run lock of a run whose messages are being processed (at most every few seconds)."""
        now = time.monotonic()
        with self._refresh_lock:
            if now - self._refreshed.get(run_id, 0.0) < LOCK_REFRESH_EVERY:
                return
            self._refreshed[run_id] = now
        try:
            installed = runtime_module.current()
        except KnowledgeError:
            return  # a process that only enqueues (or a bench) has no runtime
        try:
            installed.ledger.run_lock.refresh(run_id)
        except Exception as exc:  # noqa: BLE001 - bookkeeping must never fail a message
            log.warning("run lock refresh failed", error=str(exc))


def give_up(message: dramatiq.Message[Any], exception: BaseException) -> None:
    """Settle a message that exhausted its retries (workers/exhaustion.py) so the run can still finish."""
    try:
        runtime = runtime_module.current()
    except KnowledgeError:
        return  # a process without a runtime only enqueues
    try:
        exhaustion.give_up(runtime, message.actor_name, message.args, int(message.options.get("retries", 0)),
                           f"{type(exception).__name__}: {exception}")
    except Exception as exc:  # noqa: BLE001 - the broker itself may be gone
        log.error("could not record a failed message", error=str(exc))
