"""Latency summaries: percentiles of timed samples, and timing a function over a list of queries."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50, p95 and mean in milliseconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(p95 * 1000, 2),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
        "n": len(ordered),
    }


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def timed(fn: Callable[[str], Any], queries: list[str], warmup: int = 10) -> dict[str, float]:
    """Latency of fn over queries after a few warm-up calls ({} without queries)."""
    if not queries:
        return {}
    for q in queries[:warmup]:
        fn(q)
    samples = []
    for q in queries:
        start = time.perf_counter()
        fn(q)
        samples.append(time.perf_counter() - start)
    return percentiles(samples)
