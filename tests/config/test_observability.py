"""Logging and tracing bootstrap: JSON logs with bound context, exporter selection, the span file hook."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from config.observability import JsonLinesSpanExporter, _wants_otlp

REPO = Path(__file__).resolve().parents[2]


def test_logs_are_json_with_the_bound_context_when_stderr_is_not_a_terminal() -> None:
    code = (
        "import structlog\n"
        "from config.observability import configure_logging, get_logger\n"
        "configure_logging()\n"
        "structlog.contextvars.bind_contextvars(run_id='r-9', actor='ingest', paths=32)\n"
        "get_logger('t').info('message done', elapsed_ms=3.5)\n"
        "get_logger('t').debug('hidden at info')\n"
        "import logging; logging.getLogger('dramatiq.worker').warning('from the stdlib')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    assert lines[0]["event"] == "message done" and lines[0]["run_id"] == "r-9" and lines[0]["paths"] == 32
    assert lines[0]["level"] == "info" and "timestamp" in lines[0]
    assert lines[1]["event"] == "from the stdlib" and lines[1]["logger"] == "dramatiq.worker"
    assert len(lines) == 2


def test_otlp_is_chosen_only_by_the_standard_variables() -> None:
    assert not _wants_otlp({})
    assert _wants_otlp({"OTEL_TRACES_EXPORTER": "otlp"})
    assert _wants_otlp({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert _wants_otlp({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    assert not _wants_otlp({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})


def test_the_trace_file_hook_writes_one_json_line_per_span_with_its_parent(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    provider = TracerProvider(resource=Resource.create({"service.name": "knowledge-test"}))
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(str(path))))  # type: ignore[arg-type]
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("index run"):
        with tracer.start_as_current_span("walk", attributes={"knowledge.files": 3}):
            pass
    walk, root = [json.loads(line) for line in path.read_text().splitlines()]
    assert (root["name"], root["parent_id"], root["service"]) == ("index run", None, "knowledge-test")
    assert walk["parent_id"] == root["span_id"] and walk["trace_id"] == root["trace_id"]
    assert walk["attributes"] == {"knowledge.files": 3}


def test_the_otlp_exporter_is_installed_when_an_endpoint_is_set(tmp_path: Path) -> None:
    code = (
        "from opentelemetry import trace\n"
        "from config.observability import configure_tracing\n"
        "configure_tracing('knowledge-worker')\n"
        "p = trace.get_tracer_provider()\n"
        "procs = p._active_span_processor._span_processors\n"
        "print(type(p).__name__, [type(x.span_exporter).__name__ for x in procs],"
        " p.resource.attributes['service.name'])\n"
    )
    env = {"PATH": "/usr/bin:/bin", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                            env=env)
    assert result.stdout.split() == ["TracerProvider", "['OTLPSpanExporter']", "knowledge-worker"], result.stderr


def test_without_an_exporter_tracing_loads_no_sdk_and_spans_load_not_even_the_api() -> None:
    code = (
        "import sys\n"
        "from config.observability import configure_tracing, traced\n"
        "configure_tracing('knowledge-cli')\n"
        "with traced('search') as span:\n"
        "    span.set_attribute('knowledge.hits', 3)\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
        "from opentelemetry import trace\n"
        "print(type(trace.get_tracer_provider()).__name__)\n"
    )
    bare = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})
    assert bare.stdout.split() == ["[]", "ProxyTracerProvider"], bare.stderr


def test_a_span_is_recorded_once_a_provider_is_installed(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    code = (
        "from config.observability import configure_tracing, traced\n"
        "configure_tracing('knowledge-cli')\n"
        "try:\n"
        "    with traced('search') as span:\n"
        "        span.set_attribute('knowledge.hits', 3)\n"
        "        raise KeyError('boom')\n"
        "except KeyError:\n"
        "    pass\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "KNOWLEDGE_TRACE_FILE": str(path)})
    assert done.returncode == 0, done.stderr
    (line,) = [json.loads(text) for text in path.read_text().splitlines()]
    assert (line["name"], line["service"], line["status"]) == ("search", "knowledge-cli", "ERROR")
    assert line["attributes"] == {"knowledge.hits": 3}
