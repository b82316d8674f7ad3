"""kill -9 of an embedded `knowledge index` mid-run: nothing written is damaged, a re-run converges."""

from __future__ import annotations

import signal

import pytest

from bench.lib.corpus import generate
from tests.faults.conftest import Project

pytestmark = pytest.mark.slow

FILES = 800


def test_an_index_run_killed_mid_run_loses_nothing_and_a_rerun_converges(vector_project: Project) -> None:
    generate(vector_project.cwd / "docs", FILES, seed=21)
    run = vector_project.popen("index", "docs", "--json")
    vector_project.wait_for(lambda: vector_project.documents() >= 150 or run.poll() is not None, 90,
                            "150 documents written")
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=30)
    assert run.returncode == -signal.SIGKILL, "the run ended before it was killed: make the corpus larger"
    written = vector_project.documents()
    assert 150 <= written < FILES

    summary = vector_project.invariants().assert_recovered(check_first=True)
    assert summary["unchanged"] == FILES
