"""Start, follow and summarise an index run.

plan_and_enqueue walks the roots, classifies files by stat against the store as the walk goes
(pipeline/survey.py), enqueues ingest batches as they fill and records what needs no reading;
follow polls the ledger until the writer closes the run.
EmbeddedEngine runs the same actors in this process on a StubBroker.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Self

import dramatiq

from config.errors import KnowledgeError, UsageError
from config.observability import tracer
from config.settings import Settings
from config.urls import looks_like_url, normalize_urls
from pipeline import changes, db, schema, vectors
from pipeline.embeddings import Probe
from pipeline.lock import WriteLock
from pipeline.models import Skip
from pipeline.paths import PathBase
from pipeline.store import Store
from pipeline.stored import StoredFingerprints
from pipeline.survey import Preview, Survey, preview
from pipeline.vectors import VectorPlan
from pipeline.web import url_jobs
from workers import payloads, queues, tally
from workers.actors import declare_actors
from workers.broker import build_stub_broker
from workers.embed import finish_ingest
from workers.ledger import InMemoryLedger, Ledger, RunSummary
from workers.payloads import Skipped
from workers.queues import Actors
from workers.runtime import Runtime, install, uninstall


@dataclass(frozen=True)
class Targets:
    """What a run indexes: the roots to walk, absolute (explicit ones: named on the command line), and the pages."""

    roots: list[str]
    explicit: bool
    urls: list[str]


@dataclass(frozen=True)
class RunRequest:
    """What `knowledge index` was asked to do."""

    paths: tuple[str, ...] = ()
    reindex: bool = False
    # Absolute paths a caller's stat found deleted (`knowledge watch`): the documents at or under each
    # leave the store through the writer in this run, if a stat at planning time still finds them gone.
    gone: tuple[str, ...] = ()

    def targets(self, settings: Settings) -> Targets:
        """The roots (absolute: command-line paths from the working directory, configured ones from the
        config file's) and normalised URLs to index: those named, else knowledge.paths and knowledge.urls.

        Raises UsageError for a refused URL or nothing to index, before anything runs.
        """
        base = PathBase.at(settings.path_base)
        if not self.paths:
            if not settings.paths and not settings.urls:
                raise UsageError("nothing to index: pass PATHS or URLs, or list them under knowledge.paths or "
                                 "knowledge.urls in knowledge.yaml")
            roots = [base.locate(p, settings.config_dir) for p in settings.paths]
            return Targets(list(dict.fromkeys(roots)), False, normalize_urls(settings.urls))
        try:
            urls = normalize_urls(p for p in self.paths if looks_like_url(p))
        except ValueError as exc:
            raise UsageError(f"cannot index {exc}") from None
        roots = [base.locate(p) for p in self.paths if not looks_like_url(p)]
        return Targets(list(dict.fromkeys(roots)), True, urls)


URL_BATCH = 4  # pages per ingest message: fetches wait on the network, so spread them over the workers


def new_run_id() -> str:
    """A short, sortable, unique run id."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


@dataclass(frozen=True)
class StoreState:
    """What a run needs to know of the store before it enqueues: its fingerprints (read as the walk
    goes, through one read-only connection) and the run's vector plan."""

    stored: StoredFingerprints
    vector_plan: VectorPlan | None


@contextmanager
def store_state(settings: Settings, reindex: bool, probe: Probe | None = None) -> Iterator[StoreState]:
    """The store's state while a run is planned (the embedding server probed when configured)."""
    if not settings.db_path.is_file():
        yield StoreState(StoredFingerprints(None), vectors.plan(settings, reindex, probe))
        return
    conn = db.connect_readonly(settings.db_path)
    try:
        stored = StoredFingerprints(conn if schema.exists(conn, "documents") else None)
        yield StoreState(stored, vectors.plan(settings, reindex, probe, conn))
    finally:
        conn.close()


STALE_KEY = "stale"
WALK_KEY = "walk"  # the walk's own mark among a vector run's finished ingests (no batch key looks like it)
DELETED = "deleted"  # the reason a document removed as gone (RunRequest.gone) is recorded with


def mark_gone(found: Survey, gone: tuple[str, ...], stored: StoredFingerprints) -> None:
    """Add the stored documents at or under each gone path (stat-confirmed again now, and walked by no
    root of this run: the survey watched these paths) to the survey's stale documents, which the
    writer removes."""
    for path in gone:
        if not changes.gone(path):
            continue
        for doc, _ in stored.under(found.base.stored(path)):
            if doc not in found.watched:
                found.stale[doc] = Skip(doc, DELETED)


def plan_and_enqueue(
    settings: Settings, ledger: Ledger, actors: Actors, request: RunRequest, targets: Targets, run_id: str,
    probe: Probe | None = None,
) -> RunSummary:
    """Plan the vector tier, walk, enqueue the files to read as the walk finds them, record the rest.

    With embeddings the server is probed and reconciled with the pinned identity first, so an
    unreachable server or a mismatch fails here, before anything is written. Each batch leaves as
    soon as it is full, so the walk holds one batch whatever the tree's size. Returns the initial
    summary.
    """
    base = PathBase.at(settings.path_base)
    with store_state(settings, request.reindex, probe) as state:
        stored, vector_plan = state.stored, state.vector_plan
        info: dict[str, Any] = {"roots": [base.stored(r) for r in targets.roots], "explicit": targets.explicit,
                                "reindex": request.reindex, "started": time.time(), "base": base.directory}
        if targets.urls:
            info["urls"] = targets.urls
        if vector_plan is not None:
            info["vectors"] = vector_plan.to_info()
        ledger.start(run_id, info)
        lacking = vector_plan.backfill if vector_plan is not None else frozenset()
        found = Survey(settings, targets.roots, stored, request.reindex, settings.store_dir, backfill=lacking,
                       watch=[base.stored(p) for p in request.gone])
        size = settings.batch_files
        sent = 0
        batch: list[list[Any]] = []
        for job, _ in found.jobs():
            batch.append(job.to_wire())
            if len(batch) >= size:
                actors.ingest.send_with_options(args=(run_id, batch, request.reindex))
                sent, batch = sent + 1, []
        if batch:
            actors.ingest.send_with_options(args=(run_id, batch, request.reindex))
            sent += 1
        mark_gone(found, request.gone, stored)
        # Web pages are fetched by the ingest workers every run (never here); they are never pruned.
        pages = url_jobs(targets.urls, stored.lookup(targets.urls), request.reindex, lacking)
    removals = found.removals()
    ledger.skip(run_id, [(s.path, s.reason) for s in found.skipped])
    failures: list[tuple[str, str, str | None]] = [(e.path, "failed", e.reason) for e in found.failures]
    ledger.record(run_id, failures)
    total = found.files + len(found.failures) + len(pages) + len(found.stale)
    # Files unchanged by stat are counted, not listed, and the stored paths that are gone travel as one
    # list: a run over a large tree with nothing to do sends nothing per file.
    ledger.walked(run_id, total, found.unchanged, removals)
    tally.count_walk(total, (s.reason for s in found.skipped))
    tally.count_outcomes(failures, "walk")
    tally.count_unchanged(found.unchanged, "walk")
    if found.stale:  # the writer removes them like any file the ingest step skipped
        stale = [Skipped(s.path, s.reason) for s in found.stale.values()]
        ledger.stage(run_id, STALE_KEY, payloads.to_wire(stale))
        actors.write.send(run_id, STALE_KEY)
    for i in range(0, len(pages), URL_BATCH):
        actors.ingest.send_with_options(args=(run_id, [job.to_wire() for job in pages[i:i + URL_BATCH]],
                                              request.reindex))
        sent += 1
    if vector_plan is not None:  # the walk is one more ingest to wait for: the last to finish sends the tail
        ledger.backlog.expect_ingests(run_id, sent + 1)
        finish_ingest(ledger, actors, run_id, WALK_KEY, vector_plan)
    actors.finalize.send(run_id)
    return ledger.summary(run_id)


def dry_run(settings: Settings, request: RunRequest, targets: Targets) -> tuple[Preview, VectorPlan | None]:
    """What a run of request would do, and its vector plan (the server probed); nothing is written."""
    with store_state(settings, request.reindex) as state:
        found = Survey(settings, targets.roots, state.stored, request.reindex, settings.store_dir)
        return preview(found), state.vector_plan


Progress = Callable[[RunSummary], None]


def follow(ledger: Ledger, run_id: str, progress: Progress | None = None, poll: float = 0.1,
           timeout: float | None = None, alive: Callable[[], None] | None = None) -> RunSummary:
    """Poll the ledger until the run is complete or failed; raise TimeoutError past timeout."""
    deadline = None if timeout is None else time.monotonic() + timeout
    wait = min(0.01, poll)  # a run with nothing to read finishes in milliseconds: look again soon
    while True:
        summary = ledger.summary(run_id)
        if progress is not None:
            progress(summary)
        if summary.state in ("complete", "failed"):
            return summary
        if alive is not None:
            alive()
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} did not finish within {timeout:g} s")
        time.sleep(wait)
        wait = min(wait * 2, poll)


