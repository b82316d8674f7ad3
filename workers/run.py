"""Start, follow and summarise an index run.

plan_and_enqueue walks the roots, classifies files by stat against the store as the walk goes
(pipeline/survey.py), enqueues ingest batches as they fill and records what needs no reading;
follow polls the ledger until the writer closes the run. workers/engine.py runs these, in this
process (InProcessEngine) or through the broker (workers/distributed.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from config.errors import UsageError
from config.settings import Settings
from config.urls import looks_like_url, normalize_urls
from pipeline import changes, db, schema, vectors
from pipeline.embeddings import Probe
from pipeline.models import Skip
from pipeline.paged_fingerprints import StoredFingerprints
from pipeline.paths import PathBase
from pipeline.survey import Preview, Survey, outdated_policies, preview
from pipeline.vectors import VectorPlan
from pipeline.web import url_jobs
from workers import payloads, tally
from workers.embed import finish_ingest
from workers.ledger import Ledger, RunSummary
from workers.payloads import Skipped
from workers.queues import Actors


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
        if not request.reindex:
            info["rechunked"] = outdated_policies(stored, settings.formats, info["roots"])
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
