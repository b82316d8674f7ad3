"""A store whose file system fills up mid-run (a real 1 MiB tmpfs mounted at the store directory): the
run stops at the first write that does not fit, with one line, and the store stays consistent."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import write_tree
from tests.faults.conftest import STORE, Project

FILES = 200


def _mount(target: Path, size: str) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(target)], check=True,
                   capture_output=True, timeout=30)


@pytest.fixture
def small_disk(project: Project) -> Iterator[Path]:
    """The store directory as a 1 MiB tmpfs of the test's own (skipped where this process cannot mount)."""
    target = project.cwd / STORE.parent
    target.mkdir(parents=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small file system needs root")
    try:
        _mount(target, "1m")
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc.stderr.strip()}")
    try:
        yield target
    finally:
        project.close()
        subprocess.run(["umount", "-l", str(target)], capture_output=True, timeout=30)


def test_a_full_disk_stops_the_run_at_the_first_failed_write_with_one_line(project: Project, small_disk: Path) -> None:
    rng = random.Random(7)
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 10)))
                  for _ in range(4000)]
    write_tree(project.cwd, {f"docs/f{i:03}.md": f"# Note {i}\n\n" + " ".join(rng.choices(vocabulary, k=1200)) + "\n"
                             for i in range(FILES)})  # ~2 MiB of text and its indexes: twice the disk

    started = time.monotonic()
    code, out, err = project.knowledge("index", "docs", timeout=120)
    elapsed = time.monotonic() - started

    assert "Traceback" not in err, err
    lines = out.splitlines()
    assert code == 1 and not [line for line in lines if "failed: docs/" in line], out[-2000:]
    stopped = [line for line in lines if "run failed:" in line]
    assert len(stopped) == 1 and "is full" in stopped[0] and "re-run knowledge index" in stopped[0], out[-2000:]
    assert elapsed < 60
    written = project.documents()
    assert 0 < written < FILES, written

    invariants = project.invariants()
    invariants.assert_check_passes()  # the full disk did no damage: what was written is whole
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True, timeout=30)
    invariants.assert_recovered()  # the run lock is free, and the re-run converges to the tree
