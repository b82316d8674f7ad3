"""Logging and tracing bootstrap, configured once per process.

configure_logging sets up structlog (context variables merged first, JSON when stderr is not a
terminal) and routes the standard library's loggers (Dramatiq's) through the same renderer.
configure_tracing installs an OpenTelemetry TracerProvider only when something reads the spans:
OTLP over HTTP when OTEL_TRACES_EXPORTER=otlp or an OTEL_EXPORTER_OTLP_*ENDPOINT is set (the SDK
reads the other OTEL_* variables itself), and, for tests, JSON lines of finished spans appended to
the file named by KNOWLEDGE_TRACE_FILE so spans from subprocesses can be collected. Without either,
no SDK is loaded, and traced() hands the read path a stand-in that loads not even the API.

configure_metrics installs a MeterProvider beside it, and only when something reads the metrics:
OTLP over HTTP when OTEL_METRICS_EXPORTER=otlp or an OTEL_EXPORTER_OTLP_*ENDPOINT is set, and a
Prometheus registry when the process serves /metrics (`knowledge serve`) or KNOWLEDGE_METRICS_PORT
asks for a scrape endpoint of its own (worker, writer: bound to KNOWLEDGE_METRICS_HOST, default
127.0.0.1). Without either, no SDK is loaded and the instruments stay the API's no-op proxies.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # logging, structlog and OpenTelemetry are imported only when configured or used
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExportResult
    from opentelemetry.trace import Tracer
    from opentelemetry.util.types import AttributeValue
    from structlog.typing import FilteringBoundLogger, Processor

ENV_LOG_LEVEL = "KNOWLEDGE_LOG_LEVEL"
ENV_TRACE_FILE = "KNOWLEDGE_TRACE_FILE"
ENV_METRICS_PORT = "KNOWLEDGE_METRICS_PORT"
ENV_METRICS_HOST = "KNOWLEDGE_METRICS_HOST"
DEFAULT_METRICS_HOST = "127.0.0.1"
TRACER_NAME = "knowledge"

_lock = threading.Lock()
_logging_done = False
_tracing_service: str | None = None
_metrics_service: str | None = None
_prometheus = False


class _CurrentStderr:
    """Writes to whatever sys.stderr is at the moment of writing (a test runner swaps it)."""

    def write(self, text: str) -> int:
        try:
            return sys.stderr.write(text)
        except (ValueError, BrokenPipeError):  # closed or gone: a log line must never fail the work
            return 0

    def flush(self) -> None:
        with contextlib.suppress(ValueError, BrokenPipeError):
            sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def configure_logging(level: str = "INFO", environ: Mapping[str, str] | None = None) -> None:
    """Configure structlog and stdlib logging for this process (later calls are no-ops)."""
    global _logging_done
    env = os.environ if environ is None else environ
    with _lock:
        if _logging_done:
            return
        _logging_done = True
        import logging  # here, not at the top: read commands that never log do not pay for it

        import structlog

        name = (env.get(ENV_LOG_LEVEL) or level).upper()
        numeric = logging.getLevelName(name)
        if not isinstance(numeric, int):
            numeric = logging.INFO
        timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
        shared: list[Processor] = [
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            timestamper,
        ]
        renderer: Processor = (
            structlog.dev.ConsoleRenderer(colors=False) if sys.stderr.isatty() else structlog.processors.JSONRenderer()
        )
        structlog.configure(
            processors=[*shared, structlog.processors.format_exc_info, renderer],
            wrapper_class=structlog.make_filtering_bound_logger(numeric),
            logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
            cache_logger_on_first_use=True,
        )
        handler = logging.StreamHandler(_CurrentStderr())
        handler.setFormatter(
            structlog.stdlib.ProcessorFormatter(
                processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
                foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            )
        )
        root = logging.getLogger()
        root.handlers[:] = [handler]
        root.setLevel(max(numeric, logging.INFO))
        # Dramatiq logs every consumer restart at INFO and more at DEBUG; keep its chatter at warnings
        # unless debugging was asked for.
        logging.getLogger("dramatiq").setLevel(numeric if numeric <= logging.DEBUG else logging.WARNING)


def get_logger(name: str) -> FilteringBoundLogger:
    """A structlog logger carrying the per-message context."""
    import structlog

    logger: FilteringBoundLogger = structlog.get_logger(name)
    return logger


class JsonLinesSpanExporter:
    """Append finished spans as JSON lines to a file (the test hook behind KNOWLEDGE_TRACE_FILE)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Write each span as one line with its ids, parent, service and attributes."""
        from opentelemetry.sdk.trace.export import SpanExportResult

        lines = []
        for span in spans:
            ctx = span.get_span_context()
            if ctx is None:  # never for a finished SDK span
                continue
            parent = span.parent
            lines.append(json.dumps({
                "name": span.name,
                "trace_id": f"{ctx.trace_id:032x}",
                "span_id": f"{ctx.span_id:016x}",
                "parent_id": f"{parent.span_id:016x}" if parent is not None else None,
                "service": span.resource.attributes.get("service.name"),
                "pid": os.getpid(),
                "status": span.status.status_code.name,
                "attributes": {k: _plain(v) for k, v in (span.attributes or {}).items()},
                "start_ns": span.start_time,
                "end_ns": span.end_time,
            }))
        data = ("\n".join(lines) + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Writes are synchronous."""
        return True


