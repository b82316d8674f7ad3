"""Queue names and actor option presets, in one place."""

from __future__ import annotations

from typing import Any

INGEST = "ingest"
EMBED = "embed"
WRITE = "write"

WORKER_QUEUES = frozenset({INGEST, EMBED})
WRITER_QUEUES = frozenset({WRITE})

# Retries with backoff for transient failures (a lost Redis connection, a locked file); permanent
# errors are recorded per file by the actors themselves and never raised.
INGEST_OPTIONS: dict[str, Any] = {"max_retries": 5, "min_backoff": 200, "max_backoff": 10_000, "time_limit": 600_000}
EMBED_OPTIONS: dict[str, Any] = {"max_retries": 5, "min_backoff": 500, "max_backoff": 30_000, "time_limit": 1_800_000}
WRITE_OPTIONS: dict[str, Any] = {"max_retries": 10, "min_backoff": 200, "max_backoff": 10_000, "time_limit": 600_000}
