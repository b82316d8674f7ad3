"""Count what a run did into the metric instruments (config/instruments.py), once per batch.

Every place that records outcomes in the run ledger counts the same outcomes here, so across all
processes the counters add up to the run summary (a redelivered message may count a batch twice,
where the ledger keeps a path's first outcome).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable

from config.instruments import EMBED_OUTCOME, OUTCOME, REASON, RUN_OUTCOME, STAGE, instruments, reason_class
from workers.ledger.shapes import Outcome


def count_walk(total: int, skipped: Iterable[str]) -> None:
    """A finished walk: the files and pages it found, and those it skipped, by reason class."""
    meters = instruments()
    meters.files_walked.add(total)
    for reason, n in Counter(reason_class(r) for r in skipped).items():
        meters.files_skipped.add(n, {REASON: reason, STAGE: "walk"})


def count_outcomes(outcomes: Iterable[Outcome], stage: str) -> None:
    """Outcomes as recorded in the ledger: indexed (added, updated, vectors_added), unchanged, skipped, failed."""
    meters = instruments()
    tally = Counter((outcome, reason_class(reason) if outcome in ("skipped", "failed") else "")
                    for _, outcome, reason in outcomes)
    for (outcome, reason), n in tally.items():
        if outcome in ("added", "updated", "vectors_added"):
            meters.files_indexed.add(n, {OUTCOME: outcome})
        elif outcome == "unchanged":
            meters.files_unchanged.add(n, {STAGE: stage})
        elif outcome == "skipped":
            meters.files_skipped.add(n, {REASON: reason, STAGE: stage})
        elif outcome == "failed":
            meters.files_failed.add(n, {REASON: reason, STAGE: stage})


def count_unchanged(files: int, stage: str) -> None:
    """Files found unchanged without a per-file outcome (the walk's stat fast path)."""
    if files:
        instruments().files_unchanged.add(files, {STAGE: stage})


def count_chunks(chunks: int) -> None:
    """Sections written by one batch."""
    if chunks:
        instruments().chunks_written.add(chunks)


def count_run(started: object, outcome: str) -> None:
    """A closed run (complete or failed) and its wall time from the start its ledger recorded."""
    meters = instruments()
    meters.runs.add(1, {RUN_OUTCOME: outcome})
    try:
        seconds = time.time() - float(started)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return
    meters.run_duration.record(max(0.0, seconds), {RUN_OUTCOME: outcome})


def timed_write() -> float:
    """A start mark for write_seconds."""
    return time.perf_counter()


def write_seconds(started: float, documents: int = 1) -> None:
    """A write transaction of documents documents, from its start mark: each document's share recorded."""
    share = (time.perf_counter() - started) / documents
    histogram = instruments().write_duration
    for _ in range(documents):
        histogram.record(share)


def embed_request(inputs: int, seconds: float, ok: bool) -> None:
    """One embedding request: its latency by outcome and its input count."""
    meters = instruments()
    meters.embed_duration.record(seconds, {EMBED_OUTCOME: "ok" if ok else "error"})
    meters.embed_inputs.record(inputs)


def count_halvings(halvings: int) -> None:
    """Batches one embed message split after failures."""
    if halvings:
        instruments().embed_halvings.add(halvings)
