"""The per-process context actors run against: settings, the run ledger and (in the writer) the store.

A process installs exactly one Runtime before its workers start; actors read it with current().
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from config.errors import KnowledgeError
from config.settings import Settings
from pipeline.embeddings import EmbeddingsClient
from pipeline.extraction import Bound, Extraction
from pipeline.store import Store
from pipeline.vectors import VectorPlan
from workers.ledger import Ledger
from workers.queues import Actors


@dataclass
class Runtime:
    """What this process's actors need, and what they cache per process."""

    settings: Settings
    ledger: Ledger
    store: Store | None
    actors: Actors
    vector_plans: dict[str, VectorPlan | None] = field(default_factory=dict)  # by run id
    embeddings_client: EmbeddingsClient | None = None
    prepared_runs: set[str] = field(default_factory=set)  # runs whose vector table the writer installed
    extraction: Extraction = field(init=False)  # the bounded child processes ingest reads files in

    def __post_init__(self) -> None:
        self.extraction = Extraction(Bound.of(self.settings.extraction))

    def writer_store(self) -> Store:
        """The store; only the writer process has one."""
        if self.store is None:
            raise KnowledgeError("this process is not the writer: it has no store open")
        return self.store


_current: Runtime | None = None
_lock = threading.Lock()


def install(runtime: Runtime) -> None:
    """Make runtime the one actors of this process use."""
    global _current
    with _lock:
        _current = runtime


def current() -> Runtime:
    """The installed Runtime; raise if none."""
    if _current is None:
        raise KnowledgeError("no knowledge runtime installed in this process")
    return _current


def uninstall() -> None:
    """Forget the installed Runtime and end its extraction processes."""
    global _current
    with _lock:
        runtime, _current = _current, None
    if runtime is not None:
        runtime.extraction.close()
