"""Backpressure between ingest and embedding, in-process engine against the slow loopback server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import workers.actors
import workers.backpressure
import workers.ingest
from config.settings import Settings
from tests.embedserver import EmbedServer
from tests.workers.helpers import index
from tests.workers.test_embed import (
    assert_every_chunk_has_its_own_vector,
    embed_requests,
    small_files,
)
from workers.engine import InProcessEngine
from workers.ledger import Ledger
from workers.run import RunRequest

LIMIT = 256
BATCH_FILES = 32  # one-chunk files: one ingest message appends at most 32 chunks


class Peaks:
    """Polls a ledger's newest run every millisecond (bounded in time) and keeps the backlog's peaks."""

    def __init__(self, ledger: Ledger, timeout: float = 120.0) -> None:
        self.ledger = ledger
        self.timeout = timeout
        self.pending = 0
        self.unwritten = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        deadline = time.monotonic() + self.timeout
        run_id = None
        while not self._stop.is_set() and time.monotonic() < deadline:
            if run_id is None:
                recent = self.ledger.recent(1)
                run_id = recent[0].run_id if recent else None
            else:
                state = self.ledger.backlog.backlog_state(run_id, "")
                self.pending = max(self.pending, state.pending)
                self.unwritten = max(self.unwritten, state.unwritten)
                self.samples += 1
            time.sleep(0.001)

    def __enter__(self) -> Peaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@pytest.fixture
def limited(make_settings: Callable[..., Settings], server: EmbedServer) -> Callable[..., Settings]:
    def build(**emb: Any) -> Settings:
        block = {"base_url": server.base_url, "model": "hashed-bow", "timeout": 5, "max_pending": LIMIT, **emb}
        return make_settings(paths=["docs"], batch_files=BATCH_FILES, embeddings=block)

    return build


def test_ingest_waits_at_the_pending_limit_and_every_chunk_still_lands_in_full_batches(
        workdir: Path, server: EmbedServer, limited) -> None:
    files = 64 * 20 + 9
    small_files(workdir, files)
    settings = limited()
    with InProcessEngine(settings) as engine:
        engine.start()  # the lock taken, the server probed, the actors started
        server.faults.slow = 0.3  # ~430 chunks/s: embedding is the bottleneck, as with a real model
        with Peaks(engine.ledger) as peaks:
            summary = engine.run(RunRequest())
    assert summary.state == "complete" and summary.counts["added"] == files and summary.counts["failed"] == 0
    assert peaks.samples > 50
    assert LIMIT // 2 < peaks.pending <= LIMIT + BATCH_FILES  # pressed against the limit, never past it
    assert peaks.unwritten <= 2 * LIMIT + BATCH_FILES
    sizes = [len(r) for r in embed_requests(server)]
    assert sum(sizes) == files  # every chunk sent once: a deferred message never ran twice
    assert sizes.count(64) / len(sizes) >= 0.95 and sorted(sizes)[0] == 9  # one tail flush, after the last ingest
    assert_every_chunk_has_its_own_vector(settings)


def test_a_message_that_finds_the_backlog_full_comes_back_later_and_runs_once(
        workdir: Path, server: EmbedServer, limited, monkeypatch: pytest.MonkeyPatch) -> None:
    files = 64 * 6
    small_files(workdir, files)
    deferred: list[str] = []
    real_defer = workers.backpressure.defer

    def recording_defer(runtime: Any, run_id: str, files_: list[list[Any]], force: bool) -> None:
        deferred.append(str(files_[0][0]))
        real_defer(runtime, run_id, files_, force)

    monkeypatch.setattr(workers.backpressure, "defer", recording_defer)
    settings = limited(max_pending=64)
    with InProcessEngine(settings) as engine:
        engine.start()  # the lock taken, the server probed, the actors started
        server.faults.slow = 0.05
        summary = engine.run(RunRequest())
    assert deferred, "the backlog was full at least once"
    assert summary.state == "complete" and summary.counts["added"] == files and summary.counts["failed"] == 0
    assert sum(len(r) for r in embed_requests(server)) == files  # a deferred message never read twice
    assert_every_chunk_has_its_own_vector(settings)


def test_messages_redelivered_around_deferral_still_converge(workdir: Path, server: EmbedServer, limited,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    files = 300
    small_files(workdir, files)
    crashed: set[Any] = set()
    real_ingest = workers.ingest.ingest_batch

    def ingest_then_die(runtime: Any, run_id: str, files_: list[Any], force: bool) -> str | None:
        key = real_ingest(runtime, run_id, files_, force)
        marker = (tuple(f[0] for f in files_), key is None)
        if marker not in crashed:  # done (or deferred), not acknowledged: the broker redelivers it
            crashed.add(marker)
            raise RuntimeError("worker lost after ingesting")
        return key

    monkeypatch.setattr(workers.actors, "ingest_batch", ingest_then_die)
    settings = limited(max_pending=64)
    with InProcessEngine(settings) as engine:
        engine.start()  # the lock taken, the server probed, the actors started
        server.faults.slow = 0.05
        summary = engine.run(RunRequest())
    assert summary.state == "complete" and summary.counts["added"] == files and summary.counts["failed"] == 0
    assert any(deferred for _, deferred in crashed)  # some message crashed right after deferring itself
    assert sum(len(r) for r in embed_requests(server)) >= files
    assert_every_chunk_has_its_own_vector(settings)


def test_a_lexical_run_never_consults_the_backlog(workdir: Path, make_settings,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> str:
        raise AssertionError("a lexical run must not be held back")

    monkeypatch.setattr(workers.backpressure, "admit", refuse)
    monkeypatch.setattr(workers.backpressure, "defer", refuse)
    small_files(workdir, 100)
    summary = index(make_settings(paths=["docs"], batch_files=4))
    assert summary.state == "complete" and summary.counts["added"] == 100
