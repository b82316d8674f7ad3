"""The WAL shrinks after a run while `serve`'s readers stay open.

A read transaction held during `knowledge index --reindex` (a long search under load) keeps every
checkpoint from starting the WAL over, so it grows by the whole rewrite; without a checkpoint that
truncates it, it then kept that size for as long as any connection held the file (869 MB beside a
216 MB store, with serve up). The run's closing checkpoint waits briefly for the readers still
reading and cuts it back, while the readers' connections stay open and answer.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench.lib.corpus import generate
from config.loader import load_settings
from pipeline import db
from query.read_index import ReadIndex
from query.requests import SearchRequest
from query.service import QueryService
from tests.faults.conftest import Project

pytestmark = pytest.mark.slow

FILES = 300
PINNED = 4 * 1024 * 1024  # the held read transaction is let go once the WAL has grown past this
SHRUNK = 1024 * 1024


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def test_the_wal_is_cut_back_after_a_reindex_while_readers_stay_open(project: Project) -> None:
    generate(project.cwd / "docs", FILES, seed=33)
    assert project.knowledge("index", "docs")[0] == 0
    wal = Path(f"{project.db_path}-wal")
    settings = load_settings(None, None)
    index = ReadIndex(settings, 2)  # serve's pool of Readers, open from before the run to after it
    service = QueryService(settings, index)
    pin = db.connect_readonly(project.db_path)
    try:
        assert service.search(SearchRequest("the", 5)).to_json()["status"] == "ok"
        pin.execute("BEGIN")
        pin.execute("SELECT count(*) FROM chunks").fetchone()  # a long read: the WAL cannot start over
        run = project.popen("index", "docs", "--reindex", "--json")
        peak, pinned = 0, True
        deadline = time.monotonic() + 120
        while run.poll() is None:
            assert time.monotonic() < deadline, "the re-index did not finish"
            peak = max(peak, _size(wal))
            if pinned and peak > PINNED:
                pin.execute("COMMIT")  # the connection stays open; reads go on through the pool
                pinned = False
            if not pinned:
                assert service.search(SearchRequest("the", 5)).to_json()["status"] == "ok"
            time.sleep(0.05)
        _, err = run.communicate(timeout=60)
        assert run.returncode == 0, err
        assert not pinned, f"the WAL never grew past {PINNED} bytes (peak {peak}): nothing was pinned"
        after = _size(wal)
        assert after <= SHRUNK, f"the WAL kept {after} bytes after the run (peak {peak}; store " \
                                f"{project.db_path.stat().st_size})"
        assert service.search(SearchRequest("the", 5)).to_json()["status"] == "ok"
        assert pin.execute("SELECT count(*) FROM documents").fetchone()[0] == FILES
    finally:
        pin.close()
        index.close()
    project.invariants().assert_recovered()
