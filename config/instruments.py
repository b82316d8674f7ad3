"""The metric instruments every process records into, on the OpenTelemetry metrics API only.

Instruments are made once per process from the global MeterProvider's "knowledge" meter. Until
config/observability.py configure_metrics installs an SDK provider (only when an exporter or a
scrape endpoint is configured) they are the API's proxies, whose calls cost one attribute check;
and while nothing in the process has imported the metrics API at all (so no provider can have been
installed), instruments() answers stand-ins that record nothing without importing it: read commands
import this module and load neither the SDK nor the API. Names, units and attributes follow the
OpenTelemetry semantic conventions and are listed in docs/observability.md; callers record per
document, batch, request or query, never per chunk.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.util.types import Attributes

METER_NAME = "knowledge"

# Bucket bounds (seconds) for the latency histograms: sub-millisecond searches to minute-long runs.
LATENCY_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
RUN_BOUNDS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
INPUT_BOUNDS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)

# Attribute keys (the knowledge.* namespace; messaging.* from the semantic conventions).
TIER = "knowledge.tier"
OUTCOME = "knowledge.outcome"
REASON = "knowledge.reason"
STAGE = "knowledge.stage"
RUN_OUTCOME = "knowledge.run.outcome"
EMBED_OUTCOME = "knowledge.embed.outcome"
QUEUE = "messaging.destination.name"

# Skip and failure reasons carry paths, sizes and offsets; a metric attribute carries only their class.
_REASON_CLASSES = (
    ("knowledge.extraction.timeout", "timeout"), ("knowledge.extraction.memory", "memory"),
    ("file name", "bad_name"), ("too large", "too_large"), ("binary", "binary"), ("not utf-8", "encoding"),
    ("symlink", "symlink"), ("vanished", "vanished"),
    ("excluded by", "excluded"), ("dot ", "dot"), ("memory directory", "store"), ("the store's own", "store"),
    ("not a .md", "extension"), ("not an indexed format", "extension"), ("format is turned off", "extension"),
    ("encrypted", "encrypted"), ("damaged", "damaged"), ("no text", "no_text"), ("too much text", "too_large"),
    ("nested too deeply", "too_large"), ("docx expands", "too_large"), ("too many pages", "too_large"),
    ("with too many parts", "too_large"),
    ("not a notebook", "damaged"), ("not a word document", "damaged"),
    ("not a regular", "not_regular"), ("not a directory", "not_regular"),
    ("cannot ", "unreadable"), ("path leaves", "outside_root"), ("not html", "content_type"),
    ("no content-type", "content_type"), ("unexpected error", "unexpected"), ("store write failed", "store_write"),
    ("gave up after", "retries_exhausted"), ("embedding", "embedding"), ("name", "bad_name"), ("fetch", "fetch"),
    ("http", "fetch"),
)


def reason_class(reason: str | None) -> str:
    """The bounded class of a skip or failure reason (too_large, binary, encoding, ..., other)."""
    text = (reason or "").strip().lower()
    for prefix, name in _REASON_CLASSES:
        if text.startswith(prefix) or (len(prefix) > 6 and prefix in text):
            return name
    return "other"


class Counter(Protocol):
    """The part of an OpenTelemetry counter knowledge uses."""

    def add(self, amount: int | float, attributes: Attributes = None) -> None:
        """Add amount to the series of these attributes."""


class Histogram(Protocol):
    """The part of an OpenTelemetry histogram knowledge uses."""

    def record(self, amount: int | float, attributes: Attributes = None) -> None:
        """Record one measurement in the series of these attributes."""


class _Unrecorded:
    """A counter and a histogram of a process that nothing reads metrics from: every value is dropped."""

    def add(self, amount: int | float, attributes: Attributes = None) -> None:
        """Drop the value."""

    def record(self, amount: int | float, attributes: Attributes = None) -> None:
        """Drop the value."""


@dataclass(frozen=True)
class Instruments:
    """Every instrument knowledge records into."""

    files_walked: Counter
    files_skipped: Counter
    files_indexed: Counter
    files_unchanged: Counter
    files_failed: Counter
    chunks_written: Counter
    runs: Counter
    run_duration: Histogram
    write_duration: Histogram
    embed_duration: Histogram
    embed_inputs: Histogram
    embed_halvings: Counter
    search_duration: Histogram
    enumerate_duration: Histogram
    searches_degraded: Counter
    snapshot_refused: Counter
    snapshot_pulls: Counter


UNRECORDED = Instruments(**{f.name: _Unrecorded() for f in fields(Instruments)})
_lock = threading.Lock()
_made: Instruments | None = None


def instruments() -> Instruments:
    """This process's instruments (made on first use; proxies until a MeterProvider is installed).

    A MeterProvider can only have been installed by code that imported the metrics API
    (configure_metrics, a test) or be named by OTEL_PYTHON_METER_PROVIDER; with neither, the answer
    is UNRECORDED and nothing is imported.
    """
    global _made
    if _made is not None:
        return _made
    if "opentelemetry.metrics" not in sys.modules and not os.environ.get("OTEL_PYTHON_METER_PROVIDER"):
        return UNRECORDED
    with _lock:
        if _made is None:
            _made = _make()
        return _made


def _make() -> Instruments:
    from opentelemetry import metrics

    meter = metrics.get_meter(METER_NAME)

    def seconds(name: str, what: str, bounds: tuple[float, ...] = LATENCY_BOUNDS) -> Histogram:
        return meter.create_histogram(name, unit="s", description=what, explicit_bucket_boundaries_advisory=bounds)

    return Instruments(
        files_walked=meter.create_counter("knowledge.files.walked", "{file}", "Files and pages a run's walk found."),
        files_skipped=meter.create_counter("knowledge.files.skipped", "{file}",
                                           "Files skipped (by the walk or on reading), by reason class."),
        files_indexed=meter.create_counter("knowledge.files.indexed", "{file}",
                                           "Documents written to the store (added or updated)."),
        files_unchanged=meter.create_counter("knowledge.files.unchanged", "{file}",
                                             "Files found unchanged (by stat or by content hash)."),
        files_failed=meter.create_counter("knowledge.files.failed", "{file}", "Files that failed, by reason class."),
        chunks_written=meter.create_counter("knowledge.chunks.written", "{chunk}", "Sections written to the store."),
        runs=meter.create_counter("knowledge.runs", "{run}", "Index runs closed, by outcome."),
        run_duration=seconds("knowledge.run.duration", "Wall time of an index run, from start to close.",
                             RUN_BOUNDS),
        write_duration=seconds("knowledge.write.duration", "Each document's share of its write transaction."),
        embed_duration=seconds("knowledge.embed.duration", "One embedding request, by outcome."),
        embed_inputs=meter.create_histogram("knowledge.embed.inputs", unit="{input}",
                                            description="Inputs per embedding request.",
                                            explicit_bucket_boundaries_advisory=INPUT_BOUNDS),
        embed_halvings=meter.create_counter("knowledge.embed.halvings", "{halving}",
                                            "Embedding batches split in two after a failure."),
        search_duration=seconds("knowledge.search.duration", "One search, by tier."),
        enumerate_duration=seconds("knowledge.enumerate.duration", "One enumerate (match) query, by tier."),
        searches_degraded=meter.create_counter("knowledge.search.degraded", "{search}",
                                               "Searches answered lexical-only because the vector tier failed."),
        snapshot_refused=meter.create_counter("knowledge.snapshot.refused", "{generation}",
                                              "Generations a replica refused: failed verification, by stage."),
        snapshot_pulls=meter.create_counter("knowledge.snapshot.pulls", "{pull}",
                                            "Downloads of a newer generation by a pulling replica, by outcome."),
    )


QueueSample = Callable[[], Iterable[tuple[str, int, float | None]]]


def observe_queues(sample: QueueSample) -> None:
    """Register gauges of queue depth and oldest-message age fed by sample() -> (queue, depth, age_s)."""
    from opentelemetry import metrics

    meter = metrics.get_meter(METER_NAME)
    latest: dict[str, tuple[int, float | None]] = {}

    def depth(options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        latest.clear()
        try:
            latest.update((queue, (n, age)) for queue, n, age in sample())
        except Exception:  # noqa: BLE001 - a broker outage must not break the export of everything else
            return []
        return [Observation(n, {QUEUE: queue}) for queue, (n, _) in latest.items()]

    def age(options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        return [Observation(a if a is not None else 0.0, {QUEUE: queue}) for queue, (_, a) in latest.items()]

    meter.create_observable_gauge("knowledge.queue.depth", [depth], unit="{message}",
                                  description="Messages waiting in a queue (its delay queue included).")
    meter.create_observable_gauge("knowledge.queue.message.age", [age], unit="s",
                                  description="Age of the oldest message waiting in a queue (0 when empty).")


def observe_watch_backlog(sample: Callable[[], int]) -> None:
    """Register the gauge of paths `knowledge watch` keeps pending (a failed run's, until one succeeds)."""
    from opentelemetry import metrics

    def backlog(options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        return [Observation(sample())]

    metrics.get_meter(METER_NAME).create_observable_gauge(
        "knowledge.watch.backlog", [backlog], unit="{path}",
        description="Changed paths the watcher has not applied yet (kept across failed runs, retried with backoff).")


def observe_snapshot(sample: Callable[[], tuple[int, float] | None]) -> None:
    """Register the gauges of the generation a replica serves and its age, fed by sample() -> (generation, age_s)
    (nothing observed before the first generation)."""
    from opentelemetry import metrics

    def generation(options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        served = sample()
        return [Observation(served[0])] if served else []

    def age(options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        served = sample()
        return [Observation(served[1])] if served else []

    meter = metrics.get_meter(METER_NAME)
    meter.create_observable_gauge("knowledge.snapshot.generation", [generation], unit="{generation}",
                                  description="The generation a `serve --snapshots` replica answers from.")
    meter.create_observable_gauge("knowledge.snapshot.age", [age], unit="s",
                                  description="Seconds since the generation a replica serves was published.")
