"""The knowledge middleware in-process: trace context carried through messages, logs bound per message."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.conftest import write_tree
from tests.workers.helpers import index
from workers.middleware import OPTION, message_run_id

_EXPORTER = InMemorySpanExporter()
_INSTALLED: list[bool] = []


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Finished spans of this process: one in-memory exporter, attached once, emptied per test.

    Never shut down: a shut-down processor left on the provider would warn on every later span.
    """
    if not _INSTALLED:
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        _INSTALLED.append(True)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def test_an_embedded_run_is_one_trace_from_the_run_to_each_write(workdir: Path, make_settings, spans) -> None:
    write_tree(workdir, {f"docs/n{i:03d}.md": f"# Note {i}\n\nbody {i}\n" for i in range(10)})
    summary = index(make_settings(paths=["docs"], batch_files=4))
    assert summary.counts["added"] == 10
    finished = [s for s in spans.get_finished_spans() if s.attributes.get("knowledge.run_id") == summary.run_id
                or s.name in ("walk",)]
    by_id = {s.context.span_id: s for s in spans.get_finished_spans()}
    root = next(s for s in finished if s.name == "index run")
    assert root.parent is None
    ingests = [s for s in finished if s.name == "ingest"]
    writes = [s for s in finished if s.name == "write"]
    assert len(ingests) == 3 and len(writes) == 3
    for span in ingests + writes:
        assert span.context.trace_id == root.context.trace_id
    assert {by_id[w.parent.span_id].name for w in writes} == {"ingest"}
    assert {by_id[i.parent.span_id].name for i in ingests} == {"walk"}
    assert sorted(i.attributes["knowledge.paths"] for i in ingests) == [2, 4, 4]
    assert any(s.name == "prune" for s in finished)


class _Message:
    def __init__(self, args: tuple, options: dict | None = None) -> None:
        self.args = args
        self.options = options or {}


def test_the_run_id_of_a_retry_exhausted_callback_is_the_failed_message_s() -> None:
    assert message_run_id(_Message(("r-1", [["a"]], False))) == "r-1"
    assert message_run_id(_Message(({"args": ["r-2", [["a"]]], "actor_name": "ingest"}, {"retries": 5}))) == "r-2"
    assert message_run_id(_Message(())) == ""


def test_before_enqueue_keeps_a_retried_message_s_original_trace_context(spans) -> None:
    from workers.middleware import KnowledgeMiddleware

    middleware = KnowledgeMiddleware()
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("first"):
        message = _Message(("r",))
        middleware.before_enqueue(None, message, None)  # type: ignore[arg-type]
    carried = dict(message.options[OPTION])
    assert carried["traceparent"].startswith("00-")
    with tracer.start_as_current_span("retry-site"):
        middleware.before_enqueue(None, message, 100)  # type: ignore[arg-type]
    assert message.options[OPTION] == carried
    assert json.dumps(message.options)  # the options stay JSON for the Redis encoder