def _plain(value: AttributeValue) -> object:
    return list(value) if isinstance(value, tuple) else value


def _exporters(env: Mapping[str, str], signal: str) -> set[str]:
    return {e.strip().lower() for e in env.get(f"OTEL_{signal}_EXPORTER", "").split(",") if e.strip()}


def _wants_otlp(env: Mapping[str, str], signal: str = "TRACES") -> bool:
    exporters = _exporters(env, signal)
    if "none" in exporters:
        return False
    if "otlp" in exporters:
        return True
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT"))


def metrics_port(env: Mapping[str, str]) -> int | None:
    """The scrape port KNOWLEDGE_METRICS_PORT asks for (None when unset; 0 picks a free one)."""
    raw = env.get(ENV_METRICS_PORT, "").strip()
    if not raw:
        return None
    from config.errors import ConfigError

    if not raw.isdigit() or int(raw) > 65535:
        raise ConfigError(f"{ENV_METRICS_PORT}={raw!r} is not a port number (0-65535)")
    return int(raw)


def configure_tracing(service: str, environ: Mapping[str, str] | None = None) -> None:
    """Install this process's TracerProvider for `service` (later calls are no-ops)."""
    global _tracing_service
    env = os.environ if environ is None else environ
    with _lock:
        if _tracing_service is not None:
            return
        _tracing_service = service
        if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return
        if not _wants_otlp(env) and not env.get(ENV_TRACE_FILE):  # nothing reads spans: the API stays a no-op
            return
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        if _wants_otlp(env):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        if env.get(ENV_TRACE_FILE):
            provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(env[ENV_TRACE_FILE])))  # type: ignore[arg-type]
        trace.set_tracer_provider(provider)


def configure_metrics(service: str, environ: Mapping[str, str] | None = None, serves_metrics: bool = False,
                      listens: bool = False) -> bool:
    """Install this process's MeterProvider for `service` when anything reads metrics; True if it has a
    Prometheus registry.

    serves_metrics: the process renders /metrics itself (`knowledge serve`), so a Prometheus
    registry is always attached; listens: a long-lived process (worker, writer) that opens its own
    scrape endpoint when KNOWLEDGE_METRICS_PORT is set. Later calls are no-ops.
    """
    global _metrics_service, _prometheus
    env = os.environ if environ is None else environ
    with _lock:
        if _metrics_service is not None:
            return _prometheus
        _metrics_service = service
        if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return False
        port = metrics_port(env) if listens else None
        otlp = _wants_otlp(env, "METRICS")
        prometheus = serves_metrics or port is not None or "prometheus" in _exporters(env, "METRICS")
        if not otlp and not prometheus:
            return False
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource

        readers: list[MetricReader] = []
        if otlp:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))  # OTEL_METRIC_EXPORT_INTERVAL
        if prometheus:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader

            readers.append(PrometheusMetricReader())
            _prometheus = True
        resource = Resource.create({"service.name": service, "service.instance.id": f"{os.uname().nodename}:"
                                                                                     f"{os.getpid()}"})
        metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))
        if port is not None:
            from prometheus_client import start_http_server

            host = env.get(ENV_METRICS_HOST, "").strip() or DEFAULT_METRICS_HOST
            try:
                start_http_server(port, addr=host)
            except OSError as exc:
                from config.errors import ConfigError

                raise ConfigError(f"{ENV_METRICS_PORT}={port}: cannot serve metrics on {host}:{port}: "
                                  f"{exc.strerror or exc}") from None
        return _prometheus


def prometheus_text() -> tuple[bytes, str]:
    """This process's metrics in the Prometheus text exposition format, with its content type."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def shutdown_metrics() -> None:
    """Export what is left and stop the metric readers (call before a process exits)."""
    if _metrics_service is None:
        return
    from opentelemetry import metrics

    shutdown = getattr(metrics.get_meter_provider(), "shutdown", None)
    if callable(shutdown):
        shutdown()


def shutdown_tracing() -> None:
    """Flush and stop the span processors (call before a process exits)."""
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    shutdown = getattr(provider, "shutdown", None)
    if callable(shutdown):
        shutdown()


def tracer() -> Tracer:
    """The knowledge tracer (a no-op tracer until configure_tracing installed a provider)."""
    from opentelemetry import trace

    return trace.get_tracer(TRACER_NAME)


class SpanAttributes(Protocol):
    """What the query path does with its span: set attributes on it."""

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Record one attribute on the span."""


class _Untraced:
    """The span of a process that traces nothing: its attributes go nowhere."""

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Drop the attribute."""


def traced(name: str) -> AbstractContextManager[SpanAttributes]:
    """A span named `name`, current while the block runs (an exception in it marks the span failed).

    A TracerProvider can only have been installed by code that imported the tracing API
    (configure_tracing, the workers' middleware, a test) or be named by OTEL_PYTHON_TRACER_PROVIDER.
    With neither, the span is a stand-in and nothing of OpenTelemetry is imported: a read command that
    traces nothing does not pay for the API.
    """
    if "opentelemetry.trace" in sys.modules or os.environ.get("OTEL_PYTHON_TRACER_PROVIDER"):
        return tracer().start_as_current_span(name)
    return contextlib.nullcontext(_Untraced())
