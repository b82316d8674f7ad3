"""Queue names, actor option presets and the set of actors one broker declares, in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dramatiq

INGEST = "ingest"
EMBED = "embed"
WRITE = "write"

WORKER_QUEUES = frozenset({INGEST, EMBED})
WRITER_QUEUES = frozenset({WRITE})

# Retries with backoff for transient failures (a lost Redis connection, a locked file); permanent
# errors are recorded per file by the actors themselves and never raised. A message out of retries
# is settled by workers/exhaustion.py.
INGEST_OPTIONS: dict[str, Any] = {"max_retries": 5, "min_backoff": 200, "max_backoff": 10_000, "time_limit": 600_000}
EMBED_OPTIONS: dict[str, Any] = {"max_retries": 5, "min_backoff": 500, "max_backoff": 30_000, "time_limit": 1_800_000}
WRITE_OPTIONS: dict[str, Any] = {"max_retries": 10, "min_backoff": 200, "max_backoff": 10_000, "time_limit": 600_000}


@dataclass(frozen=True)
class Actors:
    """The actors of one broker (declared by workers/actors.py)."""

    ingest: dramatiq.Actor[..., None]
    write: dramatiq.Actor[..., None]
    finalize: dramatiq.Actor[..., None]
    embed: dramatiq.Actor[..., None]
