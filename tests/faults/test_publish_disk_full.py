"""A publish directory that fills up (a real small tmpfs): the publish says so, leaves no temporary copy,
and the earlier generations stay intact and verify."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pipeline import publish as pub
from tests.conftest import write_tree

RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def small_snapshots(workdir: Path) -> Iterator[Path]:
    """A 250 KiB tmpfs for the generations (skipped where this process cannot mount)."""
    target = workdir / "snaps"
    target.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small file system needs root")
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=250k,mode=0755", "tmpfs", str(target)], check=True,
                       capture_output=True, timeout=30)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True, timeout=30)


def test_a_full_publish_directory_keeps_the_earlier_generations_and_says_so(
        workdir: Path, run_cli: RunCli, small_snapshots: Path) -> None:
    write_tree(workdir, {f"docs/d{i}.md": f"# Doc {i}\n\nalpha beta word{i}\n" for i in range(3)})
    assert run_cli("index", "docs")[0] == 0
    results = [run_cli("publish", "--to", str(small_snapshots), "--keep", "9") for _ in range(4)]
    failed = [err for code, _, err in results if code != 0]
    assert failed, "the tmpfs never filled up"
    err = failed[0]
    assert "no space left" in err and "earlier generations are intact" in err and "Traceback" not in err, err
    good = pub.generations(small_snapshots)
    assert good and len(good) == 4 - len(failed)
    for number in good:
        assert pub.verify(small_snapshots, number).documents == 3
    assert not [p for p in small_snapshots.iterdir() if p.name.startswith(pub.TEMP_PREFIX)]
