"""A loopback OTLP/HTTP receiver for tests: decodes the real protobuf requests the exporters send.

POST /v1/traces carries an ExportTraceServiceRequest and /v1/metrics an ExportMetricsServiceRequest
(opentelemetry-proto); each is decoded and kept. Counter readings are cumulative, so the value of a
series is its latest data point, per exporting process (service.instance.id).
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as decoded from an export request."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    service: str


@dataclass(frozen=True)
class Point:
    """One data point of a sum, gauge or histogram, with the process that exported it."""

    metric: str
    unit: str
    service: str
    instance: str
    attributes: tuple[tuple[str, str], ...]
    time_ns: int
    value: float  # the sum's or gauge's value; a histogram's count
    buckets: tuple[int, ...] = ()


def _plain(value: AnyValue) -> str:
    kind = value.WhichOneof("value")
    return "" if kind is None else str(getattr(value, kind))


def _attributes(pairs: Iterator[KeyValue] | list[KeyValue]) -> dict[str, str]:
    return {kv.key: _plain(kv.value) for kv in pairs}


class Receiver:
    """An OTLP/HTTP server on 127.0.0.1 (a free port) keeping every decoded request."""

    def __init__(self) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server hook name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                reply: bytes
                if self.path == "/v1/traces":
                    traces = ExportTraceServiceRequest.FromString(body)
                    with receiver.lock:
                        receiver.traces.append(traces)
                    reply = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    metrics = ExportMetricsServiceRequest.FromString(body)
                    with receiver.lock:
                        receiver.metrics.append(metrics)
                    reply = ExportMetricsServiceResponse().SerializeToString()
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """The base URL for OTEL_EXPORTER_OTLP_ENDPOINT."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[ReceivedSpan]:
        """Every span received, in arrival order."""
        found = []
        with self.lock:
            requests = list(self.traces)
        for request in requests:
            for resource_spans in request.resource_spans:
                service = _attributes(resource_spans.resource.attributes).get("service.name", "")
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        found.append(ReceivedSpan(span.name, span.trace_id.hex(), span.span_id.hex(),
                                                  span.parent_span_id.hex() or None, service))
        return found

    def points(self) -> list[Point]:
        """Every metric data point received, in arrival order."""
        found = []
        with self.lock:
            requests = list(self.metrics)
        for request in requests:
            for resource_metrics in request.resource_metrics:
                resource = _attributes(resource_metrics.resource.attributes)
                service = resource.get("service.name", "")
                instance = resource.get("service.instance.id", "")
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        kind = metric.WhichOneof("data")
                        for dp in getattr(metric, kind).data_points:
                            attrs = tuple(sorted(_attributes(dp.attributes).items()))
                            if kind == "histogram":
                                found.append(Point(metric.name, metric.unit, service, instance, attrs,
                                                   dp.time_unix_nano, float(dp.count), tuple(dp.bucket_counts)))
                            else:
                                value = dp.as_int if dp.WhichOneof("value") == "as_int" else dp.as_double
                                found.append(Point(metric.name, metric.unit, service, instance, attrs,
                                                   dp.time_unix_nano, float(value)))
        return found

    def latest(self, metric: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], Point]:
        """The latest point of each series of metric, keyed by (exporting instance, attributes)."""
        series: dict[tuple[str, tuple[tuple[str, str], ...]], Point] = {}
        for point in self.points():
            if point.metric != metric:
                continue
            key = (point.instance, point.attributes)
            if key not in series or point.time_ns >= series[key].time_ns:
                series[key] = point
        return series

    def total(self, metric: str, attributes: dict[str, str] | None = None) -> float:
        """A cumulative counter summed over every process, over the series matching attributes."""
        wanted = set((attributes or {}).items())
        return sum(p.value for p in self.latest(metric).values() if wanted <= set(p.attributes))