class EmbeddedEngine:
    """The embedded default: the writer lock, the store, and the actors on a StubBroker in-process."""

    def __init__(self, settings: Settings, idle_ms: int = 50) -> None:
        """idle_ms: how often an idle worker thread wakes (a message wakes it at once); also about how
        long stopping takes. Short for a one-shot run, long for a process that waits (`knowledge watch`)."""
        self.settings = settings
        self.idle_ms = idle_ms
        self.lock = WriteLock(settings.store_dir)
        self.ledger: Ledger = InMemoryLedger()
        self.broker: dramatiq.Broker | None = None
        self.workers: list[dramatiq.Worker] = []
        self.runtime: Runtime | None = None
        self.probe: Probe | None = None

    def __enter__(self) -> Self:
        self.lock.acquire("knowledge index (embedded)")
        try:
            emb = self.settings.embeddings
            if emb is not None:  # before the store is opened (or created): a dead server writes nothing
                self.probe = vectors.probe_server(emb)
            store = Store(self.settings.db_path, PathBase.at(self.settings.path_base))
            self.broker = build_stub_broker()
            actors = declare_actors(self.broker)
            self.runtime = Runtime(self.settings, self.ledger, store, actors)
            install(self.runtime)
            self.workers = [
                dramatiq.Worker(self.broker, queues=set(queues.WORKER_QUEUES) - {queues.EMBED},
                                worker_threads=self.settings.workers, worker_timeout=self.idle_ms),
                dramatiq.Worker(self.broker, queues=set(queues.WRITER_QUEUES), worker_threads=1,
                                worker_timeout=self.idle_ms),
            ]
            if emb is not None:  # `concurrency` embedding requests in flight, beside the ingest threads
                self.workers.append(dramatiq.Worker(self.broker, queues={queues.EMBED},
                                                    worker_threads=emb.concurrency, worker_timeout=self.idle_ms))
            for worker in self.workers:
                worker.start()
        except BaseException:
            self.lock.release()
            raise
        return self

    def run(self, request: RunRequest, progress: Progress | None = None, targets: Targets | None = None,
            timeout: float | None = None) -> RunSummary:
        """Index per request (its targets, when already resolved) and wait for the run to finish.

        Past timeout seconds the run is abandoned (KnowledgeError): what was written stays, and the
        next run converges on the rest.
        """
        if self.runtime is None:
            raise UsageError("EmbeddedEngine.run outside its `with` block")
        targets = targets if targets is not None else request.targets(self.settings)
        run_id = new_run_id()
        with tracer().start_as_current_span("index run", attributes={"knowledge.run_id": run_id,
                                                                     "knowledge.mode": "embedded"}):
            with tracer().start_as_current_span("walk"):
                probe, self.probe = self.probe, None
                plan_and_enqueue(self.settings, self.ledger, self.runtime.actors, request, targets, run_id, probe)
            try:
                return follow(self.ledger, run_id, progress, timeout=timeout)
            except TimeoutError as exc:
                raise KnowledgeError(f"{exc}; what was written stays, and `knowledge index` again finishes the rest"
                                     ) from None

    def __exit__(self, *exc: object) -> None:
        stoppers = [threading.Thread(target=worker.stop) for worker in self.workers]
        for stopper in stoppers:  # each stop waits out its threads' poll timeout: wait once, not twice
            stopper.start()
        for stopper in stoppers:
            stopper.join()
        if self.broker is not None:
            self.broker.close()
        if self.runtime is not None and self.runtime.store is not None:
            self.runtime.store.close()
        uninstall()
        self.lock.release()
