"""The shapes and constants the run ledger shares with its callers (RunSummary, BacklogState, Outcome).

A ledger records one store's index runs: per-path outcomes, the walk, staged payloads and the
final state, with four smaller parts: the embedding backlog of a vector run, the run lock (one run
per store at a time), presence (which worker and writer processes are alive) and replies (a
writer's answer to an operator request). Their rules are written once (workers/ledger/runs.py,
backlog.py, duties.py) on a small set of atomic primitives (primitives.py) held in this process
(InMemoryLedger, the in-process default) or in Redis (RedisLedger, the distributed shape).

Every write is idempotent: an outcome is recorded per path (first write wins), so a message
redelivered after a worker was killed repeats harmlessly; counters are derived from the recorded
outcomes, never counted down. The one exception is the walk's files unchanged by stat: the walk
happens once per run and those files are never enqueued, so they are counted, not listed, and a run
with nothing to read holds nothing per file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

# vectors_added: a document read again only to embed its sections (its content unchanged)
OUTCOME_NAMES = ("added", "updated", "unchanged", "skipped", "failed", "vectors_added")
# A run lock expires this long after its last refresh (the CLI and every processed message refresh it).
LOCK_TTL_MS = 120_000
# A process that has not announced itself for this long is not counted as alive.
ALIVE_WINDOW_S = 15.0
REPLY_TTL_S = 3600

Outcome = tuple[str, str, str | None]  # (path, outcome, reason)
Wire = dict[str, Any]  # one staged payload item as it crosses the ledger (workers/payloads.py)


@dataclass
class RunSummary:
    """What a run did, as printed at its end."""

    run_id: str
    state: str = "running"
    total: int = 0
    walked: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    removed: int = 0
    files: int = 0
    chunks: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    failures: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def accounted(self) -> int:
        """Files with a recorded outcome."""
        return sum(self.counts.values())

    @property
    def done(self) -> bool:
        """True when every walked file is accounted for."""
        return self.walked and self.accounted >= self.total

    def to_json(self) -> dict[str, Any]:
        """The summary object of `knowledge index --json`."""
        return {
            "run_id": self.run_id,
            "state": self.state,
            "added": self.counts.get("added", 0),
            "updated": self.counts.get("updated", 0),
            "unchanged": self.counts.get("unchanged", 0),
            "vectors_added": self.counts.get("vectors_added", 0),
            "removed": self.removed,
            "failed": self.counts.get("failed", 0),
            "files": self.files,
            "chunks": self.chunks,
            "skipped": self.skipped,
            "failures": self.failures,
            **({"error": self.error} if self.error else {}),
        }


class BacklogState(NamedTuple):
    """The embedding backlog of a run as one ingest message sees it."""

    appended: int  # chunks ever appended
    embedded: int  # chunks whose batch was embedded or given up
    queued: bool  # this message's chunks are in the backlog (it was admitted)
    done: bool  # this message is done
    unwritten: int = 0  # documents with every vector, not written yet

    @property
    def pending(self) -> int:
        """Chunks read but not embedded yet."""
        return self.appended - self.embedded


EmbedItem = list[Any]  # [doc key, path, ordinal, text] as the backlog holds it (workers/payloads.py)
