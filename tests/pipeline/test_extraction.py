"""The extraction bound: a reader past its deadline or memory limit is ended, the file skipped, the child replaced."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from config.errors import FileSkipped, PipelineError
from pipeline.extraction import MIB, Bound, Extraction
from pipeline.files import Parsed, parse_file
from tests.pipeline import extraction_faults as faults


@pytest.fixture
def pool():
    with Extraction(Bound(seconds=0.5, seconds_per_mib=0.0, memory_mib=256)) as extraction:
        yield extraction


def test_a_reader_past_its_deadline_is_ended_and_the_file_skipped_with_the_setting_named(pool) -> None:
    started = time.monotonic()
    with pytest.raises(FileSkipped, match=r"took longer than 0.5 s to read \(knowledge.extraction.timeout\)"):
        pool.call(faults.spin, 60.0, size=100)
    assert time.monotonic() - started < 15  # not the 60 s the reader wanted


def test_a_reader_within_its_deadline_answers(pool) -> None:
    assert pool.call(faults.spin, 0.05, size=100) > 0


def test_a_reader_past_its_memory_limit_is_skipped_naming_the_limit(pool) -> None:
    with pytest.raises(FileSkipped, match=r"needed more than 256 MiB to read \(knowledge.extraction.memory\)"):
        pool.call(faults.allocate, 1024, size=100)
    assert pool.call(faults.allocate, 16, size=100) == 16 * MIB  # the next file gets a fresh child


def test_one_child_serves_file_after_file_and_an_overrun_replaces_it(pool) -> None:
    first = pool.call(faults.pid, size=0)
    assert pool.call(faults.pid, size=0) == first
    assert first != os.getpid()
    with pytest.raises(FileSkipped):
        pool.call(faults.spin, 60.0, size=0)
    replaced = pool.call(faults.pid, size=0)
    assert replaced != first
    with pytest.raises(OSError):
        os.kill(first, 0)  # the overrunning child is gone, not left running


def test_a_readers_own_errors_cross_as_skips_and_failures(pool) -> None:
    with pytest.raises(FileSkipped, match=r"^encrypted PDF$"):
        pool.call(faults.refuse, "encrypted PDF", size=0)
    with pytest.raises(PipelineError, match=r"^unexpected error: ZeroDivisionError: division by zero$"):
        pool.call(faults.divide, 1, 0, size=0)
    assert pool.call(faults.divide, 1, 4, size=0) == 0.25  # the same child goes on


def test_a_child_that_dies_is_reported_and_replaced(pool) -> None:
    with pytest.raises(FileSkipped, match=r"its reader ended unexpectedly \(exit 3\)"):
        pool.call(faults.die, 3, size=0)
    assert pool.call(faults.divide, 6, 3, size=0) == 2.0


def test_the_deadline_grows_with_the_file() -> None:
    bound = Bound(seconds=10.0, seconds_per_mib=4.0, memory_mib=1024)
    assert bound.deadline(100) == 10.0
    assert bound.deadline(16 * MIB) == 64.0


def test_a_file_parsed_in_a_child_equals_the_file_parsed_here(pool) -> None:
    data = (b"---\ntitle: Budgets\ntags: [cost]\n---\n"
            b"# Budgets\n\nLimit spending per run.\n\n## Alerts\n\nPage on-call.\n")
    bounded = pool.call(parse_file, "docs/budgets.md", data, size=len(data))
    assert isinstance(bounded, Parsed)
    assert bounded == parse_file("docs/budgets.md", data)
    assert [c.heading_path for c in bounded.chunks] == ["Budgets", "Budgets > Alerts"]


def test_close_ends_the_idle_children() -> None:
    extraction = Extraction(Bound(seconds=5.0))
    child = extraction.call(faults.pid, size=0)
    extraction.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except OSError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the idle child outlived close()")


def test_a_child_mid_file_ends_when_its_parent_is_killed(tmp_path) -> None:
    script = (
        "import sys, threading\n"
        "from pipeline.extraction import Bound, Extraction\n"
        "from tests.pipeline import extraction_faults as faults\n"
        "extraction = Extraction(Bound(seconds=600.0))\n"
        "print(extraction.call(faults.pid, size=0), flush=True)\n"
        "extraction.call(faults.spin, 600.0, size=0)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[2])
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    time.sleep(0.3)  # the child is spinning on its 600 s file now
    parent.kill()
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{child}").exists():
        if Path(f"/proc/{child}/stat").read_text().rpartition(")")[2].split()[0] == "Z":
            break  # exited, waiting for its reaper
        time.sleep(0.1)
    else:
        assert not Path(f"/proc/{child}").exists(), "the child outlived its killed parent"


def test_a_batch_streams_through_one_child_and_an_overrun_skips_only_its_own_call(pool) -> None:
    outcomes = pool.call_each(faults.spin, [((0.01,), 0), ((60.0,), 0), ((0.01,), 0), ((0.01,), 0)])
    assert [type(o).__name__ for o in outcomes] == ["int", "FileSkipped", "int", "int"]
    assert str(outcomes[1]) == "took longer than 0.5 s to read (knowledge.extraction.timeout)"
    pids = pool.call_each(faults.pid, [((), 0)] * 3)
    assert len(set(pids)) == 1  # one child served the whole batch


def test_a_batch_keeps_each_calls_own_error_in_its_place(pool) -> None:
    outcomes = pool.call_each(faults.divide, [((1, 2), 0), ((1, 0), 0), ((3, 4), 0)])
    assert outcomes[0] == 0.5 and outcomes[2] == 0.75
    assert isinstance(outcomes[1], PipelineError) and "ZeroDivisionError" in str(outcomes[1])


def test_a_child_that_cannot_start_fails_each_call_of_the_batch_naming_it() -> None:
    with Extraction(Bound(seconds=5.0, memory_mib=8)) as starved:  # too little for Python's own imports
        outcomes = starved.call_each(faults.pid, [((), 0), ((), 0)])
    assert [type(o) for o in outcomes] == [PipelineError, PipelineError]
    assert all("the process that reads files did not start" in str(o) for o in outcomes)
