"""Metrics bootstrap: which readers a process gets, and the bounded reason classes its counters carry."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from config.errors import ConfigError
from config.instruments import reason_class
from config.observability import _wants_otlp, metrics_port

REPO = Path(__file__).resolve().parents[2]


def test_without_an_exporter_nothing_of_opentelemetry_is_loaded_and_the_instruments_are_no_ops() -> None:
    code = (
        "import sys\n"
        "from config.observability import configure_metrics\n"
        "from config.instruments import instruments\n"
        "assert configure_metrics('knowledge-cli', environ={}) is False\n"
        "instruments().files_indexed.add(3, {'knowledge.outcome': 'added'})\n"
        "instruments().search_duration.record(0.01, {'knowledge.tier': 'lexical'})\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'prometheus_client'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_metrics_exporter_follows_the_standard_variables() -> None:
    assert not _wants_otlp({}, "METRICS")
    assert _wants_otlp({"OTEL_METRICS_EXPORTER": "otlp"}, "METRICS")
    assert _wants_otlp({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "METRICS")
    assert _wants_otlp({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4318/v1/metrics"}, "METRICS")
    assert not _wants_otlp({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, "METRICS")
    assert not _wants_otlp({"OTEL_METRICS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
                           "METRICS")


def test_the_scrape_port_is_a_port_number_or_refused() -> None:
    assert metrics_port({}) is None and metrics_port({"KNOWLEDGE_METRICS_PORT": " "}) is None
    assert metrics_port({"KNOWLEDGE_METRICS_PORT": "9464"}) == 9464
    for bad in ("x", "-1", "70000"):
        with pytest.raises(ConfigError, match="KNOWLEDGE_METRICS_PORT"):
            metrics_port({"KNOWLEDGE_METRICS_PORT": bad})


@pytest.mark.parametrize(("reason", "klass"), [
    ("too large (20000000 bytes > 10485760)", "too_large"),
    ("binary file (contains NUL bytes)", "binary"),
    ("not UTF-8 (invalid byte at offset 12)", "encoding"),
    ("file name is not valid UTF-8", "bad_name"),
    ("symlink refused", "symlink"),
    ("vanished since the walk (deleted or renamed)", "vanished"),
    ("excluded by drafts/**", "excluded"),
    ("dot directory", "dot"),
    ("not a regular file (a FIFO)", "not_regular"),
    ("cannot stat: Permission denied", "unreadable"),
    ("gave up after 5 retries: ConnectionError", "retries_exhausted"),
    ("embedding section 3 failed: HTTP 400", "embedding"),
    ("the embeddings server stayed unavailable through 5 retries", "embedding"),
    ("unexpected error: ValueError: boom", "unexpected"),
    ("took longer than 10 s to read (knowledge.extraction.timeout)", "timeout"),
    ("needed more than 1024 MiB to read (knowledge.extraction.memory)", "memory"),
    ("needed more than 512 MiB to read (knowledge.extraction.memory); its reader ended by signal 9", "memory"),
    ("something nobody wrote yet", "other"),
    (None, "other"),
])
def test_reasons_become_a_bounded_class(reason: str | None, klass: str) -> None:
    assert reason_class(reason) == klass
